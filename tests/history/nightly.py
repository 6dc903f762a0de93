"""Run directories of a constructed nightly series, for the history store's tests."""

from __future__ import annotations

from records import make_record, make_scenario, write_run
from specperf.records import RunFile
from specperf.storage import write_record


def nightly_dir(reports, n: int, throughput: float, vllm: str = "0.32.0"):
    """reports/night-N: one scenario's result (throughput as given) and the run file, finished on day N."""
    when = f"2026-11-{n + 1:02d}T02:00:00+00:00"
    record = make_record(make_scenario(), throughput=[throughput] * 5)
    record = record.model_copy(update={"finished_at": when, "provenance": {**record.provenance, "vllm": vllm}})
    folder = write_run(reports / f"night-{n}", [record])
    write_record(folder / "run.json", RunFile(run_id=folder.name, profile="unit", started_at=when, finished_at=when,
                                              device=record.device, provenance=record.provenance))
    return folder
