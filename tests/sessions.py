"""A RunSession for unit tests: its settings given by keyword (each goes to the settings record of
run/settings.py that has the field), the parts (pool, calls, device) given as they are."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from specperf.run.session import RunSession
from specperf.run.settings import Gating, Judging, Measuring, Progress, RunPlace


def _taking(record, given: dict) -> dict:
    return {f.name: given.pop(f.name) for f in fields(record) if f.name in given}


def run_session(tmp_path: Path, *, pool, prepare, device: dict, **settings) -> RunSession:
    """Reports under tmp_path/reports, baselines under tmp_path/baselines, profile "unit", quiet, unless
    `settings` say otherwise; a gate where they name a candidate_python."""
    given = {"profile": "unit", "reports_dir": tmp_path / "reports", "baseline_dir": tmp_path / "baselines"}
    given |= {"log": lambda line: None} | settings
    place, judging = RunPlace(**_taking(RunPlace, given)), Judging(**_taking(Judging, given))
    measuring, progress = Measuring(**_taking(Measuring, given)), Progress(**_taking(Progress, given))
    gating = Gating(**_taking(Gating, given)) if "candidate_python" in given else None
    if given:
        raise TypeError(f"no setting of a run session: {', '.join(given)}")
    return RunSession(place, judging, measuring, gating, progress, prepare=prepare, pool=pool, device=dict(device))
