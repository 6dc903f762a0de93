"""Ctrl-C at an instruction without a line number: pytest fails to show it, and a suite run still
ends as interrupted (suite/closing.py's workaround), while any other pytest run is left as it is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specperf.suite.closing import give_frames_a_line, pytest_fails_on_frames_without_line

# A loop whose backward jump has no line number in CPython 3.11 (python/cpython#107901): the only
# place it checks for a signal, so SIGINT lands there.  SIGINT raises KeyboardInterrupt as a
# terminal's Ctrl-C does, whatever the process inherited: a shell starts background jobs (a CI
# runner's among them) with it ignored, and the loop would then run on.
LOOP = """
import os, signal, threading

def interrupted_loop():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
    for i in range(10**12):
        if not i % 1000000:
            pass
"""

PROBE = """
import json
from _pytest._code import ExceptionInfo
from specperf.suite.closing import give_frames_a_line

def shown(error):
    try:
        ExceptionInfo.from_exception(error).getrepr(funcargs=True)
        return True
    except TypeError:
        return False

try:
    interrupted_loop()
except KeyboardInterrupt as error:
    last = error.__traceback__
    while last.tb_next is not None:
        last = last.tb_next
    no_line, shown_as_raised = last.tb_lineno is None, shown(error)
    give_frames_a_line(error)
    print(json.dumps({"no_line": no_line, "shown_as_raised": shown_as_raised, "shown_after": shown(error)}))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    script = tmp_path_factory.mktemp("probe") / "probe.py"
    script.write_text(LOOP + PROBE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120)
    found = json.loads(done.stdout)
    if not found["no_line"]:
        pytest.skip("this Python gives the loop's backward jump a line number (python/cpython#107901)")
    return found


def test_pytest_fails_to_show_such_an_interrupt_exactly_where_the_workaround_applies(probe):
    assert probe["shown_as_raised"] is not pytest_fails_on_frames_without_line()


def test_with_its_frames_given_a_line_the_interrupt_is_shown(probe):
    assert probe["shown_after"]


@pytest.fixture
def loop_test(pytester, probe):
    return pytester.makepyfile(test_loop=LOOP + "\n\ndef test_interrupted():\n    interrupted_loop()\n")


def suite_run(pytester, tmp_path):
    """A suite run (its session open, baselines to refresh) that Ctrl-C ends where no line is."""
    loop_test = pytester.makepyfile(
        test_loop=LOOP + "\n\ndef test_interrupted(specperf_session):\n    interrupted_loop()\n"
    )
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(
        *("-p", "no:cacheprovider", "--profile", "cpu-smoke", "--history", "off", "--update-baselines"),
        *("--reports-dir", reports, "--baseline-dir", tmp_path / "baselines", loop_test),
        timeout=300,
    )
    (run_file,) = reports.glob("*/run.json")
    return result, loop_test, json.loads(run_file.read_text())


def test_a_suite_run_interrupted_there_ends_as_interrupted(pytester, probe, tmp_path):
    result, loop_test, run = suite_run(pytester, tmp_path)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert f"{loop_test}:" in result.stdout.str()  # the interrupted frame is shown, with a line of its own
    assert run["interrupted"] is True
    assert "baselines not updated: the run was interrupted" in result.stdout.str()


def test_a_suite_run_whose_interrupt_a_plugin_fails_to_report_is_still_closed_as_interrupted(pytester, probe, tmp_path):
    pytester.makeconftest("def pytest_keyboard_interrupt(excinfo):\n    raise RuntimeError('a plugin failed')\n")
    result, _, run = suite_run(pytester, tmp_path)
    assert result.ret != pytest.ExitCode.OK
    assert run["interrupted"] is True
    assert "baselines not updated: the run was interrupted" in result.stdout.str()


def test_any_other_pytest_run_is_left_as_pytest_ends_it(pytester, loop_test):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", loop_test, timeout=300)
    crashes = pytest_fails_on_frames_without_line()
    assert result.ret == (1 if crashes else pytest.ExitCode.INTERRUPTED), result.stdout.str() + result.stderr.str()


def test_every_entry_of_a_traceback_and_of_the_exceptions_it_chains_keeps_its_line():
    def fail():
        raise ValueError("inner")

    try:
        try:
            fail()
        except ValueError as inner:
            raise KeyError("outer") from inner
    except KeyError as error:
        outer = error
    before = [(tb.tb_frame, tb.tb_lineno) for tb in _entries(outer)]
    inner_before = [(tb.tb_frame, tb.tb_lineno) for tb in _entries(outer.__cause__)]
    give_frames_a_line(outer)
    assert [(tb.tb_frame, tb.tb_lineno) for tb in _entries(outer)] == before
    assert [(tb.tb_frame, tb.tb_lineno) for tb in _entries(outer.__cause__)] == inner_before
    assert len(inner_before) == 2


def _entries(error):
    entry = error.__traceback__
    while entry is not None:
        yield entry
        entry = entry.tb_next
