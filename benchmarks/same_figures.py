"""Whether two runs measured the same deterministic figures, scenario by scenario: the samples of
acceptance, per-position acceptance and lossless fraction, the output hashes and the scenario
hash.  Speed is left out (it drifts); what is left must be identical when a change of the suite
changes nothing it measures.  OLD may also be a folder of baselines (baselines/portable): then
the metrics' samples are compared, which baselines keep (not output hashes or the scenario hash).
Prints figures, asserts nothing:

    python benchmarks/same_figures.py reports/OLD-RUN reports/NEW-RUN
    python benchmarks/same_figures.py baselines/portable reports/NEW-RUN
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DETERMINISTIC = ("mean_acceptance_length", "draft_acceptance_rate", "per_position_acceptance", "lossless_fraction")


def results(run_dir: Path) -> dict[str, dict]:
    """A run's results by scenario id; or a baseline folder's baselines, shaped like results."""
    if not (run_dir / "results").is_dir():
        loaded = (json.loads(path.read_text(encoding="utf-8")) for path in sorted(run_dir.glob("*.json")))
        return {b["scenario_id"]: {"metrics": b["metrics"], "baseline": True} for b in loaded if "scenario_id" in b}
    loaded = (json.loads(path.read_text(encoding="utf-8")) for path in sorted(run_dir.glob("results/*.json")))
    return {result["scenario"]["id"]: result for result in loaded}


def differences(old: dict, new: dict) -> list[str]:
    found = []
    for metric in DETERMINISTIC:
        before = old["metrics"].get(metric, {}).get("samples")
        after = new["metrics"].get(metric, {}).get("samples")
        if before != after:
            found.append(f"{metric}: {before} -> {after}")
    if old.get("baseline") or new.get("baseline"):  # a baseline keeps the metrics' samples only
        return found
    if old.get("output_hashes") != new.get("output_hashes"):
        found.append("output hashes differ")
    if old["scenario"]["hash"] != new["scenario"]["hash"]:
        found.append(f"scenario hash {old['scenario']['hash']} -> {new['scenario']['hash']}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args()
    old, new = results(args.old), results(args.new)
    both = sorted(old.keys() & new.keys())
    print(f"{len(old)} and {len(new)} results, {len(both)} scenarios in both")
    differing = 0
    for scenario_id in both:
        if found := differences(old[scenario_id], new[scenario_id]):
            differing += 1
            print(f"{scenario_id}: " + "; ".join(found))
    print(f"identical: {len(both) - differing}; differing: {differing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
