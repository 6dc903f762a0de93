"""A fuzz pass over every kind of file the suite reads, on mutated copies of a real run.

tests/data/runs/ holds two real CPU-tier runs (a traced cpu-smoke run: n-gram, EAGLE-3 and no-SD;
a sampled run: n-gram and no-SD, each request's acceptance kept); tests/data/workloads/ a slice of
the real InstructCoder sample.  A case copies them into a folder of its own, builds the files they
imply (baselines, a history database, the study's trace format), mutates one file of one kind and
drives the commands that read it, in this process (pytest's collection in its own):

    kind        file mutated                               driven by
    result      results/*.json (any field, or its bytes)   report, compare, simulate --fit-from, history import
    trace       a result's trace (its fields only)         report, simulate --fit-from
    run         run.json                                   report, compare, history import
    baseline    baselines/<key>/ and portable/ files       the run's judge (StoredJudge)
    profile     the profile TOML                           plan, compare --profile, pytest --collect-only
    workload    the workload JSONL                         the workload loader a run calls
    study       the study's trace JSONL                    simulate --study-traces
    history     a row of the SQLite history                history show, history drift, report --history

What must hold, whatever the input: exit 0, 1 or 2 (pytest's: 0, 4 or 5); no exception escapes
and no traceback is printed; stderr holds at most MAX_ERR_LINES lines, and names every run file the
suite's reader refuses; nothing changes outside what the command owns (the report's folder, the
history database it imports into), and a read-only command changes nothing; each command ends
within TIME_BOUND_S.  benchmarks/fuzz_files.py runs many cases and prints the
counts; tests/test_fuzz_files.py runs a few of each kind on every commit.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from fuzz_mutations import mutate_history, mutate_json_file, mutate_jsonl_file, mutate_toml_file

DATA = Path(__file__).resolve().parent / "data"
RUNS = DATA / "runs"
WORKLOADS = DATA / "workloads"
ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "tests" / "cpu_tier" / "profiles" / "sampled.toml"
HARDWARE_KEY = "cpu-amd-epyc-2c"  # the real runs' machine
RUN_FILES = ("result", "trace", "run")  # the kinds read_run_dir reads, refusing a file by name
KINDS = ("result", "trace", "run", "baseline", "profile", "workload", "study", "history")
TIME_BOUND_S = 30.0  # one command on one mutated copy; an untouched copy takes about a second
EXITS = (0, 1, 2)  # specperf's: all is well, a regression, bad input
PYTEST_EXITS = (0, 4, 5)  # pytest's: collected, a usage error (a bad profile), nothing collected
MAX_ERR_LINES = 3  # one mutated file: its problem line, and at most a warning and the error line beside it


class TimeBound(BaseException):
    """Raised into a command that runs past TIME_BOUND_S (a BaseException: no `except Exception` hides it)."""


@dataclass
class Outcome:
    kind: str
    mutation: str
    command: str
    problems: list[str] = field(default_factory=list)


# ---- a case: a copy of the real runs, one file mutated, the commands that read it ---------------


@dataclass
class Case:
    """A folder holding copies of the real runs and what they imply, the commands run in `work`."""

    root: Path

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def sampled(self) -> Path:
        return self.root / "sampled"

    @property
    def baselines(self) -> Path:
        return self.root / "baselines"

    @property
    def history(self) -> Path:
        return self.root / "history.sqlite"

    @property
    def studies(self) -> Path:
        return self.root / "study"

    @property
    def datasets(self) -> Path:
        return self.root / "datasets"

    @property
    def profile(self) -> Path:
        return self.root / "profile.toml"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def url(self) -> str:
        return f"sqlite:///{self.history}"


def template(folder: Path) -> Case:
    """The untouched case, built once: the runs, their baselines (this machine's and portable), a
    history holding both runs, the traced n-gram result in the study's trace format, the workload
    slice and the sampled profile."""
    from specperf.cli import main
    from specperf.judge.baselines import refresh_baselines
    from specperf.storage import load_results

    case = Case(folder)
    shutil.copytree(RUNS / "cpu-smoke", case.run)
    shutil.copytree(RUNS / "sampled", case.sampled)
    shutil.copytree(WORKLOADS, case.datasets)
    shutil.copy(PROFILE, case.profile)
    for run in (case.run, case.sampled):
        results = load_results(run)
        refresh_baselines(case.baselines, results, results[0].device.hardware_key)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["history", "--history", case.url(), "import", str(case.run), str(case.sampled)]) == 0
    case.studies.mkdir()
    (ngram,) = [r for r in load_results(case.run) if r.scenario.method.name == "ngram"]
    with (case.studies / "combined_instructcoder.jsonl").open("w") as out:
        for request in ngram.trace.requests:
            line = {"id": request.request_id, "prompt_token_ids": [0] * request.prompt_len}
            line["acc_ngram"] = {"acc_len": request.accepted}
            print(json.dumps(line), file=out)
    case.work.mkdir()
    return case


def mutate(case: Case, kind: str, rng: random.Random) -> str:
    """Mutate one file of `kind` in `case`; what was done, naming the file."""
    if kind in ("result", "trace"):
        results = sorted((case.run / "results").glob("*.json"))
        if kind == "trace":
            results = [p for p in results if json.loads(p.read_text()).get("trace")]
        path = rng.choice(results)
        how = mutate_json_file(path, rng, ("trace",) if kind == "trace" else ())
    elif kind == "run":
        path = case.run / "run.json"  # the run every command reads whole (compare reads OLD's results only)
        how = mutate_json_file(path, rng)
    elif kind == "baseline":
        path = rng.choice(sorted(case.baselines.rglob("*.json")))
        how = mutate_json_file(path, rng)
    elif kind == "profile":
        path = case.profile
        how = mutate_toml_file(path, rng)
    elif kind == "workload":
        path = rng.choice(sorted(case.datasets.glob("*.jsonl")))
        how = mutate_jsonl_file(path, rng)
    elif kind == "study":
        path = case.studies / "combined_instructcoder.jsonl"
        how = mutate_jsonl_file(path, rng)
    elif kind == "history":
        path = case.history
        how = mutate_history(path, rng)
    else:
        raise ValueError(kind)
    return f"{path.relative_to(case.root)}: {how}"


def collect(case: Case, *options: str) -> list[str]:
    """pytest's collection of the case's profile, its reports kept in the case."""
    return ["pytest", "--collect-only", "-q", "--profile", str(case.profile), "--reports-dir", str(case.work), *options]


def commands(case: Case, kind: str) -> list[tuple[list[str], list[Path]]]:
    """The commands that read a file of `kind`, each with what it may write."""
    out = case.root / "out"
    report = (["report", str(case.run), "--out", str(out), "--history", "off"], [out])
    compare = (["compare", str(case.sampled), str(case.run)], [])
    fit = (["simulate", "--fit-from", str(case.run)], [])
    imported = (["history", "--history", case.url(), "import", str(case.run), str(case.sampled)], [case.history])
    scenario = "smollm2-135m-ngram-k3-bs1-instructcoder-traced"
    return {
        "result": [report, compare, fit, imported],
        "trace": [report, fit],
        "run": [report, compare, imported],
        "baseline": [(["judge"], [])],
        "profile": [
            (["plan", "--profile", str(case.profile)], []),
            (["compare", str(case.sampled), str(case.sampled), "--profile", str(case.profile)], []),
            (collect(case), [case.work / ".benchmarks"]),  # pytest-benchmark makes it in any pytest run
        ],
        "workload": [(["load-workload"], [])],
        "study": [(["simulate", "--study-traces", str(case.studies), "--datasets", "instructcoder"], [])],
        "history": [
            (["history", "--history", case.url(), "show", scenario], []),
            (["history", "--history", case.url(), "drift", "--since", "36500d"], []),
            (["report", str(case.run), "--out", str(out), "--history", case.url()], [out]),
            (["plan", "--profile", str(case.profile), "--history", case.url(), "--hardware-key", HARDWARE_KEY], []),
        ],
    }[kind]


# ---- running a command, and what must hold ------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if not p.is_dir()} | {
        str(p) + "/": (0, 0) for p in root.rglob("*") if p.is_dir()
    }


def run_command(case: Case, argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one command on `case`, run here (pytest's collection in a
    process of its own: a plugin's state must not leak into this one)."""
    env = {"SPECPERF_HISTORY": "off", "SPECPERF_CACHE": str(case.work / "cache")}  # nothing of this machine's
    if argv[0] == "pytest":
        command = [sys.executable, "-m", "pytest", str(ROOT / "tests_perf"), "-p", "no:cacheprovider", *argv[1:]]
        done = subprocess.run(
            command, cwd=case.work, env=os.environ | env, capture_output=True, text=True, timeout=TIME_BOUND_S
        )
        return done.returncode, done.stdout, done.stderr
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, env),
        contextlib.chdir(case.work),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = _in_process(case, argv)
    return code, out.getvalue(), err.getvalue()


