"""The history store on SQLite and PostgreSQL: recording, re-recording, series, skipped rows, schema."""

from __future__ import annotations

import datetime
import math

import pytest
from nightly import run_file
from records import HARDWARE_KEY, make_record, make_scenario
from sqlalchemy import func, select, text, update

from specperf.history import History, HistoryError, recorded_gate_pairs
from specperf.history.tables import gate_pairs, metadata, metric_values, results, round_values, runs, verdicts
from specperf.judge.paired import recorded_offset_of
from specperf.judge.verdicts import judge

DAY = datetime.timedelta(days=1)
START = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)


def nightly(n: int, throughput: float, vllm: str = "0.32.0", *, interrupted: bool = False, scenarios=None):
    """Run n of a nightly series: its run file and results, finished n days after START."""
    when = (START + n * DAY).isoformat()
    records = []
    for scenario in scenarios or [make_scenario()]:
        record = make_record(scenario, throughput=[throughput * f for f in (0.99, 1.0, 1.01, 1.0, 1.0)])
        record = record.model_copy(update={"finished_at": when, "provenance": {**record.provenance, "vllm": vllm}})
        record.verdict = judge(record, None)
        records.append(record)
    run = run_file(f"night-{n:03d}", records[0], interrupted=interrupted)
    return run, records


def count(history: History, table) -> int:
    with history.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(table)).scalar_one()


def test_a_recorded_run_reads_back_as_a_series_with_version_changes(database_url):
    with History(database_url) as history:
        for n, (value, vllm) in enumerate([(100, "0.31.0"), (110, "0.31.0"), (90, "0.32.0"), (95, "0.32.0")]):
            recorded = history.record(f"night-{n:03d}", *nightly(n, value, vllm))
            assert (recorded.added, recorded.present) == (1, 0)
        series = history.reader().series(make_scenario().id, "throughput_tok_s", HARDWARE_KEY)
    assert [p.value for p in series.points] == [100, 110, 90, 95]
    assert [p.run_id for p in series.points] == ["night-000", "night-001", "night-002", "night-003"]
    assert series.version_changes() == [2]
    assert series.points[0].verdict == "no-baseline"
    assert series.points[0].finished_at == START


def test_recording_a_run_again_adds_nothing(database_url):
    scenarios = [make_scenario(batch_size=b) for b in (1, 4)]
    with History(database_url) as history:
        first = history.record("night-000", *nightly(0, 100, scenarios=scenarios))
        sizes = [count(history, t) for t in (runs, results, metric_values, round_values, verdicts)]
        again = history.record("night-000", *nightly(0, 100, scenarios=scenarios))
        assert [count(history, t) for t in (runs, results, metric_values, round_values, verdicts)] == sizes
    assert (first.added, again.added, again.present) == (2, 0, 2)
    assert sizes[0:2] == [1, 2] and sizes[3] > sizes[2] > 0
    assert "0 results recorded, 2 already there" in again.line()


def test_vector_metrics_are_stored_one_row_per_position(database_url):
    with History(database_url) as history:
        history.record("night-000", *nightly(0, 100))
        reader = history.reader()
        positions = [
            reader.series(make_scenario().id, f"per_position_acceptance[{i}]", HARDWARE_KEY).points[0].value
            for i in range(3)
        ]
    assert positions == pytest.approx([0.7, 0.5, 0.3])


def test_an_interrupted_run_is_skipped_until_its_resume_completes_it(database_url):
    scenarios = [make_scenario(batch_size=b) for b in (1, 4)]
    run, records = nightly(0, 100, interrupted=True, scenarios=scenarios)
    with History(database_url) as history:
        history.record(run.run_id, run, records[:1])
        reader = history.reader()
        assert reader.series(scenarios[0].id, "throughput_tok_s", HARDWARE_KEY).points == []
        assert reader.skipped == {
            "night-000": "history: run night-000: incomplete (interrupted or half-written): skipped"
        }
        resumed = run.model_copy(update={"interrupted": False, "finished_at": run.started_at})
        recorded = history.record(run.run_id, resumed, records)
        assert (recorded.added, recorded.present) == (1, 1)
        assert len(history.reader().series(scenarios[0].id, "throughput_tok_s", HARDWARE_KEY).points) == 1


def test_rows_of_another_record_schema_are_skipped_with_one_line(database_url):
    with History(database_url) as history:
        history.record("night-000", *nightly(0, 100))
        history.record("night-001", *nightly(1, 101))
        with history.engine.begin() as connection:
            connection.execute(update(runs).where(runs.c.run_id == "night-000").values(record_schema=99))
        reader = history.reader()
        series = reader.series(make_scenario().id, "throughput_tok_s", HARDWARE_KEY)
    assert [p.run_id for p in series.points] == ["night-001"]
    assert reader.skipped == {"night-000": "history: run night-000: record schema 99 (this suite reads 1): skipped"}


def test_a_database_of_a_newer_suite_is_refused_in_one_line(database_url):
    History(database_url).close()
    with History(database_url) as history, history.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    with pytest.raises(HistoryError) as err:
        History(database_url)
    message = str(err.value)
    assert "\n" not in message and "schema revision f00d is newer than this suite's (0003)" in message


