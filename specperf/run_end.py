"""Closing a suite run: record it in the history, write its report, and tell the hooks
(pytest_specperf_run_finished) how it went."""

from __future__ import annotations

from pathlib import Path

from .messages import one_line
from .records import RunFile


def record_history(url: str | None, run_dir: Path) -> list[str]:
    """Record the finished run into the history; a database that fails is one line, the run folder stays."""
    if url is None:
        return []
    from .history import History, HistoryError

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
    from .report import add_trends, load_run, write_run_report
    from .run.run_file import summary_lines
    from .run.versions import reference_vllm_note
    from .storage import ResultFileError, read_run_dir

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


def run_finished(config, finished: dict) -> None:
    config.hook.pytest_specperf_run_finished(
        config=config, run=finished["run"], results=finished["results"], report=finished["report"]
    )
