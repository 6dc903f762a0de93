"""The run file of a session and its merge across pytest-xdist workers (no engine involved)."""

from __future__ import annotations

from records import make_record

from specperf.run.session import merge_run_files, summary_lines


def worker_run(started: str, scenarios: int, starts: int, keys: list[str], wall_s: float,
               interrupted: bool = False) -> dict:
    return {
        "run_id": "20260101-000000-cpu-smoke", "profile": "cpu-smoke", "started_at": started,
        "finished_at": "2026-01-01T00:10:00+00:00", "interrupted": interrupted, "engine_keys": keys,
        "stats": {"engine_starts": starts, "engine_start_s": 10.0 * starts, "warmup_s": 1.0, "measure_s": 5.0,
                  "scenarios": scenarios, "errors": 0, "resumed": 0, "wall_s": wall_s},
    }


def test_worker_run_files_merge_into_one():
    merged = merge_run_files([worker_run("2026-01-01T00:00:02+00:00", 7, 3, ["a", "b", "c"], 300.0),
                              worker_run("2026-01-01T00:00:01+00:00", 12, 5, ["d", "e", "f", "g", "h"], 420.0)])
    assert merged["started_at"] == "2026-01-01T00:00:01+00:00"
    assert merged["stats"]["scenarios"] == 19 and merged["stats"]["engine_starts"] == 8
    assert merged["stats"]["engine_start_s"] == 80.0
    assert merged["stats"]["wall_s"] == 420.0                  # workers ran side by side
    assert merged["engine_keys"] == list("abcdefgh") and merged["workers"] == 2
    assert merged["interrupted"] is False


def test_an_interrupted_worker_marks_the_run_interrupted():
    merged = merge_run_files([worker_run("t", 1, 1, ["a"], 1.0), worker_run("t", 1, 1, ["b"], 1.0, True)])
    assert merged["interrupted"] is True


def test_summary_names_engine_starts_keys_and_improvements():
    improved = make_record()
    improved["verdict"] = {"status": "improvement"}
    passed = make_record()
    passed["verdict"] = {"status": "pass"}
    lines = summary_lines(worker_run("t", 2, 2, ["a", "b"], 30.0), [improved, passed])
    assert "2 scenarios (0 resumed), 0 errors, 2 engine starts for 2 engine keys" in lines[0]
    assert lines[-1] == ("1 improved: consider refreshing their baselines (--update-baselines): "
                         + improved["scenario"]["id"])
