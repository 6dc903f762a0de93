"""The baseline store: baselines/<hardware-key>/<scenario-id>.json, one readable JSON file each,
and baselines/portable/<scenario-id>.json with the deterministic metrics alone.

A baseline holds the per-metric round samples of a valid result, the scenario hash and the
provenance of the run that made it.  Only a valid, error-free result may become a baseline.
Speed only compares on the hardware that measured it; acceptance and the lossless check come out
the same on any machine of a tier, so their portable baseline judges them everywhere (a baseline of
the hardware itself, where there is one, wins).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..records import VECTOR_METRICS, Baseline, Device, ScenarioResult
from ..storage import ResultFileError, inside, read_record, write_record
from .metrics import METRICS, implausible, known_metric, metric_samples, sample_summary, spec_for

PORTABLE = "portable"  # the folder of the deterministic metrics' baselines, for every machine
#: A CPU speed baseline judges a machine whose calibration (run/hardware/calibration.py) is within
#: this much of its own: machines of one CPU key ran the same build twice as fast, where one VM's
#: calibration moved within 0.00188-0.00228 s with its load (docs/methodology/main-job.md).
SPEED_MATCH = 0.30


def speed_mismatch(recorded: dict[str, Any] | None, current: Device) -> str | None:
    """Why a CPU speed baseline, recorded on the device `recorded` (Baseline.device), cannot judge
    `current`'s speed (None: it can): that machine's calibration is unknown, or differs from this
    one's by more than SPEED_MATCH.  A GPU's key names its speed."""
    recorded = recorded or {}
    if current.kind != "cpu" or recorded.get("kind", "cpu") != "cpu":
        return None
    key, then = recorded.get("hardware_key", current.hardware_key), recorded.get("calibration_s")
    if not isinstance(then, (int, float)) or then <= 0 or current.calibration_s is None:
        return f"the speed baseline of {key} has no calibration of its machine's speed"
    ratio = then / current.calibration_s
    if abs(ratio - 1) <= SPEED_MATCH:
        return None
    return (
        f"the speed baseline of {key} came from a machine {abs(ratio - 1):.0%} "
        f"{'slower' if ratio > 1 else 'faster'} by calibration ({then:g} s against {current.calibration_s:g} s here)"
    )


def baseline_path(baseline_dir: Path, hardware_key: str, scenario_id: str) -> Path:
    return inside(Path(baseline_dir), hardware_key, f"{scenario_id}.json")


def load_baseline(baseline_dir: Path, hardware_key: str, scenario_id: str) -> Baseline | None:
    """The stored baseline, or None when there is none; a corrupt file raises ResultFileError."""
    path = baseline_path(baseline_dir, hardware_key, scenario_id)
    if not path.exists():
        return None
    return checked_baseline(read_record(path, Baseline, "baseline"), path)


def checked_baseline(baseline: Baseline, path: Path) -> Baseline:
    """`baseline` if every metric it holds has samples, each a value the metric can take; else
    ResultFileError naming `path` and the field (an empty or zero baseline must not pass for one)."""
    if not baseline.metrics:
        raise ResultFileError(f"{path}: corrupt baseline: metrics is empty")
    for name, metric in baseline.metrics.items():
        if all(sample is None for sample in metric.samples):  # [] or [null]: nothing to judge against
            raise ResultFileError(f"{path}: corrupt baseline: metrics.{name}.samples holds no value")
    kind = (baseline.device or {}).get("kind")
    for name, samples in metric_samples(baseline.metrics).items():
        problem = next(filter(None, map(spec_for(name).out_of_range, samples)), None) if known_metric(name) else None
        problem = problem or next(filter(None, (implausible(name, sample, kind) for sample in samples)), None)
        if problem:
            raise ResultFileError(f"{path}: corrupt baseline: a sample of {name} {problem}")
    return baseline


def baseline_from_result(result: ScenarioResult) -> Baseline:
    return Baseline(
        scenario_id=result.id,
        scenario_hash=result.scenario.hash,
        hardware_key=result.device.hardware_key,
        metrics=result.metrics,
        summaries={
            name: sample_summary([s for s in entry.samples if isinstance(s, (int, float))])
            for name, entry in result.metrics.items()
            if name not in VECTOR_METRICS
        },
        provenance=result.provenance,
        device=result.device.to_json(),
        effective_config=result.effective_config,
        memory=result.memory,
        recorded_at=result.finished_at,
        trace=result.trace.totals() if result.trace else None,
        request_acceptance=[] if result.scenario.sampling.greedy else result.request_acceptance,
    )


def write_baseline(baseline_dir: Path, result: ScenarioResult, hardware_key: str) -> Path:
    """Store a result as the new baseline of this machine (hardware_key: its key, never one read from
    a file); refuses results that are not valid and complete, or that were measured elsewhere."""
    if result.device.hardware_key != hardware_key:
        raise ValueError(
            f"{result.id}: refusing to write a baseline for {hardware_key} from a result measured on "
            f"{result.device.hardware_key}"
        )
    if not result.ok:
        raise ValueError(f"{result.id}: refusing to write a baseline from a result with status {result.status!r}")
    if not result.valid:
        reasons = "; ".join(result.validity.reasons if result.validity else [])
        raise ValueError(f"{result.id}: refusing to write a baseline from an invalid result ({reasons})")
    return write_record(baseline_path(baseline_dir, hardware_key, result.id), baseline_from_result(result))


def portable_from_result(result: ScenarioResult) -> Baseline:
    """The deterministic metrics of a result (acceptance, per-position rates, lossless), for any machine;
    not distribution_match_p, judged on its own value and from this machine's draws."""
    baseline = baseline_from_result(result)
    deterministic = {name: m for name, m in baseline.metrics.items() if METRICS[name].against_baseline}
    return baseline.model_copy(
        update={
            "hardware_key": PORTABLE,
            "metrics": deterministic,
            "device": None,
            "memory": None,
            "trace": None,
            "summaries": {k: v for k, v in baseline.summaries.items() if k in deterministic},
        }
    )


def write_portable_baseline(baseline_dir: Path, result: ScenarioResult) -> Path | None:
    """Store the deterministic metrics of a valid result under baselines/portable/ (None: it has none)."""
    portable = portable_from_result(result)
    if not portable.metrics or not result.ok or not result.valid:
        return None
    return write_record(baseline_path(baseline_dir, PORTABLE, result.id), portable)


def refresh_baselines(baseline_dir: Path, results: list[ScenarioResult], hardware_key: str) -> list[str]:
    """--update-baselines after a complete run: each result's baselines written, or why one was kept."""
    lines = []
    for result in results:
        try:
            path = write_baseline(baseline_dir, result, hardware_key)
            lines.append(f"baseline written: {path}")
            if portable := write_portable_baseline(baseline_dir, result):
                lines.append(f"baseline written: {portable}")
        except (ValueError, ResultFileError) as err:
            lines.append(f"baseline kept: {err}")
    return lines
