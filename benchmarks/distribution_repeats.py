"""The distribution check's false alarms and power on real engines, measured.

One no-SD engine, one n-gram engine and one whose rejection sampler accepts every draft (the CPU-tier
fault plugin's accept_all) of the sampled profile's scenario draw its prompts again and again, each
repeat on seeds of its own (run/distribution_check.py: CHECK_DRAWS draws of each prompt, the first
POSITIONS output tokens).  Each repeat checks the n-gram draws against that repeat's no-SD draws
(judge/distribution.distribution_match_p), and the first `--faulty` repeats the faulty engine's
too.  Then each SD engine draws its first repeat's seeds again: does a seed repeat its draws?
Prints figures, asserts nothing.  Needs the CPU tier's environment:

    .tox/cpu/bin/python benchmarks/distribution_repeats.py --repeats 20 --faulty 5
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu_tier"))
from suite import PROFILES, faulty_python  # noqa: E402

PROFILE = str(PROFILES / "sampled.toml")
STRIDE = 10_000  # seeds apart between repeats and sides (more than CHECK_DRAWS)


def main() -> int:
    from specperf.judge.distribution import distribution_match_p
    from specperf.paths import dataset_dir
    from specperf.profiles.scenarios import REFERENCE_METHOD, load_profile
    from specperf.run.calls import CallPreparer
    from specperf.run.distribution_check import POSITIONS, SEED, draws
    from specperf.run.pool import EnginePool

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--faulty", type=int, default=5, help="repeats that check the faulty engine too")
    args = parser.parse_args()
    (scenario,) = [s for s in load_profile(PROFILE).scenarios if not s.is_reference]
    prompts = [ids for call in CallPreparer(dataset_dir())(scenario).calls for ids in call][:: scenario.batch_size]
    broken = faulty_python(Path(tempfile.mkdtemp(prefix="distribution-")) / "python", "accept_all=1")
    reference = scenario.replace(method=REFERENCE_METHOD)
    sides = {"nosd": (reference, None), "sd": (scenario, None), "broken": (scenario, broken)}
    pool = EnginePool(log=lambda line: None)
    found: dict[str, list[float | None]] = {"n-gram": [], "accepting every draft": []}
    try:
        engines, _ = pool.engines_for(sides)

        def drawn(side: str, repeat: int, offset: int) -> list:
            return draws(engines[side], prompts, scenario.sampling, seed=SEED + STRIDE * (3 * repeat + offset))

        first = {}
        for repeat in range(args.repeats):
            target, sd = drawn("nosd", repeat, 0), drawn("sd", repeat, 1)
            found["n-gram"].append(distribution_match_p(sd, target, POSITIONS))
            first.setdefault("sd", sd)
            if repeat < args.faulty:
                faulty = drawn("broken", repeat, 2)
                first.setdefault("broken", faulty)
                found["accepting every draft"].append(distribution_match_p(faulty, target, POSITIONS))
            print(f"repeat {repeat + 1}: " + "; ".join(f"{k} {v[-1]:.3g}" for k, v in found.items() if len(v) > repeat))
        repeated = {"sd": drawn("sd", 0, 1), "broken": drawn("broken", 0, 2)} if args.faulty else {}
    finally:
        pool.close()
    print(f"\n{scenario.id}: {len(prompts)} prompts x {len(target[0])} draws, the first {POSITIONS} positions")
    for side, ps in found.items():
        checked = [p for p in ps if p is not None]
        print(
            f"{side:<22} {len(ps)} checks: p > 0.05 in {sum(p > 0.05 for p in checked)}, p > 1e-4 in "
            f"{sum(p > 1e-4 for p in checked)}, p < 0.01 in {sum(p < 0.01 for p in checked)}; "
            f"smallest {min(checked, default=float('nan')):.3g}, largest {max(checked, default=float('nan')):.3g}"
        )
    for side, again in repeated.items():
        same = sum(a == b for prompt_a, prompt_b in zip(first[side], again) for a, b in zip(prompt_a, prompt_b))
        print(f"{side}: the same seeds drawn again repeat {same} of {sum(len(p) for p in again)} draws")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
