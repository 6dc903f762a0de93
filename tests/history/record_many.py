"""One process of the concurrency test: records a run of N constructed results into a history database.

python record_many.py URL RUN_ID N
"""

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from nightly import run_file  # noqa: E402
from records import make_record, make_scenario  # noqa: E402

from specperf.history import History  # noqa: E402


def main(url: str, run_id: str, count: int) -> None:
    records = [make_record(make_scenario(batch_size=i + 1)) for i in range(count)]
    run = run_file(run_id, records[0])
    with History(url) as history:
        recorded = history.record(run_id, run, records)
    print(recorded.line())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
