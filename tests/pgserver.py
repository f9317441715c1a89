"""A throw-away PostgreSQL server for tests and benchmarks: Debian's binaries, a temp dir, a free port.

``initdb`` + ``pg_ctl start`` run as the ``postgres`` user (through ``runuser`` when this process
is root: PostgreSQL refuses to run as root) in a fresh directory under ``/tmp`` that belongs to
that user; :meth:`PgServer.stop` uses ``-m immediate`` (a crash, as far as the server knows) and
the directory is removed. Password authentication (scram) on TCP, so a wrong password is a real
refusal; local socket connections are trusted (used only by ``psql`` in the helpers).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PASSWORD", "PgServer", "find_pg_bin"]

PASSWORD = "s3cret-pw"


def find_pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``initdb`` and ``pg_ctl`` (None when absent)."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for path in reversed(found):
        if (path / "initdb").exists():
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_OWNER = "owner.pid"
"""The pid of the process that made a cluster's directory (see :func:`reap_stale`)."""


def reap_stale(bin_dir: Path) -> list[Path]:
    """Stop and remove the clusters whose owning process is gone; returns their directories.

    A test run killed from outside (a ``timeout``, Ctrl-C twice, the CI's limit) never reaches
    :meth:`PgServer.close`: its server would run on, holding memory and a port, until the machine
    restarts. The next :class:`PgServer` made on the machine cleans such clusters up.
    """
    reaped = []
    for root in map(Path, glob.glob(os.path.join(tempfile.gettempdir(), "acagent-pg-*"))):
        try:
            pid = int((root / _OWNER).read_text())
        except (OSError, ValueError):
            continue  # an older run's cluster, or one being made: not ours to judge
        try:
            os.kill(pid, 0)
            continue  # its owner runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        cmd = [str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "-w", "stop"]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        with contextlib.suppress(Exception):
            subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)
        reaped.append(root)
    return reaped


class PgServer:
    """One PostgreSQL cluster in a temp dir. Use as a context manager (always stopped and removed).

    Args:
        bin_dir: the directory of ``initdb``/``pg_ctl``/``psql``.
        fsync: keep ``fsync`` on (benchmarks); tests turn it off for speed — a killed server
            still loses nothing the OS has, which is what the fault tests exercise.
    """

    def __init__(self, bin_dir: Path, *, fsync: bool = False) -> None:
        self.bin = bin_dir
        self.fsync = fsync
        reap_stale(bin_dir)
        self.root = Path(tempfile.mkdtemp(prefix="acagent-pg-"))
        (self.root / _OWNER).write_text(str(os.getpid()))
        self.data = self.root / "data"
        self.port = _free_port()
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        self._dbs = 0

    # -------------------------------------------------------------- process control

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if self._as_postgres else list(args)

    def _run(self, *args: str, timeout: float = 60) -> str:
        proc = subprocess.run(
            self._cmd(*args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr or proc.stdout}")
        return proc.stdout

    def start(self) -> PgServer:
        """initdb (first time) and start; returns once the server accepts connections."""
        if not self.data.exists():
            if self._as_postgres:
                shutil.chown(self.root, "postgres", "postgres")
            pwfile = self.root / "pw"
            pwfile.write_text(PASSWORD + "\n")
            if self._as_postgres:
                shutil.chown(pwfile, "postgres", "postgres")
            self._run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--pwfile",
                str(pwfile),
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "-E",
                "UTF8",
                "--no-sync",
            )
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
            f" -c fsync={'on' if self.fsync else 'off'} -c full_page_writes={'on' if self.fsync else 'off'}"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.log), "-w", "start"
        )
        return self

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server (``immediate``: no checkpoint, as after a crash)."""
        with contextlib.suppress(Exception):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (``mode``) and start again on the same port."""
        self.stop(mode)
        self.start()

    def close(self) -> None:
        """Stop and remove the directory."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- databases

    def url(self, db: str = "postgres", *, password: str = PASSWORD, host: str = "127.0.0.1") -> str:
        """A ``postgresql://`` URL for ``db`` over TCP with password auth."""
        return f"postgresql://postgres:{password}@{host}:{self.port}/{db}"

    def psql(self, sql: str, db: str = "postgres") -> str:
        """Run ``sql`` through ``psql`` on the local socket; returns the unaligned output."""
        return self._run(
            str(self.bin / "psql"),
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        )

    def create_schema(self, db: str) -> str:
        """A new empty schema in ``db`` (cheaper than a database); returns a URL whose
        ``search_path`` is that schema (asyncpg passes unknown URL parameters as server settings)."""
        self._dbs += 1
        name = f"s_{os.getpid()}_{self._dbs}"
        self.psql(f'CREATE SCHEMA "{name}"', db=db)
        return f"{self.url(db)}?search_path={name}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        self._dbs += 1
        name = f"{prefix}_{os.getpid()}_{self._dbs}_{int(time.time() * 1000) % 100000}"
        self.psql(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)
