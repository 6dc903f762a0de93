"""Resuming a run: which of its results stand and need no new measurement."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..records import ScenarioResult
from ..storage import ResultFileError, read_result


def finished_results(run_dir: Path, hardware_key: str, log: Callable[[str], None]) -> dict[str, ScenarioResult]:
    """Results of a run being resumed that need no new measurement: ok, with output hashes, measured
    on this hardware."""
    finished = {}
    for path in sorted((Path(run_dir) / "results").glob("*.json")):
        try:
            result = read_result(path)
        except ResultFileError as err:
            log(f"resume: measuring again: {err}")
            continue
        if result.device.hardware_key != hardware_key:
            log(f"resume: measuring again: {path} was measured on {result.device.hardware_key}, not {hardware_key}")
            continue
        if result.ok and result.output_hashes is not None:
            finished[result.id] = result
    return finished
