"""Eight processes recording 50 results each into one database at once, on a fresh database (so
they also race to create the schema), twice for one shared run: every row there once.  Fifty keep
every race (the schema's creation, a run's row, the shared run's results) and cost a tenth of 500."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select

from specperf.history import History
from specperf.history.tables import metric_values, results, runs

PROCESSES = 8
RESULTS = 50
WRITER = Path(__file__).with_name("record_many.py")


def test_eight_processes_record_at_once_and_nothing_is_lost_or_doubled(database_url):
    # six runs of their own, and one run that two processes record at the same time
    run_ids = [f"shard-{i}" for i in range(PROCESSES - 2)] + ["shared", "shared"]
    writers = [
        subprocess.Popen(
            [sys.executable, str(WRITER), database_url, run_id, str(RESULTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in run_ids
    ]
    outputs = [w.communicate(timeout=300) for w in writers]
    assert [w.returncode for w in writers] == [0] * PROCESSES, [err[-2000:] for _, err in outputs]
    shared = sorted(out.strip() for (out, _), run_id in zip(outputs, run_ids) if run_id == "shared")
    assert shared == [
        f"history: shared: 0 results recorded, {RESULTS} already there",
        f"history: shared: {RESULTS} results recorded",
    ]
    with History(database_url) as history, history.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(runs)).scalar_one() == PROCESSES - 1
        per_run = connection.execute(
            select(results.c.run_pk, func.count(), func.count(results.c.scenario_id.distinct())).group_by(
                results.c.run_pk
            )
        ).all()
        assert sorted((n, distinct) for _, n, distinct in per_run) == [(RESULTS, RESULTS)] * (PROCESSES - 1)
        metrics_per_result = connection.execute(select(func.count()).select_from(metric_values)).scalar_one() / (
            (PROCESSES - 1) * RESULTS
        )
    assert metrics_per_result == 8  # throughput, speedup, lossless, acceptance length and rate, 3 positions
