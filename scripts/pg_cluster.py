"""Try the scale-out path on one machine: ``python scripts/pg_cluster.py`` (Ctrl-C stops everything).

Starts a throw-away PostgreSQL (Debian's ``postgresql`` package; tests/pgserver.py) and three
``acagent serve`` daemons on 127.0.0.2, 127.0.0.3 and 127.0.0.4 sharing it, each with its own
``ACAGENT_HOME`` under a temp dir; each daemon prints its login URL. Provider settings come from
your environment (``OPENAI_API_KEY``, ``ACAGENT_MODEL``…), as for ``acagent serve``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pgserver import PgServer, find_pg_bin  # noqa: E402


def main() -> int:
    """Run PostgreSQL and three daemons until Ctrl-C."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        sys.stderr.write("PostgreSQL binaries not found: apt-get install -y postgresql\n")
        return 1
    procs: list[subprocess.Popen[str]] = []
    with PgServer(bin_dir, fsync=True) as pg, tempfile.TemporaryDirectory(prefix="acagent-cluster-") as tmp:
        url = pg.create_database("acagent")
        try:
            for i in (2, 3, 4):
                home = Path(tmp) / f"d{i}"
                home.mkdir()
                env = {**os.environ, "ACAGENT_HOME": str(home)}
                cmd = ["acagent", "serve", "--host", f"127.0.0.{i}", "--port", "8765", "--journal", url]
                procs.append(subprocess.Popen([*cmd, "--daemon-id", f"d{i}"], env=env, text=True))
            sys.stdout.write(f"journal: {pg.url('acagent', password='***')}\n")
            sys.stdout.flush()
            while all(p.poll() is None for p in procs):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
