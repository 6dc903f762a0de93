"""One process of the concurrency test: records a run of N constructed results into a history database.

    python record_many.py URL RUN_ID N
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from records import make_record, make_scenario  # noqa: E402

from specperf.history import History  # noqa: E402
from specperf.records import RunFile  # noqa: E402


def main(url: str, run_id: str, count: int) -> None:
    records = [make_record(make_scenario(batch_size=i + 1)) for i in range(count)]
    run = RunFile(run_id=run_id, profile="unit", started_at=records[0].finished_at, finished_at=records[0].finished_at,
                  device=records[0].device, provenance=records[0].provenance)
    with History(url) as history:
        recorded = history.record(run_id, run, records)
    print(recorded.line())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
