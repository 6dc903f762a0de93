"""Run files and run directories of a constructed nightly series, for the history store's tests."""

from __future__ import annotations

from records import make_record, make_scenario, write_run

from specperf.records import RunFile
from specperf.storage import write_record


def run_file(run_id: str, record, *, interrupted: bool = False) -> RunFile:
    """The run file of a run that finished (or was interrupted) when `record` did, on its device."""
    return RunFile(
        run_id=run_id,
        profile="unit",
        started_at=record.finished_at,
        finished_at=None if interrupted else record.finished_at,
        interrupted=interrupted,
        device=record.device,
        provenance=record.provenance,
    )


def nightly_dir(reports, n: int, throughput: float, vllm: str = "0.32.0"):
    """reports/night-N: one scenario's result (throughput as given) and the run file, finished on day N."""
    when = f"2026-11-{n + 1:02d}T02:00:00+00:00"
    record = make_record(make_scenario(), throughput=[throughput] * 5)
    record = record.model_copy(update={"finished_at": when, "provenance": {**record.provenance, "vllm": vllm}})
    folder = write_run(reports / f"night-{n}", [record])
    write_record(folder / "run.json", run_file(folder.name, record))
    return folder
