"""Opening the history database named by a URL, and bringing its schema to this suite's version.

SQLite (a file, the embedded default) or PostgreSQL (a team's server), both through SQLAlchemy; the
schema comes from the Alembic migrations beside this module.  SQLite transactions begin IMMEDIATE
(the write lock up front) and wait up to a minute for it, so processes recording at once queue
instead of failing; PostgreSQL migrations hold an advisory lock, so a fresh database is created once.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from ..messages import one_line, shown_url

ENV_VAR = "SPECPERF_HISTORY"
OFF = ("off", "none")
DEFAULT_FILE = "history.sqlite"  # beside the run directories
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
LOCK_WAIT_S = 60
MIGRATION_LOCK = 0x5EC0_0001  # PostgreSQL advisory lock key


class HistoryError(Exception):
    """The history database cannot be used; the message is one line naming it and the problem."""


def history_url(option: str | None, reports_dir: Path) -> str | None:
    """--history, else $SPECPERF_HISTORY, else a SQLite file beside the reports; None when turned off."""
    value = option or os.environ.get(ENV_VAR) or ""
    if value.lower() in OFF:
        return None
    if not value:
        return f"sqlite:///{Path(reports_dir).resolve() / DEFAULT_FILE}"
    if "://" not in value:  # a plain path is a SQLite file
        return f"sqlite:///{Path(value).resolve()}"
    return value


def missing_sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names where it does not exist (None: it exists, or the URL is no SQLite file)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return None if Path(parsed.database).exists() else Path(parsed.database)


def open_engine(url: str) -> Engine:
    """An engine for `url`; PostgreSQL URLs without a driver use psycopg (version 3)."""
    try:
        parsed = make_url(url)
        _ = parsed.port  # a port that is no number fails here, not at the first query
    except (ArgumentError, ValueError):
        raise HistoryError(
            f"history {shown_url(url)}: not a database URL (sqlite:///FILE or postgresql://...)"
        ) from None
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() == "sqlite":
        if parsed.drivername != "sqlite":  # pysqlcipher, aiosqlite: modules this suite does not install
            raise HistoryError(
                f"history {shown_url(url)}: driver {parsed.drivername.partition('+')[2]!r} is not "
                "supported; use sqlite:///FILE"
            )
        if parsed.database and parsed.database != ":memory:":
            try:
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise HistoryError(f"history {shown_url(url)}: cannot create its folder: {err.strerror}") from None
        engine = create_engine(parsed, connect_args={"timeout": LOCK_WAIT_S})
        _immediate_transactions(engine)
        return engine
    if parsed.get_backend_name() != "postgresql":
        raise HistoryError(
            f"history {shown_url(url)}: {parsed.get_backend_name()} is not supported (SQLite or PostgreSQL)"
        )
    if parsed.drivername != "postgresql+psycopg":
        raise HistoryError(
            f"history {shown_url(url)}: driver {parsed.drivername.partition('+')[2]!r} is not "
            "supported; use postgresql:// (psycopg 3)"
        )
    return create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": 10})


def _immediate_transactions(engine: Engine) -> None:
    """SQLAlchemy's recipe for pysqlite: let SQLAlchemy emit BEGIN itself, as BEGIN IMMEDIATE."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _begin(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _migration_config(connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine, url: str) -> None:
    """Bring the schema to this suite's newest revision; refuse a database of a newer suite."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(MIGRATIONS))
    head = scripts.get_current_head()
    try:
        with engine.begin() as connection:
            if engine.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            current = MigrationContext.configure(connection).get_current_revision()
            if current == head:
                return
            if current is not None and current not in {s.revision for s in scripts.walk_revisions()}:
                raise HistoryError(
                    f"history {shown_url(url)}: schema revision {current} is newer than this suite's "
                    f"({head}); upgrade specperf to use it"
                )
            command.upgrade(_migration_config(connection), "head")
    except SQLAlchemyError as err:
        raise HistoryError(f"history {shown_url(url)}: {one_line(err, 300)}") from None
