"""A private PostgreSQL server from Debian's packages (/usr/lib/postgresql/<version>/bin), for the
history store's tests and benchmark: initdb in a temporary folder, started on a free loopback port,
stopped and removed at the end.  As root it runs as the `postgres` user (PostgreSQL refuses root)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

ENV_URL = "SPECPERF_TEST_POSTGRES"  # a server of your own instead (a URL whose user may create databases)


def server_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server(fsync: bool = False):
    """Yields the URL of a fresh server's `postgres` database (user specperf, trust auth on loopback)."""
    binaries = server_binaries()
    if binaries is None:
        raise FileNotFoundError("PostgreSQL's server is not installed (Debian: apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="specperf-pg-"))
    as_user = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        folder.chmod(0o755)
        shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", _free_port()
    try:
        subprocess.run(
            [
                *as_user,
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "specperf",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync={'on' if fsync else 'off'}"
        subprocess.run(
            [
                *as_user,
                str(binaries / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(folder / "server.log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        try:
            yield f"postgresql+psycopg://specperf@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                [*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server_url: str, name: str):
    """A new, empty database on the server, dropped afterwards: its URL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
