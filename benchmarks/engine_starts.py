"""What an engine start and close cost, per build and scenario: two engines at a time, as the
engine pool starts the engines a gate wants together on the CPU tier.  Prints seconds; asserts
nothing.  Each build is an interpreter of an environment with vLLM (and specperf) installed:

    .tox/cpu/bin/python benchmarks/engine_starts.py --profile cpu-gate \\
        --build 0.29=.tox/gate/bin/python --build 0.32=.tox/gate-candidate/bin/python tiny-llama-nosd
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    from specperf.profiles.scenarios import load_profile
    from specperf.run.pool import EnginePool

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-gate")
    parser.add_argument("--build", action="append", required=True, metavar="NAME=PYTHON")
    parser.add_argument("--together", type=int, default=2, help="engines started at once (default 2)")
    parser.add_argument("scenarios", nargs="*", help="parts of scenario ids (default: every scenario)")
    args = parser.parse_args()
    builds = dict(b.split("=", 1) for b in args.build)
    pool = EnginePool(log=lambda line: None, parallel_starts=args.together)
    try:
        for scenario in load_profile(args.profile).scenarios:
            if args.scenarios and not any(part in scenario.id for part in args.scenarios):
                continue
            for name, python in builds.items():
                _, started = pool.engines_for({str(i): (scenario, python, i) for i in range(args.together)})
                t0 = time.monotonic()
                pool.close()
                print(
                    f"{scenario.id} on {name}: {args.together} starts {started:.1f} s, "
                    f"{args.together} closes {time.monotonic() - t0:.1f} s",
                    flush=True,
                )
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
