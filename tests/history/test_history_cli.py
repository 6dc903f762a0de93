"""`specperf history import|show|drift`, and recording at the end of a run (suite/closing.py record_history)."""

from __future__ import annotations

import pytest
from nightly import nightly_dir
from records import HARDWARE_KEY, make_scenario

from specperf.cli import main
from specperf.suite.closing import record_history


def test_import_backfills_run_directories_and_show_prints_the_series(database_url, tmp_path, capsys):
    dirs = [
        nightly_dir(tmp_path, n, value, vllm)
        for n, (value, vllm) in enumerate([(100, "0.31.0"), (101, "0.31.0"), (90, "0.32.0")])
    ]
    assert main(["history", "--history", database_url, "import", *map(str, dirs)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"history: night-{n}: 1 results recorded" for n in range(3)]
    assert main(["history", "--history", database_url, "import", str(dirs[0])]) == 0
    assert capsys.readouterr().out.strip() == "history: night-0: 0 results recorded, 1 already there"

    assert main(["history", "--history", database_url, "show", make_scenario().id]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{make_scenario().id} throughput_tok_s on {HARDWARE_KEY}: 3 runs"
    assert [line.split()[2] for line in lines[1:]] == ["night-0", "night-1", "night-2"]
    assert lines[3].endswith("<- vLLM changed") and "vllm 0.32.0" in lines[3]


def test_import_names_and_skips_what_it_cannot_read(database_url, tmp_path, capsys):
    good = nightly_dir(tmp_path, 0, 100)
    (good / "results" / "broken.json").write_text("{not json")
    (tmp_path / "not-a-run").mkdir()
    assert main(["history", "--history", database_url, "import", str(good), str(tmp_path / "not-a-run")]) == 2
    out = capsys.readouterr()
    assert out.out.strip() == "history: night-0: 1 results recorded"
    assert out.err.splitlines() == [
        f"skipped: {good / 'results' / 'broken.json'}: corrupt result (not valid JSON: Expecting property name "
        f"enclosed in double quotes: line 1 column 2 (char 1))",
        f"skipped: {tmp_path / 'not-a-run'}: not a run directory (no results/ folder)",
    ]


def test_drift_lists_what_moved(database_url, tmp_path, capsys):
    dirs = [nightly_dir(tmp_path, n, 100 if n < 3 else 70) for n in range(6)]
    main(["history", "--history", database_url, "import", *map(str, dirs)])
    capsys.readouterr()
    assert (
        main(["history", "--history", database_url, "drift", "--since", "2026-11-01", "--metrics", "throughput_tok_s"])
        == 0
    )
    assert capsys.readouterr().out.strip() == (
        f"-30.0%  {make_scenario().id}  throughput_tok_s on {HARDWARE_KEY}: 100 -> 70 over 6 runs"
    )


def test_an_unreachable_database_is_one_line_and_the_run_folder_stays(tmp_path, capsys):
    folder = nightly_dir(tmp_path, 0, 100)
    url = "postgresql://specperf@127.0.0.1:1/history"
    (line,) = record_history(url, folder)
    assert line.startswith("history postgresql://specperf@127.0.0.1:1/history: ")
    assert line.endswith(f"; not recorded, the run folder is kept: specperf history import {folder}")
    assert (folder / "results").is_dir() and (folder / "run.json").is_file()
    assert main(["history", "--history", url, "show", "x"]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith("specperf: error: history postgresql://specperf@127.0.0.1:1/history: ")


def test_secrets_in_a_history_url_are_never_shown(capsys):
    from specperf.messages import shown_url

    url = "postgresql://me:hunter2@127.0.0.1:1/h?sslpassword=s3cret&password=p4ss&sslmode=require"
    assert shown_url(url) == "postgresql://me:***@127.0.0.1:1/h?sslpassword=***&password=***&sslmode=require"
    assert main(["history", "--history", url, "show", "x"]) == 2
    error = capsys.readouterr().err
    assert "hunter2" not in error and "s3cret" not in error and "p4ss" not in error


@pytest.mark.parametrize(
    "url, problem",
    [
        ("postgresql://127.0.0.1:notaport/h", "not a database URL"),
        ("postgresql+psycopg2://127.0.0.1/h", "driver 'psycopg2' is not supported; use postgresql://"),
        # a driver module this suite does not install: once a ModuleNotFoundError, with the key printed
        ("sqlite+pysqlcipher://:KEY@//x/y.db", "driver 'pysqlcipher' is not supported; use sqlite:///FILE"),
        ("sqlite+aiosqlite:////tmp/h.sqlite", "driver 'aiosqlite' is not supported; use sqlite:///FILE"),
    ],
)
def test_a_bad_history_url_is_one_line(url, problem, capsys, tmp_path):
    run_dir = nightly_dir(tmp_path, 0, 100)
    for verb in (["show", "x"], ["import", str(run_dir)]):  # reading, and writing
        assert main(["history", "--history", url, *verb]) == 2
        (error,) = capsys.readouterr().err.splitlines()
        assert error.startswith("specperf: error: history ") and "KEY" not in error
    assert problem in error


def test_a_folder_that_cannot_be_made_is_named_without_the_urls_secret(tmp_path):
    from specperf.history import HistoryError
    from specperf.history.database import open_engine

    (tmp_path / "file").write_text("")
    with pytest.raises(HistoryError) as err:
        open_engine(f"sqlite:///{tmp_path}/file/sub/h.sqlite?password=KEY")
    assert "cannot create its folder" in str(err.value) and "KEY" not in str(err.value)


def test_reading_commands_create_nothing(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "history.sqlite"
    for verb in (["show", "x"], ["drift"]):
        assert main(["history", "--history", f"sqlite:///{missing}", *verb]) == 2
        assert "no such database file" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_rows_of_the_wrong_type_in_sqlite_are_skipped_or_one_line(tmp_path, capsys):
    import sqlite3

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    dirs = [nightly_dir(tmp_path, n, 100) for n in range(3)]
    assert main(["history", "--history", url, "import", *map(str, dirs)]) == 0
    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        db.execute(
            "UPDATE metric_values SET value = 'fast' WHERE rowid = (SELECT min(rowid) FROM metric_values "
            "WHERE metric = 'throughput_tok_s')"
        )
    capsys.readouterr()
    assert main(["history", "--history", url, "show", make_scenario().id]) == 0
    assert "2 runs" in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        db.execute("UPDATE results SET finished_at = 'not a time'")
    for verb in (["show", make_scenario().id], ["drift"]):
        assert main(["history", "--history", url, *verb]) == 2
        (error,) = capsys.readouterr().err.splitlines()
        assert "unreadable row" in error


@pytest.mark.parametrize("column", ["results.hardware_key", "runs.run_id", "results.vllm"])
def test_a_blob_in_a_text_column_of_sqlite_is_skipped_in_one_line(tmp_path, capsys, column):
    """SQLite keeps a BLOB in any column: `history show` once raised a TypeError."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    dirs = [nightly_dir(tmp_path, n, 100) for n in range(3)]
    assert main(["history", "--history", url, "import", *map(str, dirs)]) == 0
    table, name = column.split(".")
    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        db.execute(f"UPDATE {table} SET {name} = X'00ff' WHERE rowid = (SELECT min(rowid) FROM {table})")
    capsys.readouterr()
    for verb in (["show", make_scenario().id], ["drift"]):
        assert main(["history", "--history", url, *verb]) == 0
        out, err = capsys.readouterr()
        assert "Traceback" not in err and all(line.startswith("history: ") for line in err.splitlines())
    assert "holds no text: skipped" in err or "no scenario has enough runs" in out


@pytest.mark.parametrize("since", ["999999999d", "2026-13-01"])
def test_a_window_no_date_can_start_is_a_usage_error(since, capsys):
    """999999999 days ago is before the year 1: once an OverflowError's traceback."""
    with pytest.raises(SystemExit) as done:
        main(["history", "--history", "sqlite:////nonexistent/h.sqlite", "drift", "--since", since])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"argument --since: invalid parse_since value: '{since}'")