def _in_process(case: Case, argv: list[str]) -> int:
    if argv == ["judge"]:
        return _judge(case)
    if argv == ["load-workload"]:
        return _load_workload(case)
    from specperf.cli import main

    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's usage error
        return exit_.code if isinstance(exit_.code, int) else 2


def _judge(case: Case) -> int:
    """The run's judge on every result of both runs: an error verdict names the file on one line."""
    from specperf.judge.stored import StoredJudge
    from specperf.status import ERROR
    from specperf.storage import load_results

    for run in (case.run, case.sampled):
        for result in load_results(run):
            verdict = StoredJudge(case.baselines, result.device.hardware_key)(result).verdict
            if verdict.status == ERROR:
                print(verdict.note, file=sys.stderr)
            else:
                print(f"{result.id}: {verdict.status}", file=sys.stdout)
    return 0


def _load_workload(case: Case) -> int:
    """The workload loader as a run calls it: requests, or the one line a run prints."""
    from specperf.profiles import workloads

    try:
        sample = workloads.load("instructcoder", 8, 42, case.datasets)
    except (workloads.WorkloadUnavailable, workloads.WorkloadError) as err:
        print(err, file=sys.stderr)
        return 2
    assert sample.requests, "no requests drawn"
    return 0


def unusable(case: Case) -> list[str]:
    """The files of the case's runs the suite's reader refuses (storage.read_run_dir), by path."""
    from specperf.storage import read_run_dir

    return [problem.split(": ")[0] for run in (case.run, case.sampled) for problem in read_run_dir(run).problems]


