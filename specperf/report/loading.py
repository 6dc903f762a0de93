"""The results a report shows: one or more run directories read with storage.read_run_dir and merged."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..records import RunFile, ScenarioResult
from ..storage import read_run_dir
from .trends import Trends


@dataclass
class RunData:
    """The merged results of one or more run directories."""

    run_dirs: list[Path]
    runs: list[RunFile] = field(default_factory=list)  # run.json of each directory that has one
    results: list[ScenarioResult] = field(default_factory=list)  # one per scenario id, sorted by id
    sources: dict[str, Path] = field(default_factory=dict)  # scenario id -> directory it came from
    problems: list[str] = field(default_factory=list)  # files that could not be used, one line each
    trends: Trends = field(default_factory=Trends)  # from the history store, where one is given


def load_run(run_dirs: list[Path]) -> RunData:
    """Merge the run directories in order; a later directory wins on a duplicate scenario id.

    Unusable files are skipped and listed in `problems`; a folder that is not a run directory
    raises storage.ResultFileError.
    """
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("no run directory given")
    data = RunData(run_dirs=dirs)
    merged: dict[str, ScenarioResult] = {}
    for run_dir in dirs:
        found = read_run_dir(run_dir)
        data.problems += found.problems
        if found.run is not None:
            data.runs.append(found.run)
        for result in found.results:
            merged[result.id] = result
            data.sources[result.id] = run_dir
    data.results = [merged[k] for k in sorted(merged)]
    return data
