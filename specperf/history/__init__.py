"""Run history in a database: every run's results, metric values, round samples and verdicts.

SQLite by default (reports/history.sqlite), PostgreSQL for a team; chosen by --history URL or
$SPECPERF_HISTORY.  `database` opens it and migrates the schema (Alembic, migrations/), `tables`
declares the schema, `record` stores runs, `queries` reads series and drift.
"""

from __future__ import annotations

from pathlib import Path

from ..messages import shown_url
from ..records import RunFile, ScenarioResult
from .database import HistoryError, history_url, migrate, missing_sqlite_file, open_engine
from .queries import Reader
from .record import Recorded, record_results, record_run_dir

__all__ = ["History", "HistoryError", "history_url", "recorded_gate_pairs"]


class History:
    """One history database, opened and migrated to this suite's schema."""

    def __init__(self, url: str, read_only: bool = False):
        """read_only: for commands that only read, which must create nothing: a SQLite file that
        does not exist is HistoryError, not a new database."""
        self.url = url
        if read_only and (missing := missing_sqlite_file(url)):
            raise HistoryError(
                f"history {shown_url(url)}: no such database file {missing} (nothing recorded there yet)"
            )
        self.engine = open_engine(url)
        try:
            migrate(self.engine, url)
        except BaseException:
            self.engine.dispose()
            raise

    def record(self, run_id: str, run: RunFile | None, results: list[ScenarioResult]) -> Recorded:
        return record_results(self.engine, self.url, run_id, run, results)

    def record_run_dir(self, run_dir: Path) -> Recorded:
        return record_run_dir(self.engine, self.url, run_dir)

    def reader(self) -> Reader:
        return Reader(self.engine, self.url)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def recorded_gate_pairs(url: str, hardware_key: str) -> list[tuple[list[float], list[int]]]:
    """The pairs of the newest upgrade gates on record on that hardware (Reader.gate_pairs); none where
    the database does not exist yet.  HistoryError where it cannot be read."""
    if missing_sqlite_file(url):
        return []
    with History(url) as history:
        return history.reader().gate_pairs(hardware_key)
