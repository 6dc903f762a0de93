"""The fuzz pass over every kind of file the suite reads (tests/fuzz_files.py), at size: per kind,
COUNT mutated copies of the real runs in tests/data/runs/, each driven through every command that
reads that kind.  Prints the inputs tried and the commands run per kind, and every command that broke
what must hold (an exit other than 0/1/2, a traceback, more than a few stderr lines, a write outside
what it owns, past the time bound); exits 1 where any did.  Needs the unit tier's environment:

    .tox/unit/bin/python benchmarks/fuzz_files.py --count 100 --pytest-collections 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fuzz_files import KINDS, fuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="mutated copies per kind")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--pytest-collections", type=int, default=10, help="profile cases also collected by pytest")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    broke = []
    print(f"{'kind':<10} {'inputs':>7} {'commands':>9} {'broke':>6} {'seconds':>8}  commands run")
    with tempfile.TemporaryDirectory(prefix="fuzz-files-") as folder:
        for kind in args.kinds:
            started = time.monotonic()
            outcomes = fuzz(Path(folder), kind, args.count, args.seed, args.pytest_collections)
            failed = [o for o in outcomes if o.problems]
            broke += failed
            commands = ", ".join(f"{c} {n}" for c, n in Counter(o.command for o in outcomes).items())
            print(
                f"{kind:<10} {args.count:>7} {len(outcomes):>9} {len(failed):>6} "
                f"{time.monotonic() - started:>8.0f}  {commands}",
                flush=True,
            )
    for outcome in broke:
        print(f"BROKE {outcome.kind}: {outcome.mutation[:160]} | {outcome.command} | {'; '.join(outcome.problems)}")
    return 1 if broke else 0


if __name__ == "__main__":
    raise SystemExit(main())
