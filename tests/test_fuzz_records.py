"""Files of the right JSON but the wrong shape never produce a traceback.

Every field of a real result record (and of a baseline) is replaced in turn by a value of another
type; the readers, the report, `specperf compare`, resume and judging must each either use the file
or name it in one line, and the command line must exit 2 (bad input), never 1 (regression) or crash.
"""

from __future__ import annotations

import copy
import json

from records import HARDWARE_KEY, make_record, reference_scenario, write_run

from specperf.cli import main
from specperf.judge.baselines import baseline_from_result, load_baseline
from specperf.judge.stored import StoredJudge
from specperf.records import ScenarioResult
from specperf.report import write_report
from specperf.run.resume import finished_results
from specperf.run.tally import summary_lines
from specperf.status import ERROR, SEVERITY, SUSPECT, UNSUPPORTED
from specperf.storage import ResultFileError, read_record, read_run_dir, result_path

WRONG = ("text", None, [], {"a": 1}, 1.5, True, -7)


def leaves(value, path=()):
    """Every path to a value in nested dicts and lists."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, path + (key,))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value[:2]):
            yield from leaves(item, path + (index,))
    yield path


def mutated(data: dict, path: tuple, value) -> dict:
    copied = copy.deepcopy(data)
    if not path:
        return copied
    target = copied
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copied


def cases(data: dict):
    """Each path once, with a wrong value chosen in turn (all of them for the top-level fields)."""
    for i, path in enumerate(p for p in leaves(data) if p):
        values = WRONG if len(path) == 1 else (WRONG[i % len(WRONG)],)
        for value in values:
            yield path, value


def test_a_result_of_any_wrong_shape_is_used_or_named(tmp_path, capsys):
    record = make_record().to_json()
    good = write_run(tmp_path / "good", [make_record(), make_record(reference_scenario())])
    problems = []
    for n, (path, value) in enumerate(cases(record)):
        run_dir = write_run(tmp_path / f"bad{n}", [make_record(reference_scenario())])
        bad_file = result_path(run_dir, record["scenario"]["id"])
        bad_file.write_text(json.dumps(mutated(record, path, value)))
        try:
            read_record(bad_file, ScenarioResult, "result")
            valid = True
        except ResultFileError:
            valid = False
        try:
            found = read_run_dir(run_dir)
            assert valid or any(str(bad_file) in p for p in found.problems), path
            if valid or n % 20 == 0:  # the reader skips an invalid file: rendering it again adds nothing
                write_report([run_dir], tmp_path / f"out{n}")
            finished_results(run_dir, HARDWARE_KEY, lambda line: None)
            summary_lines(found.run or _run_file(), found.results)
            code = main(["compare", str(good), str(run_dir)])
            assert code in ((0, 1) if valid else (2,)), (path, value, code)
        except Exception as err:  # noqa: BLE001 - collected: the test lists every traceback at once
            problems.append(f"{path}={value!r}: {type(err).__name__}: {err}")
    capsys.readouterr()
    assert not problems, "\n".join(problems[:20])


# What a judge against a stored baseline can say of a readable one: any verdict but an error, and
# but those only other judges give (suspect: the rolling judge's two-strike rule; unsupported: a gate).
JUDGED = set(SEVERITY) - {ERROR, SUSPECT, UNSUPPORTED}


def test_a_baseline_of_any_wrong_shape_is_an_error_naming_it_or_is_judged(tmp_path):
    result = make_record()
    baseline = baseline_from_result(result).to_json()
    problems, seen = [], {"rejected": 0, "read": 0}
    for n, (path, value) in enumerate(cases(baseline)):
        store = tmp_path / f"store{n}"
        (store / HARDWARE_KEY).mkdir(parents=True)
        (store / HARDWARE_KEY / f"{result.id}.json").write_text(json.dumps(mutated(baseline, path, value)))
        try:
            load_baseline(store, HARDWARE_KEY, result.id)
            rejected = False
        except ResultFileError:
            rejected = True
        seen["rejected" if rejected else "read"] += 1
        try:
            verdict = StoredJudge(store, HARDWARE_KEY)(result.model_copy(deep=True)).verdict
            if rejected:
                assert verdict.status == ERROR and "\n" not in verdict.note and str(store) in verdict.note, verdict
            else:
                assert verdict.status in JUDGED, verdict
        except Exception as err:  # noqa: BLE001
            problems.append(f"{path}={value!r}: {type(err).__name__}: {err}")
    assert not problems, "\n".join(problems[:20])
    assert seen["rejected"] and seen["read"], seen  # both kinds of file were made


def _run_file():
    from specperf.records import RunFile

    return RunFile(run_id="r", profile="p", device={"kind": "cpu", "hardware_key": HARDWARE_KEY})


def test_compare_exits_2_on_a_corrupt_run(tmp_path, capsys):
    good = write_run(tmp_path / "good", [make_record()])
    bad = write_run(tmp_path / "bad", [make_record()])
    result_path(bad, make_record().id).write_text('{"schema_version": 1, "scenario": null}')
    assert main(["compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "corrupt result" in err