def test_an_unreachable_database_fails_in_one_line():
    with pytest.raises(HistoryError) as err:
        History("postgresql://specperf:secret@127.0.0.1:1/history")
    message = str(err.value)
    assert message.startswith("history postgresql://specperf:***@127.0.0.1:1/history: ")
    assert "\n" not in message and "secret" not in message


def test_a_url_of_another_database_kind_is_refused():
    with pytest.raises(HistoryError, match="mysql is not supported"):
        History("mysql://u@localhost/db")


def test_drift_lists_the_scenario_that_moved_most(database_url):
    steady, stepped = make_scenario(batch_size=1), make_scenario(batch_size=4)
    with History(database_url) as history:
        for n in range(8):
            run, records = nightly(n, 100, scenarios=[steady, stepped])
            records[1] = records[1].model_copy(
                update={
                    "metrics": {
                        **records[1].metrics,
                        "throughput_tok_s": records[1]
                        .metrics["throughput_tok_s"]
                        .model_copy(update={"value": 100.0 if n < 4 else 80.0}),
                    }
                }
            )
            history.record(run.run_id, run, records)
        moved = history.reader().drift(START, ["throughput_tok_s"])
    assert [(d.scenario_id, round(d.change, 3)) for d in moved] == [(stepped.id, -0.2), (steady.id, 0.0)]
    assert moved[0].runs == 8


def test_a_result_with_an_unreadable_finish_time_takes_its_run_s(database_url):
    run, records = nightly(0, 100)
    records[0] = records[0].model_copy(update={"finished_at": "not a time"})
    with History(database_url) as history:
        assert history.record(run.run_id, run, records).added == 1
        (point,) = history.reader().series(make_scenario().id, "throughput_tok_s", HARDWARE_KEY).points
    assert point.finished_at == START


def gate_night(n: int, offsets: list[float], *, interrupted: bool = False):
    """Night n of an upgrade gate: two pairs on each engine pair, the candidate's engines of pair c
    off by offsets[c] (log), and 1% between the pairs of one engine pair."""
    from specperf.records import Gate, Metric, Side

    current = [100.0 * (1 + 0.01 * (-1) ** j) for j in range(2 * len(offsets))]
    candidate = [value * math.exp(offsets[j // 2]) for j, value in enumerate(current)]
    run, (record,) = nightly(n, 100, interrupted=interrupted)
    record.metrics["throughput_tok_s"] = Metric(value=sorted(candidate)[len(candidate) // 2], samples=candidate)
    record.rounds = [r.model_copy(update={"engine_instance": j // 2}) for j, r in enumerate(record.rounds * 2)][
        : len(candidate)
    ]
    side = Side(metrics={"throughput_tok_s": Metric(value=100.0, samples=current)})
    record.gate = Gate(current=side, candidate_python="/candidate/bin/python", pairing="interleaved")
    return run, [record]


def test_a_gates_pairs_are_kept_and_the_gates_on_record_estimate_the_offset_between_engines(database_url):
    spread = [0.05, -0.05, 0.05, -0.05]  # the candidate's engine pairs 5% either way
    with History(database_url) as history:
        history.record("night-000", *nightly(0, 100))  # no gate: no pairs
        for n in (1, 2, 3):
            history.record(f"night-{n:03d}", *gate_night(n, [x * n for x in spread]))
        history.record("night-004", *gate_night(4, [0.5, -0.5, 0.5, -0.5], interrupted=True))  # incomplete: skipped
        assert count(history, gate_pairs) == 4 * 8
        reader = history.reader()
        found = reader.gate_pairs(make_record().device.hardware_key)
        assert [clusters for _, clusters in found] == [[0, 0, 1, 1, 2, 2, 3, 3]] * 3
        newest = found[0][0]  # night 3: +-15% by engine pair, +-1% between its pairs
        assert newest[0] == pytest.approx(0.15) and newest[2] == pytest.approx(-0.15)
        assert len(reader.gate_pairs(make_record().device.hardware_key, newest=2)) == 2
        assert reader.gate_pairs("another-machine") == []
    offset = recorded_offset_of(recorded_gate_pairs(database_url, make_record().device.hardware_key))
    # each gate's engine pairs spread by 5n% (variance 4/3 (5n)^2), pooled over 3 x 3 degrees of freedom
    expected = math.sqrt(sum(4 / 3 * (0.05 * n) ** 2 for n in (1, 2, 3)) / 3)
    assert (offset.gates, offset.df) == (3, 9) and offset.sd == pytest.approx(expected, rel=0.02)


def test_the_migrations_build_the_schema_the_tables_declare(database_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with History(database_url) as history, history.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    assert [d for d in differences if "alembic_version" not in str(d)] == []


def test_a_database_of_the_schema_before_gate_pairs_is_upgraded_with_its_runs_kept(database_url):
    from alembic import command

    from specperf.history.database import _migration_config

    with History(database_url) as history:
        history.record("night-000", *nightly(0, 100))
        with history.engine.begin() as connection:
            command.downgrade(_migration_config(connection), "0002")
        assert "gate_pairs" not in sqlalchemy_tables(history)
    with History(database_url) as history:  # opening it migrates it
        assert "gate_pairs" in sqlalchemy_tables(history) and count(history, runs) == 1
        history.record("night-001", *gate_night(1, [0.05, -0.05]))
        assert count(history, gate_pairs) == 4


def sqlalchemy_tables(history: History) -> set[str]:
    from sqlalchemy import inspect

    return set(inspect(history.engine).get_table_names())
