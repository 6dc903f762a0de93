"""The lists in the docs that the code declares, written from the code so that they cannot go stale.

A generated list sits in a page between two comments, `<!-- doc_lists: NAME -->` and
`<!-- /doc_lists -->`; NAME is one of BLOCKS below.

    python scripts/doc_lists.py          # rewrite every generated list in README.md and docs/
    python scripts/doc_lists.py --check  # list the stale ones (exit 1), change nothing

tests/test_doc_lists.py fails while a generated list differs from what this writes, and checks the
lists that are prose against the code (verdicts, result statuses, profile fields).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, run from anywhere

from specperf.judge.metrics import LEAST_SPEED, METRICS, MetricSpec  # noqa: E402
from specperf.methods import METHODS  # noqa: E402
from specperf.profiles.registry import BATCHING_MODES  # noqa: E402
from specperf.records.scenario import SERVE, Method, Model, Sampling, Scenario  # noqa: E402

BLOCK = re.compile(r"(<!-- doc_lists: ([\w-]+) -->\n)(.*?)(<!-- /doc_lists -->)", re.S)
JUDGED_BY = {
    "mannwhitney": "tolerance and U test",
    "threshold": "tolerance alone",
    "absolute": "its value below the tolerance fails, no baseline needed",
}


def pages() -> list[Path]:
    """The pages that may hold generated lists."""
    docs = ROOT / "docs"
    return [ROOT / "README.md", *sorted(docs.glob("*.md")), *sorted((docs / "howto").glob("*.md"))]


def _values(spec: MetricSpec) -> str:
    low = "above 0" if spec.least == LEAST_SPEED else f"{spec.least:g}"
    if spec.most == math.inf:
        return low if spec.least == LEAST_SPEED else f"{low} or more"
    return f"{low} to {spec.most:g}"


def _tolerance(spec: MetricSpec) -> str:
    return f"p < {spec.rel_tolerance:g}" if spec.test == "absolute" else f"{spec.rel_tolerance:.0%}"


def _judged_by(spec: MetricSpec) -> str:
    if spec.against_baseline and spec.name != "lossless_fraction":
        sampled = "gates" if spec.gates_sampled else "shown, failing nothing unless given a tolerance"
        return f"{JUDGED_BY[spec.test]}; sampled: its interval over requests, {sampled}"
    return JUDGED_BY[spec.test]


def metrics() -> str:
    """Every metric, as judge/metrics.py declares it."""
    rows = [
        f"| `{m.name}` | {m.unit or '-'} | {m.direction} | {_tolerance(m)} | {_judged_by(m)} | {_values(m)} "
        f"| {m.description} |"
        for m in METRICS.values()
    ]
    head = "| metric | unit | better | default tolerance | judged by | values | what it is |\n" + "|---" * 7 + "|"
    return "\n".join([head, *rows]) + "\n"


def metric_names() -> str:
    """The names `tolerances` and `informational` accept."""
    return ", ".join(f"`{name}`" for name in METRICS) + "\n"


def methods() -> str:
    """Every SD method a profile may name, as methods.py declares it."""
    head = (
        "| `method` | pytest marker | how it drafts | a profile must give | the marker selects |\n|---|---|---|---|---|"
    )
    rows = [
        f"| `{m.name}` | `{m.marker}` | {m.proposer} | {', '.join(f'`{r}`' for r in m.requires)} | {m.description} |"
        for m in METHODS.values()
    ]
    return "\n".join([head, *rows]) + "\n"


# Placeholders for the id's parts, each written in capitals once the id is made (a stored name is
# lower case); each number and name is one no real scenario has.
PARTS = {
    "MODEL": "m0del",
    "LABEL": "l4bel",
    "DATASET": "d4taset",
    "B": 7913,  # within the ranges a stored scenario holds (records/scenario.py)
    "C": 3917,
    "R": 97.25,
    "T": 7.125,
    "P": 0.8125,
    "K": 7531,
}
# The scenario's settings that id_forms gives a placeholder or varies over their values (`serves`:
# the mode); tests/test_doc_lists.py holds them to the ones Scenario._id reads.
ID_SETTINGS = {
    "model",
    "batch_size",
    "dataset",
    "batching",
    "trace",
    "serves",
    "concurrency",
    "request_rate",
    "sampling",
}


def _placeholder_id(**settings) -> str:
    scenario = Scenario(
        profile="doc",
        model=Model(name=PARTS["MODEL"], path="doc"),
        method=Method(label=PARTS["LABEL"], name="doc"),
        batch_size=PARTS["B"],
        dataset=PARTS["DATASET"],
        num_requests=1,
        output_len=1,
        rounds=1,
        **settings,
    )
    text = scenario.id
    for part in ("MODEL", "LABEL", "DATASET"):
        text = text.replace(str(PARTS[part]), part)
    for letter in ("B", "C", "R", "T", "P", "K"):
        text = text.replace(f"{PARTS[letter]:g}", letter)
    return text


def id_forms() -> str:
    """The forms a scenario id takes, from Scenario's own id: each offline batching mode, traced or
    not, a serve scenario with and without a request rate, and sampled ones."""
    rows = []
    for batching in BATCHING_MODES:
        for trace in (False, True):
            what = f'`batching = "{batching}"`' + (", `trace = true`" if trace else "")
            rows.append((what, _placeholder_id(batching=batching, trace=trace)))
    serve = {"mode": SERVE, "concurrency": PARTS["C"]}
    rows.append((f'`mode = "{SERVE}"`, concurrency C', _placeholder_id(**serve)))
    rows.append(
        (f'`mode = "{SERVE}"`, concurrency C, `request_rate = R`', _placeholder_id(**serve, request_rate=PARTS["R"]))
    )
    hot = Sampling(temperature=PARTS["T"])
    rows.append(("`sampling = { temperature = T }`", _placeholder_id(sampling=hot)))
    full = Sampling(temperature=PARTS["T"], top_p=PARTS["P"], top_k=PARTS["K"])
    rows.append(("`sampling = { temperature = T, top_p = P, top_k = K }`", _placeholder_id(sampling=full)))
    rows.append(
        (
            f'`mode = "{SERVE}"`, concurrency C, `sampling = {{ temperature = T }}`',
            _placeholder_id(**serve, sampling=hot),
        )
    )
    head = "| scenario | its id |\n|---|---|"
    return "\n".join([head, *(f"| {what} | `{form}` |" for what, form in rows)]) + "\n"


BLOCKS: dict[str, Callable[[], str]] = {
    "metrics": metrics,
    "metric-names": metric_names,
    "methods": methods,
    "id-forms": id_forms,
}


def rewritten(text: str, where: str) -> str:
    """`text` with every generated list written anew; an unknown list name is a ValueError."""

    def write(match: re.Match) -> str:
        name = match.group(2)
        if name not in BLOCKS:
            raise ValueError(f"{where}: unknown generated list {name!r} (known: {', '.join(BLOCKS)})")
        return match.group(1) + BLOCKS[name]() + match.group(4)

    return BLOCK.sub(write, text)


def stale() -> list[str]:
    """One line per page whose generated lists differ from the code's."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        if rewritten(text, str(page)) != text:
            names = [m.group(2) for m in BLOCK.finditer(text) if BLOCKS[m.group(2)]() != m.group(3)]
            found.append(f"{page.relative_to(ROOT)}: stale list(s) {', '.join(names)}: run python scripts/doc_lists.py")
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problems = stale()
        print("\n".join(problems) or "every generated list is current")
        return 1 if problems else 0
    if argv:
        print("usage: python scripts/doc_lists.py [--check]", file=sys.stderr)
        return 2
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = rewritten(text, str(page))
        if new != text:
            page.write_text(new, encoding="utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
