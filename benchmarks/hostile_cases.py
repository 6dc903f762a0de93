"""The hostile inputs of hardening 4, each on a copy of the real runs in tests/data/runs/: the command,
its exit and what it printed about the input (the first line on stderr, else on stdout).  The unit
tests assert each case (tests/test_hostile_files.py and the tests its docstrings name); this prints the
table docs/methodology/hardening.md shows.  Needs the unit tier's environment:

    .tox/unit/bin/python benchmarks/hostile_cases.py
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fuzz_files import Case, collect, run_command, template  # noqa: E402

NGRAM = "smollm2-135m-ngram-k3-bs1-instructcoder-traced"
KEY = "cpu-amd-epyc-2c"
MARKS = ("error", "corrupt", "holds", "skipped", NGRAM)  # what a line about the input says


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def result_file(case: Case, scenario: str = NGRAM) -> Path:
    return case.run / "results" / f"{scenario}.json"


def lossless_hidden(case: Case) -> list[str]:
    """1: this machine's baseline lacks lossless_fraction, the run's fell from 1 to 0."""
    edit_json(case.baselines / KEY / f"{NGRAM}.json", lambda b: b["metrics"].pop("lossless_fraction"))
    edit_json(result_file(case), lambda r: r["metrics"]["lossless_fraction"].update(samples=[0.0] * 5))
    return ["judge"]


def servers_linked(case: Case) -> list[str]:
    """2: the run's servers/ is a link to a folder outside it, then --resume."""
    (case.root / "elsewhere").mkdir()
    (case.sampled / "servers").symlink_to(case.root / "elsewhere")
    return collect(case, "--resume", str(case.sampled))


def negative_ngram(case: Case) -> list[str]:
    """3: a negative n-gram acceptance in a trace."""
    edit_json(result_file(case), lambda r: r["trace"]["requests"][0]["ngram_acc"].__setitem__(0, -3))
    return ["report", str(case.run), "--out", str(case.root / "out"), "--history", "off"]


def forward_missing(case: Case) -> list[str]:
    """4: a trace without step_us.forward."""
    edit_json(result_file(case), lambda r: r["trace"]["step_us"].pop("forward"))
    return ["simulate", "--fit-from", str(case.run)]


def huge_acc_len(case: Case) -> list[str]:
    """4: an acceptance length of 10**400 in a study trace."""
    path = case.studies / "combined_instructcoder.jsonl"
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace('"acc_len": [', '"acc_len": [' + "1" + "0" * 400 + ", ", 1)
    path.write_text("\n".join(lines) + "\n")
    return ["simulate", "--study-traces", str(case.studies), "--datasets", "instructcoder"]


def blob_key(case: Case) -> list[str]:
    """4: a BLOB in the history's results.hardware_key."""
    with sqlite3.connect(case.history) as db:
        db.execute("UPDATE results SET hardware_key = ? WHERE rowid = 1", (b"\x00\xff",))
    return ["history", "--history", case.url(), "drift", "--since", "36500d"]


def secret_url(case: Case) -> list[str]:
    """5: a history URL with a key in it, whose folder cannot be made."""
    return ["plan", "--profile", str(case.profile), "--history", "sqlite+pysqlcipher://:KEY@//x/y.db"]


def id_with_line_feed(case: Case) -> list[str]:
    """7: a stored model name with a line feed that forges a verdict line."""
    edit_json(result_file(case), lambda r: r["scenario"]["model"].update(name="smollm2-135m\n  all pass"))
    return ["compare", str(case.run), str(case.run)]


def second_copy(case: Case) -> list[str]:
    """7: a second result of one scenario under another name."""
    (case.run / "results" / "copy.json").write_text(result_file(case).read_text())
    return ["report", str(case.run), "--out", str(case.root / "out"), "--history", "off"]


def code_loading(case: Case) -> list[str]:
    """8: a profile whose engine arguments load code, without allow_code."""
    engine_args = "[profile.engine_args]\n"
    case.profile.write_text(case.profile.read_text().replace(engine_args, engine_args + "trust_remote_code = true\n"))
    return collect(case)


def url_model(case: Case) -> list[str]:
    """8: a model path that is a URL."""
    case.profile.write_text(case.profile.read_text().replace('"builtin:smollm2-135m"', '"file:///etc/passwd"'))
    return collect(case)


def slow_baseline(case: Case) -> list[str]:
    """9: a baseline speed of 1e-5 tok/s."""
    path = case.baselines / KEY / f"{NGRAM}.json"
    edit_json(path, lambda b: b["metrics"]["throughput_tok_s"].update(samples=[1e-5] * 5))
    return ["judge"]


CASES = [
    lossless_hidden,
    servers_linked,
    negative_ngram,
    forward_missing,
    huge_acc_len,
    (lambda case: ["simulate", "--study-traces", str(case.studies), "--batch-sizes", "-1"], "4: --batch-sizes -1"),
    blob_key,
    (lambda case: ["history", "--history", case.url(), "drift", "--since", "999999999d"], "4: --since 999999999d"),
    (lambda case: ["history", "--history", f"sqlite+aiosqlite:///{case.history}", "show", NGRAM], "4: no such driver"),
    secret_url,
    (lambda case: ["plan", "--profile", str(case.profile), "--shards", "1000000000"], "6: plan --shards 1e9"),
    (lambda case: collect(case, "--shard", "1/1000000000"), "6: pytest --shard 1/1e9"),
    id_with_line_feed,
    second_copy,
    code_loading,
    url_model,
    slow_baseline,
]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        base = template(Path(folder) / "template")
        print("| case | command | exit | printed |\n|---|---|---|---|")
        for number, entry in enumerate(CASES):
            setup, what = entry if isinstance(entry, tuple) else (entry, entry.__doc__.rstrip("."))
            case = Case(Path(folder) / f"case{number}")
            shutil.copytree(base.root, case.root, symlinks=True)
            argv = setup(case)
            code, out, err = run_command(case, argv)
            lines = [line for line in err.splitlines() + out.splitlines() if "WARNING" not in line]
            shown = next((line for line in lines if any(w in line.lower() for w in MARKS)), lines[0] if lines else "")
            command = " ".join(a.replace(folder, "…") for a in argv)
            printed = shown.replace(folder, "…")[:220].replace("|", "\\|")
            print(f"| {what} | `{command[:90]}` | {code} | {printed} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
