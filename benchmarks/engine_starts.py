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
from concurrent.futures import ThreadPoolExecutor


def main() -> int:
    from specperf.profiles.scenarios import load_profile
    from specperf.run.engine import Engine
    from specperf.run.pool import engine_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-gate")
    parser.add_argument("--build", action="append", required=True, metavar="NAME=PYTHON")
    parser.add_argument("--together", type=int, default=2, help="engines started at once (default 2)")
    parser.add_argument("scenarios", nargs="*", help="parts of scenario ids (default: every scenario)")
    args = parser.parse_args()
    builds = dict(b.split("=", 1) for b in args.build)
    for scenario in load_profile(args.profile).scenarios:
        if args.scenarios and not any(part in scenario.id for part in args.scenarios):
            continue
        config = engine_config(scenario)
        for name, python in builds.items():
            t0 = time.monotonic()
            with ThreadPoolExecutor(args.together) as starts:
                futures = [starts.submit(Engine, config, 600, python=python) for _ in range(args.together)]
                engines = [future.result() for future in futures]
            started = time.monotonic() - t0
            t1 = time.monotonic()
            for engine in engines:
                engine.close()
            print(
                f"{scenario.id} on {name}: {args.together} starts {started:.1f} s, "
                f"{args.together} closes {time.monotonic() - t1:.1f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
