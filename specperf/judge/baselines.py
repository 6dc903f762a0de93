"""The baseline store: baselines/<hardware-key>/<scenario-id>.json, one readable JSON file each.

A baseline holds the per-metric round samples of a valid result, the scenario hash and the
provenance of the run that made it.  Only a valid, error-free result may become a baseline.
"""

from __future__ import annotations

from pathlib import Path

from .metrics import summarise
from ..storage import SCHEMA_VERSION, ResultFileError, atomic_write_json, read_json

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "baselines"


def baseline_path(baseline_dir: Path, hardware_key: str, scenario_id: str) -> Path:
    return Path(baseline_dir) / hardware_key / f"{scenario_id}.json"


def load_baseline(baseline_dir: Path, hardware_key: str, scenario_id: str) -> dict | None:
    """The stored baseline, or None when there is none; a corrupt file raises ResultFileError."""
    path = baseline_path(baseline_dir, hardware_key, scenario_id)
    if not path.exists():
        return None
    data = read_json(path, "baseline")
    for key in ("scenario_hash", "metrics"):
        if key not in data:
            raise ResultFileError(f"{path}: corrupt baseline (missing {key!r})")
    return data


def baseline_from_result(result: dict) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "scenario_id": result["scenario"]["id"],
        "scenario_hash": result["scenario"]["hash"],
        "hardware_key": result["device"]["hardware_key"],
        "metrics": result["metrics"],
        "summaries": {name: summarise(entry.get("samples") or []) for name, entry in result["metrics"].items()
                      if name != "per_position_acceptance"},
        "provenance": result["provenance"],
        "device": result["device"],
        "effective_config": result.get("effective_config"),
        "memory": result.get("memory"),
        "recorded_at": result["finished_at"],
    }


def write_baseline(baseline_dir: Path, result: dict) -> Path:
    """Store a result as the new baseline; refuses results that are not valid and complete."""
    scenario_id = result["scenario"]["id"]
    if result.get("status") != "ok":
        raise ValueError(f"{scenario_id}: refusing to write a baseline from a result with status "
                         f"{result.get('status')!r}")
    if result.get("validity", {}).get("valid") is False:
        raise ValueError(f"{scenario_id}: refusing to write a baseline from an invalid result "
                         f"({'; '.join(result['validity']['reasons'])})")
    path = baseline_path(baseline_dir, result["device"]["hardware_key"], result["scenario"]["id"])
    atomic_write_json(path, baseline_from_result(result))
    return path
