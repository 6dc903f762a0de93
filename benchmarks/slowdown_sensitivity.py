"""How small a slowdown the suite catches on this machine: prints a table, asserts nothing.

Runs tests/cpu_tier/profiles/detect.toml (SmolLM2-135M n-gram and its no-SD reference, 6 rounds)
once cleanly into a temporary baseline store, then again with vLLM's n-gram proposer slowed by
each delay, several times, through the fault-injection plugin of the CPU-tier tests.  A delay of 0
is an A/A run.  Needs the CPU tier's environment (`tox -e perf` builds it):

    .tox/perf/bin/python benchmarks/slowdown_sensitivity.py --delays 0 3 6 12 --repeats 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu_tier"))
from suite import PROFILES, only_run_dir, read_results, run_suite  # noqa: E402

PROFILE = str(PROFILES / "detect.toml")
NGRAM = "smollm2-135m-ngram-k3-bs1-instructcoder"


def verdicts(reports: Path) -> dict[str, dict]:
    result = read_results(only_run_dir(reports))[NGRAM]
    return {m["metric"]: m for m in result["verdict"]["metrics"]}


def cell(metric: dict) -> str:
    p_value = "" if metric["p_value"] is None else f" p={metric['p_value']:.3f}"
    return f"{metric['change']:+7.1%} {metric['status']:<11}{p_value}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", type=float, nargs="+", default=[0, 3, 6, 12], help="ms per proposal")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "baselines"
        clean = run_suite(PROFILE, Path(tmp) / "clean", store, "--update-baselines", echo=False)
        if clean.returncode != 0:
            print(clean.stdout[-3000:])
            return 1
        print(f"{'delay':>6}  {'run':>3}  {'n-gram throughput vs baseline':<34}  {'speedup vs baseline':<34}")
        for delay in args.delays:
            for repeat in range(args.repeats):
                reports = Path(tmp) / f"delay{delay:g}-{repeat}"
                fault = f"propose_delay_ms={delay:g}" if delay else None
                run_suite(PROFILE, reports, store, fault=fault, echo=False)
                metrics = verdicts(reports)
                print(
                    f"{delay:>4g}ms  {repeat + 1:>3}  {cell(metrics['throughput_tok_s']):<34}  "
                    f"{cell(metrics['speedup']):<34}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
