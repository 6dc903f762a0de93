"""`specperf history import|show|drift`, and recording at the end of a run (suite_run.record_history)."""

from __future__ import annotations

from nightly import nightly_dir
from records import HARDWARE_KEY, make_scenario
from specperf.cli import main
from specperf.suite_run import record_history


def test_import_backfills_run_directories_and_show_prints_the_series(database_url, tmp_path, capsys):
    dirs = [nightly_dir(tmp_path, n, value, vllm) for n, (value, vllm) in
            enumerate([(100, "0.31.0"), (101, "0.31.0"), (90, "0.32.0")])]
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
    assert main(["history", "--history", database_url, "import", str(good), str(tmp_path / "not-a-run")]) == 1
    out = capsys.readouterr()
    assert out.out.strip() == "history: night-0: 1 results recorded"
    assert out.err.splitlines() == [
        f"skipped: {good / 'results' / 'broken.json'}: corrupt result (not valid JSON: Expecting property name "
        f"enclosed in double quotes: line 1 column 2 (char 1))",
        f"skipped: {tmp_path / 'not-a-run'}: not a run directory (no results/ folder)"]


def test_drift_lists_what_moved(database_url, tmp_path, capsys):
    dirs = [nightly_dir(tmp_path, n, 100 if n < 3 else 70) for n in range(6)]
    main(["history", "--history", database_url, "import", *map(str, dirs)])
    capsys.readouterr()
    assert main(["history", "--history", database_url, "drift", "--since", "2026-11-01",
                 "--metrics", "throughput_tok_s"]) == 0
    assert capsys.readouterr().out.strip() == (f"-30.0%  {make_scenario().id}  throughput_tok_s on {HARDWARE_KEY}: "
                                               f"100 -> 70 over 6 runs")


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
