"""Noise measurement: how much each metric of each scenario varies on this machine.

`specperf noise` runs a profile several times (or reads runs already made) and reports, per
scenario and metric, the coefficient of variation between rounds of one run and between runs.
Stored as baselines/<hardware-key>/noise.json, it widens that scenario's regression threshold
to verdicts.NOISE_MULTIPLE times the run-to-run CV where the machine is noisier than the tolerance
(speed only, and at most to verdicts.MAX_NOISE_TOLERANCE: deterministic metrics are never widened).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..records import SCHEMA_VERSION, NoiseEntry, NoiseFile
from ..storage import ResultFileError, atomic_write_json, inside, load_results, now_iso, read_record
from .metrics import metric_samples, sample_summary

NOISE_FILE = "noise.json"


def measure_noise(run_dirs: list[Path]) -> dict[str, Any]:
    """Per scenario and metric: runs, median, round-to-round CV (median over runs) and run-to-run CV."""
    per_scenario: dict[str, dict[str, dict[str, list[float]]]] = {}
    hardware_keys = set()
    for run_dir in run_dirs:
        for result in load_results(run_dir):
            if not result.ok or not result.valid:
                continue
            hardware_keys.add(result.device.hardware_key)
            metrics = per_scenario.setdefault(result.id, {})
            for name, samples in metric_samples(result.metrics).items():
                entry = metrics.setdefault(name, {"medians": [], "round_cvs": []})
                summary = sample_summary(samples)
                if summary["n"]:
                    entry["medians"].append(summary["median"])
                    if summary["n"] > 1 and summary["cv"] is not None:
                        entry["round_cvs"].append(summary["cv"])
    if len(hardware_keys) > 1:
        raise ResultFileError(f"runs from different hardware cannot be pooled: {', '.join(sorted(hardware_keys))}")
    scenarios: dict[str, dict[str, Any]] = {}
    for scenario_id, metrics in sorted(per_scenario.items()):
        scenarios[scenario_id] = {}
        for name, entry in sorted(metrics.items()):
            across = sample_summary(entry["medians"])
            scenarios[scenario_id][name] = {
                "runs": across["n"],
                "median": across.get("median"),
                "round_cv": statistics.median(entry["round_cvs"]) if entry["round_cvs"] else None,
                "run_cv": across.get("cv") if across["n"] > 1 else None,
            }
    return {
        "schema_version": SCHEMA_VERSION,
        "measured_at": now_iso(),
        "hardware_key": hardware_keys.pop() if hardware_keys else None,
        "run_dirs": [str(d) for d in run_dirs],
        "scenarios": scenarios,
    }


def noise_cv(entry: dict[str, Any]) -> float | None:
    """The CV that widens thresholds: run-to-run where measured (baselines come from another run)."""
    return NoiseEntry.model_validate(entry).cv


def write_noise(baseline_dir: Path, noise: dict[str, Any]) -> Path:
    path = inside(Path(baseline_dir), noise["hardware_key"], NOISE_FILE)
    atomic_write_json(path, noise)
    return path


def load_noise(baseline_dir: Path, hardware_key: str) -> dict[str, dict[str, float]]:
    """scenario id -> metric -> CV from the stored noise file; empty when none was measured."""
    path = inside(Path(baseline_dir), hardware_key, NOISE_FILE)
    if not path.exists():
        return {}
    noise = read_record(path, NoiseFile, "noise file")
    return {
        scenario_id: {name: entry.cv for name, entry in metrics.items() if entry.cv is not None}
        for scenario_id, metrics in noise.scenarios.items()
    }


def noise_table(noise: dict[str, Any]) -> list[str]:
    """The noise measurement as aligned text lines, noisiest metric first."""
    rows = [
        (scenario_id, name, entry)
        for scenario_id, metrics in noise["scenarios"].items()
        for name, entry in metrics.items()
    ]
    rows.sort(key=lambda row: -(noise_cv(row[2]) or 0.0))

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    width = max((len(r[0]) for r in rows), default=8)
    lines = [f"{'scenario':<{width}}  {'metric':<24} runs  {'median':>10}  round CV  run CV"]
    for scenario_id, name, entry in rows:
        median = "n/a" if entry["median"] is None else f"{entry['median']:.4g}"
        lines.append(
            f"{scenario_id:<{width}}  {name:<24} {entry['runs']:>4}  {median:>10}  "
            f"{pct(entry['round_cv']):>8}  {pct(entry['run_cv']):>6}"
        )
    return lines
