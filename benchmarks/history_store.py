"""The history store's speed: recording one 300-scenario run, and trend queries over a year of nightly
runs (365 x 300 scenarios), on SQLite and on a real PostgreSQL server (Debian's, started here, fsync on).

Results are constructed (tests/records.py: 5 rounds, 8 metrics, a verdict each), recorded through
History.record as a suite run records them.  Goals: recording under 2 s, a trend query under 200 ms.
Prints figures, asserts nothing:

    .tox/unit/bin/python benchmarks/history_store.py [--nights 365] [--scenarios 300] [--backends sqlite postgresql]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))
from postgres_server import postgres_server  # noqa: E402
from records import HARDWARE_KEY, make_record, make_scenario  # noqa: E402

DATASETS = ("gsm8k", "instructcoder", "sharegpt", "cnn_dailymail")
START = datetime.datetime(2025, 12, 1, 2, 0, tzinfo=datetime.UTC)


def scenarios(count: int) -> list:
    return [make_scenario(batch_size=1 + i // len(DATASETS), dataset=DATASETS[i % len(DATASETS)]) for i in range(count)]


def templates(chosen: list) -> list:
    """One judged result per scenario; each night copies them with its own throughput and time."""
    from specperf.judge.verdicts import judge

    records = []
    for scenario in chosen:
        record = make_record(scenario)
        record.verdict = judge(record, None)
        records.append(record)
    return records


def night(n: int, base: list, rng: random.Random):
    """Run n of the series: every scenario measured (throughput drawn around 100 tok/s), finished n
    days after START, a new vLLM every two months."""
    from specperf.records import Metric, RunFile

    when = (START + datetime.timedelta(days=n)).isoformat()
    provenance = {**base[0].provenance, "vllm": f"0.{30 + n // 60}.0"}
    records = []
    for template in base:
        level = 100 * (1 + 0.02 * rng.gauss(0, 1))
        samples = [level * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(5)]
        metrics = {**template.metrics, "throughput_tok_s": Metric(value=statistics.median(samples), samples=samples)}
        records.append(template.model_copy(update={"finished_at": when, "provenance": provenance, "metrics": metrics}))
    run = RunFile(
        run_id=f"nightly-{n:04d}",
        profile="bench",
        started_at=when,
        finished_at=when,
        device=records[0].device,
        provenance=provenance,
    )
    return run, records


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


def bench(backend: str, url: str, nights: int, count: int) -> None:
    from specperf.history import History

    rng = random.Random(0)
    chosen = scenarios(count)
    base = templates(chosen)
    t0 = time.perf_counter()
    history = History(url)
    print(f"{backend}: open and create the schema {time.perf_counter() - t0:.2f} s", flush=True)
    record_times, t_fill = [], time.perf_counter()
    for n in range(nights):
        run, records = night(n, base, rng)
        t0 = time.perf_counter()
        history.record(run.run_id, run, records)
        record_times.append(time.perf_counter() - t0)
        if n in (0, 29, nights - 1):
            print(
                f"{backend}: after {n + 1} runs, recording one run of {count} scenarios: {record_times[-1]:.2f} s",
                flush=True,
            )
    print(
        f"{backend}: recording a {count}-scenario run, all {nights}: median {statistics.median(record_times):.2f} s, "
        f"max {max(record_times):.2f} s (filled in {time.perf_counter() - t_fill:.0f} s)",
        flush=True,
    )
    reader = history.reader()
    picks = [rng.choice(chosen).id for _ in range(20)]
    for last in (30, None):
        query_times = []
        for scenario_id in picks:
            t0 = time.perf_counter()
            series = reader.series(scenario_id, "throughput_tok_s", HARDWARE_KEY, last=last)
            query_times.append(time.perf_counter() - t0)
        print(
            f"{backend}: trend query, last {last or 'all'} runs ({len(series.points)} points): "
            f"{ms(query_times)} over {len(picks)} scenarios",
            flush=True,
        )
    since = START + datetime.timedelta(days=nights - 30)
    drift_times = timed(lambda: reader.drift(since, ["throughput_tok_s", "speedup"]), 3)
    print(f"{backend}: drift over the last 30 days, 2 metrics x {count} scenarios: {ms(drift_times)}", flush=True)
    history.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--scenarios", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    for backend in args.backends:
        with contextlib.ExitStack() as stack:
            if backend == "sqlite":
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                url = f"sqlite:///{folder / 'history.sqlite'}"
            else:
                url = stack.enter_context(postgres_server(fsync=True))
            bench(backend, url, args.nights, args.scenarios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
