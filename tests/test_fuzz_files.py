"""The fuzz pass (tests/fuzz_files.py) on every commit: a few mutated copies of the real runs per kind
of file, each driven through the commands that read it; and the pass's own checks, shown to catch
each way a command can break what must hold."""

from __future__ import annotations

import sys
import time

import fuzz_files
import pytest
from fuzz_files import KINDS, Case, check, collect, commands, fuzz, run_command, template, unusable

CASES_PER_KIND = 6  # benchmarks/fuzz_files.py runs hundreds: docs/methodology/hardening.md


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    template(root / "template")
    return root


@pytest.mark.parametrize("kind", KINDS)
def test_no_mutated_file_of_any_kind_breaks_a_command(folder, kind):
    outcomes = fuzz(folder, kind, CASES_PER_KIND, pytest_collections=1)
    assert len({o.mutation for o in outcomes}) == CASES_PER_KIND
    broke = [f"{o.mutation} | {o.command} | {o.problems}" for o in outcomes if o.problems]
    assert not broke, "\n".join(broke)


def test_every_command_passes_on_the_untouched_runs(folder):
    """The checks flag nothing where nothing is wrong, and every command reads the real runs."""
    case = Case(folder / "template")
    for kind in KINDS:
        for argv, owns in commands(case, kind):
            assert check(case, argv, owns) == [], (kind, argv)
    code, out, _ = run_command(case, collect(case))
    assert (code, out.strip().splitlines()[-1].split(" in ")[0]) == (0, "2 tests collected")


def _writes_into_the_run(case):
    (case.run / "stray.txt").write_text("x")
    return 0


def _prints_a_traceback(case):
    print("Traceback (most recent call last):\n  File ...\nKeyError: 'forward'", file=sys.stderr)
    return 2


def _prints_many_lines(case):
    print("\n".join(f"problem {n}" for n in range(5)), file=sys.stderr)
    return 2


def _hangs(case):
    while True:
        time.sleep(0.01)


@pytest.mark.parametrize(
    "command, problem",
    [
        (lambda case: {}["forward"], "raised KeyError: 'forward'"),
        (lambda case: 3, "exit 3"),
        (_prints_a_traceback, "printed a traceback: KeyError: 'forward'"),
        (_prints_many_lines, "5 lines on stderr"),
        (_writes_into_the_run, "changed what it does not own"),
        (_hangs, "ran past 0 s"),
    ],
)
def test_the_checks_catch_each_way_a_command_can_break(tmp_path, monkeypatch, command, problem):
    case = template(tmp_path / "case")
    monkeypatch.setattr(fuzz_files, "_in_process", lambda case, argv: command(case))
    if command is _hangs:
        monkeypatch.setattr(fuzz_files, "TIME_BOUND_S", 0.2)
    found = check(case, ["report"], [tmp_path / "case" / "out"])
    assert any(p.startswith(problem) for p in found), found


def test_a_command_silent_on_a_refused_file_breaks_the_pass(tmp_path, monkeypatch):
    """A run file the suite's reader refuses must be named on stderr by every command that reads it
    (`specperf report` once listed it only inside the report)."""
    case = template(tmp_path / "case")
    bad = case.run / "results" / "tiny-llama-nosd-bs1-instructcoder-traced.json"
    bad.write_text("{")
    assert unusable(case) == [str(bad)]
    report = ["report", str(case.run), "--out", str(case.root / "out"), "--history", "off"]
    assert check(case, report, [case.root / "out"], unusable(case)) == []
    monkeypatch.setattr(fuzz_files, "_in_process", lambda case, argv: 0)
    assert check(case, report, [case.root / "out"], unusable(case)) == [f"said nothing of {bad}"]


def test_a_history_row_of_an_impossible_batch_size_is_left_out_of_the_plan(tmp_path, capsys):
    """Found by a review of the pass: once stored scenarios were held to the profile's ranges, the
    planner's model of a history row with a batch size of 10^6 raised pydantic's error."""
    import sqlite3

    case = template(tmp_path / "case")
    with sqlite3.connect(case.history) as db:
        db.execute("UPDATE results SET batch_size = 1000000")
    # a batch size the history never ran: the planner models it from the rows of other sizes
    case.profile.write_text(case.profile.read_text().replace("batch_sizes = [4]", "batch_sizes = [8]"))
    plan = ["plan", "--profile", str(case.profile), "--history", case.url(), "--hardware-key", "cpu-amd-epyc-2c"]
    assert check(case, plan, []) == []
    assert run_command(case, plan)[0] == 0
