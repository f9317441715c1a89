"""F37: the CLI imports the daemon client only when a daemon actually runs; nothing points back up.

``acagent run`` asks :mod:`acagent.client._discovery` (standard library only) first; a
``daemon.json`` left by a killed daemon (dead pid) must not pull in httpx/websockets and the
remote client (12 % of a one-shot run before). And the remote client no longer imports the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from acagent.cli._common import _daemon_client_factory, build_settings
settings = build_settings()
print(_daemon_client_factory(settings) is None)
print(sorted(m for m in ("httpx", "websockets", "acagent.client._remote") if m in sys.modules))
"""


def _probe(home: Path) -> list[str]:
    env = {"ACAGENT_HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_stale_daemon_json_imports_no_remote_client(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (home / "daemon.json").write_text(
        json.dumps({"pid": dead.pid, "host": "127.0.0.1", "port": 9, "url": "http://127.0.0.1:9"})
    )
    assert _probe(home) == ["True", "[]"]


def test_no_daemon_json_imports_no_remote_client(tmp_path: Path) -> None:
    assert _probe(tmp_path) == ["True", "[]"]


def test_the_remote_client_does_not_import_the_cli() -> None:
    code = "import sys, acagent.client._remote; print([m for m in sys.modules if m.split('.')[:2] == ['acagent', 'cli']])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
