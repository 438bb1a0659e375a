"""A real PostgreSQL server for the tests: a throwaway cluster on 127.0.0.1, one per session.

Fixtures (imported by ``tests/conftest.py``, so every test directory has them):

* ``postgres_server`` (session) -> :class:`PostgresServer`: ``initdb`` of a
  cluster in ``/dev/shm`` (memory; the temp dir when that lacks room), started
  with ``pg_ctl`` on a free port of 127.0.0.1 (as the ``postgres`` system user
  when the tests run as root: PostgreSQL refuses to run as root), fast settings
  (``fsync=off``: nothing here needs to survive a power loss), stopped and
  deleted at the end of the session.
  ``new_database()`` -> a DSN of a fresh empty database (about 35 ms: a file
  copy of ``template0``); ``admin()`` a superuser connection;
  ``terminate(dsn)`` ends every backend of a database (the database "goes
  away" under its clients); ``restart()``.
* ``postgres_dsn`` -> a fresh database's DSN, per test
  (``postgresql://nbagent:<password>@127.0.0.1:<port>/<db>``: a real password,
  checked by the server with SCRAM, so tests can check it never leaks).

The engine is Debian's ``postgresql`` package (``.ci/ensure-postgres``
installs it; ``make test`` runs that). Without it, or without psycopg, the
tests using these fixtures skip, unless ``NBAGENT_REQUIRE_POSTGRES`` is set
(``make test`` sets it), when they fail: CI never skips them.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PASSWORD = "s3cret-Pa55word-never-shown"
"""The test role's password: checked by the server (SCRAM), so tests can check it never leaks."""
ROLE = "nbagent"


def postgres_required() -> bool:
    """True when a missing PostgreSQL must fail the tests instead of skipping them."""
    return os.environ.get("NBAGENT_REQUIRE_POSTGRES", "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )


def _bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: on PATH, or Debian's versioned directory."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(versions[-1]).parent if versions else None


# Where the cluster lives: memory (tmpfs) when there is room. Every test makes a database (a
# 7.5 MB copy of template0, so a worker's session leaves 1-1.5 GB): on this machine's disk
# (ext4 mounted with discard) CREATE DATABASE took 135-240 ms and deleting the cluster at the
# end of the session 30-50 s (minutes for 400 databases); in /dev/shm 35 ms and 1-2 s.
SHM = Path("/dev/shm")
SHM_MIN_FREE = 4 * 1024**3
"""Below this much free room in /dev/shm the cluster goes to the temp dir (on disk) instead."""
STALE_SECONDS = 3600.0
"""A cluster dir older than this with no live server is a killed session's: swept at start."""


def _cluster_parent() -> str | None:
    """``/dev/shm`` when it is a writable tmpfs with room; else None (the temp dir)."""
    try:
        st = os.statvfs(SHM)
    except OSError:
        return None
    if not os.access(SHM, os.W_OK) or st.f_bavail * st.f_frsize < SHM_MIN_FREE:
        return None
    return str(SHM)


def _sweep_stale_clusters(parent: Path) -> None:
    """Delete clusters of killed sessions in ``parent`` (memory, when it is /dev/shm).

    Only dirs whose server is gone (no ``postmaster.pid``, or its pid not alive) and that
    are older than :data:`STALE_SECONDS`: another session's cluster, still starting or
    running, is never touched.
    """
    now = time.time()
    for root in parent.glob("nbagent-pg-*"):
        try:
            if now - root.stat().st_mtime < STALE_SECONDS:
                continue
            pid_file = root / "data" / "postmaster.pid"
            if pid_file.exists():
                pid = int(pid_file.read_text().split("\n", 1)[0])
                try:
                    os.kill(pid, 0)
                    continue  # a server still runs on it
                except ProcessLookupError:
                    pass
        except (OSError, ValueError):
            continue
        shutil.rmtree(root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One throwaway cluster (see the module docstring)."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        parent = _cluster_parent()
        if parent is not None:
            _sweep_stale_clusters(Path(parent))
        self.root = Path(tempfile.mkdtemp(prefix="nbagent-pg-", dir=parent))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        self._names = itertools.count()
        self._lock = threading.Lock()

    # -- running the binaries ----------------------------------------------------
    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({out.returncode}): {out.stdout}{out.stderr}"
                f"{self.log_text()}"
            )
        return out

    def log_text(self) -> str:
        try:
            return "\n--- server log ---\n" + self.log.read_text()[-4000:]
        except OSError:
            return ""

    def start(self) -> None:
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as_postgres:
            shutil.chown(pwfile, "postgres", "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--pwfile",
            str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        self._pg_ctl_start()
        with self.admin() as conn:
            conn.execute(f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'")

    def _pg_ctl_start(self) -> None:
        options = (
            f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300 "
            "-c shared_buffers=32MB"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def pause(self) -> None:
        """Stop the server (every connection is cut; nothing answers) until :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start a paused server again, on the same port."""
        self._pg_ctl_start()

    def restart(self) -> None:
        """Stop the server (every connection is cut) and start it again on the same port."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self._pg_ctl_start()

    # -- databases -----------------------------------------------------------------
    def admin(self, dbname: str = "postgres") -> Any:
        """A superuser connection (unix socket, trusted), autocommit."""
        import psycopg

        return psycopg.connect(
            host=str(self.root), port=self.port, user="postgres", dbname=dbname, autocommit=True
        )

    def dsn(self, dbname: str, *, password: str = PASSWORD) -> str:
        return f"postgresql://{ROLE}:{password}@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """A fresh empty database owned by the test role; its DSN."""
        with self._lock:
            name = f"t{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(
                f"CREATE DATABASE {name} OWNER {ROLE} TEMPLATE template0 STRATEGY FILE_COPY"
            )
        return self.dsn(name)

    def terminate(self, dsn: str) -> int:
        """End every backend connected to ``dsn``'s database (returning once they are gone);
        how many there were."""
        dbname = dsn.rsplit("/", 1)[1].split("?")[0]
        with self.admin() as conn:
            rows = conn.execute(  # waits (up to 10 s) until each backend has exited
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchall()
        return len(rows)


_server: PostgresServer | None = None
_failure: str | None = None


def _unavailable(why: str) -> None:
    if postgres_required():
        pytest.fail(f"PostgreSQL is required (NBAGENT_REQUIRE_POSTGRES is set): {why}")
    pytest.skip(f"no PostgreSQL server for the tests: {why} (run .ci/ensure-postgres)")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    global _server, _failure
    if _failure is not None:
        _unavailable(_failure)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _failure = "psycopg is not installed (pip install 'nbagent[postgres]')"
        _unavailable(_failure)
    bindir = _bindir()
    if bindir is None:
        _failure = "initdb and pg_ctl are not installed (Debian: apt-get install postgresql)"
        _unavailable(_failure)
        raise AssertionError("unreachable")
    server = PostgresServer(bindir)
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        server.stop()
        _failure = f"the server did not start: {exc}"
        _unavailable(_failure)
    _server = server
    try:
        yield server
    finally:
        _server = None
        server.stop()


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """A fresh empty database's DSN (with the test role's password)."""
    return postgres_server.new_database()


__all__ = ["PASSWORD", "PostgresServer", "postgres_dsn", "postgres_required", "postgres_server"]
