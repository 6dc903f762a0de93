"""The history store's tests run on SQLite and on a real PostgreSQL server (Debian's, started here)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from postgres_server import ENV_URL, fresh_database, postgres_server  # noqa: E402

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server for the session: $SPECPERF_TEST_POSTGRES, else one started from Debian's
    binaries; without either the PostgreSQL cases skip, and fail under CI."""
    if os.environ.get(ENV_URL):
        yield os.environ[ENV_URL]
        return
    try:
        with postgres_server() as url:
            yield url
    except FileNotFoundError as err:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{err}: the CI runs the history store's tests on PostgreSQL")
        pytest.skip(str(err))


@pytest.fixture(params=BACKENDS)
def database_url(request, tmp_path):
    """An empty history database of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.sqlite'}"
        return
    server = request.getfixturevalue("postgres_url")
    with fresh_database(server, f"specperf_test_{uuid.uuid4().hex[:12]}") as url:
        yield url