def check(case: Case, argv: list[str], owns: list[Path], refused: list[str] = ()) -> list[str]:
    """Run one command on `case`; every way it broke what must hold.  `refused`: files the command
    reads that the reader refuses, each of which it must name on stderr."""
    before = snapshot(case.root)
    previous = signal.signal(signal.SIGALRM, _time_bound)
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND_S)
    faulthandler.dump_traceback_later(3 * TIME_BOUND_S + 10, exit=True, file=sys.__stderr__)  # a hang in C code
    started = time.monotonic()
    problems = []
    try:
        code, out, err = run_command(case, argv)
    except TimeBound:
        return [f"ran past {TIME_BOUND_S:.0f} s"]
    except subprocess.TimeoutExpired:
        return [f"ran past {TIME_BOUND_S:.0f} s"]
    except Exception as exc:  # noqa: BLE001 - collected: what escaped is the finding
        return [f"raised {type(exc).__name__}: {str(exc)[:200]}"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()
    if code not in (PYTEST_EXITS if argv[0] == "pytest" else EXITS):
        problems.append(f"exit {code}")
    if "Traceback (most recent call last)" in out + err:
        problems.append("printed a traceback: " + (out + err).strip().splitlines()[-1][:200])
    lines = err.strip().splitlines()
    if silent := [path for path in refused if path not in err]:
        problems.append(f"said nothing of {silent[0]}")
    if argv[0] != "pytest" and len(lines) > MAX_ERR_LINES:
        problems.append(f"{len(lines)} lines on stderr: {lines[:4]}")
    after = snapshot(case.root)
    changed = {
        p
        for p in before.keys() | after.keys()
        if before.get(p) != after.get(p) and not any(Path(p.rstrip("/")).is_relative_to(o) for o in owns)
    }
    if changed:
        problems.append(f"changed what it does not own: {sorted(changed)[:3]}")
    if time.monotonic() - started > TIME_BOUND_S:
        problems.append(f"took {time.monotonic() - started:.0f} s")
    return problems


def _time_bound(signum, frame):
    raise TimeBound


def label(argv: list[str]) -> str:
    """The command without its paths and options: `report`, `history show`, `pytest`."""
    words = [a for a in argv if not a.startswith(("/", "-", "sqlite:"))]
    return " ".join(words[:2] if words[0] == "history" else words[:1])


def fuzz(folder: Path, kind: str, count: int, seed: int = 0, pytest_collections: int | None = None) -> list[Outcome]:
    """`count` mutated copies of the template for `kind`, each driven through every command that
    reads it (pytest's collection in the first `pytest_collections` profile cases only: a second
    each); every command's outcome."""
    base = template(folder / "template") if not (folder / "template").exists() else Case(folder / "template")
    rng = random.Random(f"{kind}-{seed}")
    outcomes = []
    for number in range(count):
        case = Case(folder / f"{kind}-{number}")
        shutil.copytree(base.root, case.root)
        mutation = mutate(case, kind, rng)
        refused = unusable(case) if kind in RUN_FILES else []
        for argv, owns in commands(case, kind):
            if argv[0] == "pytest" and pytest_collections is not None and number >= pytest_collections:
                continue
            reads = [path for path in refused if any(arg in path for arg in argv if arg.startswith("/"))]
            outcomes.append(Outcome(kind, mutation, label(argv), check(case, argv, owns, reads)))
        shutil.rmtree(case.root)
    return outcomes
