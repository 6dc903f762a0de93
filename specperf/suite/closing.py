"""How a suite run ends: on SIGTERM as on Ctrl-C, then closed by the process that owns it (the xdist
controller merges its workers' run files): run.json, the history, the report, and the hooks told
(pytest_specperf_run_finished) how it went."""

from __future__ import annotations

import dis
from pathlib import Path
from types import CodeType, TracebackType

import pytest
from packaging.version import Version

from ..messages import one_line
from ..options import options
from ..records import RunFile
from ..run.builds.versions import installed_version


def terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, a node drained) ends the run like Ctrl-C: results kept, report written."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def interrupt(signum, frame):
            raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, interrupt)


class Interruption:
    """Whether Ctrl-C or SIGTERM reached this process, seen before pytest reports it, so an
    interrupted run is closed as one even when pytest fails to report it."""

    def __init__(self):
        self.seen = False

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo):
        self.seen = True
        if pytest_fails_on_frames_without_line():
            give_frames_a_line(excinfo.value)
        return (yield)


# Workaround: CPython leaves some instructions without a line number (python/cpython#107901, fixed in
# 3.12 for loops only), so a signal handled at one gives a traceback entry whose tb_lineno is None.
# pytest fails to show such a KeyboardInterrupt (TracebackEntry.lineno), and the run ends with a
# crash (exit 1) instead of as interrupted.  tests/test_interrupted_at_no_line.py shows it is still
# needed.
PYTEST_FAILS_ON_FRAMES_WITHOUT_LINE = Version("9.2")  # the releases before it: checked through 9.1.1


def pytest_fails_on_frames_without_line() -> bool:
    version = installed_version("pytest")
    return version is not None and version < PYTEST_FAILS_ON_FRAMES_WITHOUT_LINE


def give_frames_a_line(error: BaseException) -> None:
    """Give each traceback entry without a line number, of an exception and of those it chains, the
    line of the last instruction before it that has one."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if error.__traceback__ is not None:
            error.__traceback__ = _with_lines(error.__traceback__)
        error = error.__cause__ or error.__context__


def _with_lines(head: TracebackType) -> TracebackType:
    entries = []
    while head is not None:
        entries.append(head)
        head = head.tb_next
    rest = None
    for entry in reversed(entries):
        if entry.tb_lineno is None:
            line = _line_before(entry.tb_frame.f_code, entry.tb_lasti)
            entry = TracebackType(rest, entry.tb_frame, entry.tb_lasti, line)
        elif entry.tb_next is not rest:
            entry.tb_next = rest
        rest = entry
    return rest


def _line_before(code: CodeType, offset: int) -> int:
    lines = [line for start, line in dis.findlinestarts(code) if start <= offset and line is not None]
    return lines[-1] if lines else code.co_firstlineno


def run_history_url(config) -> str | None:
    """The history database of this run (--history, $SPECPERF_HISTORY, else beside the reports); None: off."""
    from ..history.database import history_url

    return history_url(options(config).history, options(config).reports_dir)


def worker_output(run, interrupted: bool) -> dict:
    """An xdist worker's end of the run (run: run.session.RunSession): what it hands the controller."""
    lines = run.finish(interrupted=interrupted)
    return {"run_dir": str(run.run_dir), "lines": lines, "run": run.run_file(True, interrupted).to_json()}


def close_run(config, run, interrupted: bool) -> dict:
    """The end of a run without xdist workers (run: run.session.RunSession); returns write_report's."""
    lines = run.finish(interrupted=interrupted)
    finished = write_report(run.run_dir, run.run_file(True, interrupted), lines, run_history_url(config))
    run_finished(config, finished)
    return finished


def close_workers_run(config, outputs: list[dict]) -> dict:
    """The xdist controller's end of the run, from its workers' outputs (worker_output): one run file
    from theirs, then the report; returns write_report's."""
    from ..run.tally import merge_run_files
    from ..storage import write_record

    run_dir = Path(outputs[0]["run_dir"])
    merged = merge_run_files([RunFile.model_validate(o["run"]) for o in outputs])
    write_record(run_dir / "run.json", merged)
    lines = [line for o in outputs for line in o["lines"]]
    finished = write_report(run_dir, merged, lines, run_history_url(config))
    run_finished(config, finished)
    return finished


def record_history(url: str | None, run_dir: Path) -> list[str]:
    """Record the finished run into the history; a database that fails is one line, the run folder stays."""
    if url is None:
        return []
    from ..history import History, HistoryError

    try:
        with History(url) as history:
            recorded = history.record_run_dir(run_dir)
    except HistoryError as err:
        return [f"{err}; not recorded, the run folder is kept: specperf history import {run_dir}"]
    return [recorded.line()] + [f"history: skipped {problem}" for problem in recorded.problems]


def write_report(run_dir: Path, run: RunFile, lines: list[str], history_url: str | None = None) -> dict:
    """Record the finished run into the history, then write its report (with trend lines from the
    history); returns the run, its results, the report's path and the lines that close the terminal
    summary."""
    from ..report import add_trends, load_run, write_run_report
    from ..run.builds.versions import reference_vllm_note
    from ..run.tally import summary_lines
    from ..storage import ResultFileError, read_run_dir

    lines = lines + record_history(history_url, run_dir)
    try:
        data = add_trends(load_run([run_dir]), history_url)
        lines += data.trends.problems
        note = reference_vllm_note(
            [r.scenario.vllm for r in data.results],
            next((r.provenance.get("vllm") for r in data.results if r.provenance.get("vllm")), None),
        )
        lines += [note] if note else []
        report = write_run_report(data, run_dir)
    except Exception as err:  # noqa: BLE001 - results are on disk; `specperf report` can retry
        try:  # the hooks still get whatever results can be read
            results = read_run_dir(run_dir).results
        except ResultFileError:
            results = []
        return {
            "run": run,
            "results": results,
            "report": None,
            "lines": summary_lines(run)
            + lines
            + [f"report not written ({one_line(err)}); results are kept: specperf report {run_dir}"],
        }
    return {
        "run": run,
        "results": data.results,
        "report": report,
        "lines": summary_lines(run, data.results) + lines + [f"report: {report}"],
    }


def schedules_slower(config, finished: dict) -> list[str]:
    """The run-level verdict: each dynamic SD scenario shown slower than its sweep's best fixed k
    (analysis/dynamic_sd.py), judged by the profile in force."""
    from ..analysis.dynamic_sd import dynamic_against_fixed, slower_than_fixed
    from .profile import chosen_profile

    by_id = {s.id: s for s in chosen_profile(config).scenarios}
    return slower_than_fixed(dynamic_against_fixed(finished["results"]), by_id)


def run_finished(config, finished: dict) -> None:
    config.hook.pytest_specperf_run_finished(
        config=config, run=finished["run"], results=finished["results"], report=finished["report"]
    )
