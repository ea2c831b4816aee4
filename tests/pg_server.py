"""A throwaway PostgreSQL server on loopback, from Debian's ``postgresql`` binaries (used by tests and benchmarks).

``PostgresServer().start()`` runs ``initdb`` into a fresh temporary directory, starts ``postgres`` on a free loopback
port (unix socket in the same directory, ``fsync=off``: the data dies with the test run), creates a database and
exposes its DSN; ``stop()`` stops the server and removes the directory. PostgreSQL refuses to run as root: as root,
every step runs as the ``postgres`` system user (created by the Debian package) through ``runuser``, in a directory
owned by that user.

``MIDDLEWARE_KIT_PG_DSN``, when set, names an existing server to use instead (nothing is started or stopped).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable", "find_bin_dir", "running_postgres"]

DATABASE = "middleware_kit"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server could be started (binaries missing, no ``postgres`` user, initdb or start failed)."""


def find_bin_dir() -> Path | None:
    """Directory holding ``initdb`` and ``pg_ctl``: the newest ``/usr/lib/postgresql/*/bin``, else ``PATH``."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self) -> None:
        self.dsn = ""
        self._dir: Path | None = None
        self._bin: Path | None = None
        self._user: str | None = None

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self._dir)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self) -> PostgresServer:
        external = os.environ.get("MIDDLEWARE_KIT_PG_DSN")
        if external:
            self.dsn = external
            return self
        self._bin = find_bin_dir()
        if self._bin is None:
            raise PostgresUnavailable(
                "PostgreSQL binaries not found (/usr/lib/postgresql/*/bin/initdb): apt-get install postgresql"
            )
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable("running as root and there is no 'postgres' system user") from exc
            self._user = "postgres"
        self._dir = Path(tempfile.mkdtemp(prefix="mkit-pg-"))
        if self._user is not None:
            os.chown(self._dir, owner.pw_uid, owner.pw_gid)
        data, log = self._dir / "data", self._dir / "server.log"
        port = _free_port()
        try:
            self._run(str(self._bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                      "--no-sync", "--no-instructions")
            options = (f"-p {port} -k {self._dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                       f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
            self._run(str(self._bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options,
                      "start")
            self._run(str(self._bin / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", DATABASE)
        except (PostgresUnavailable, OSError, subprocess.TimeoutExpired) as exc:
            detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            self.stop()
            raise PostgresUnavailable(f"{exc}\n{detail}".strip()) from exc
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/{DATABASE}"
        return self

    def stop(self) -> None:
        if self._dir is None:
            return
        data = self._dir / "data"
        if self._bin is not None and (data / "postmaster.pid").exists():
            with contextlib.suppress(PostgresUnavailable, OSError, subprocess.TimeoutExpired):
                self._run(str(self._bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """A started server's DSN for the duration of the ``with`` block."""
    server = PostgresServer().start()
    try:
        yield server.dsn
    finally:
        server.stop()
