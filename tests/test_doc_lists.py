"""The lists in README.md and docs/ that the code declares hold what the code declares: the generated
ones (scripts/doc_lists.py: metrics, methods, scenario id forms) are what the script writes today,
and the written ones (verdicts, result statuses, profile fields and their choices and defaults, the
profiles, the commands, the modules and files the docs name) are compared with the code here.
Each failure is one line naming the page, the list and what is missing or extra."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from specperf import status
from specperf.methods import METHODS
from specperf.profiles.scenarios import load_profile
from specperf.profiles.schema import CellTable, MethodTable, ModelTable, ProfileFile, ProfileTable
from specperf.records.scenario import OFFLINE, Scenario
from specperf.schedule import FIELD as SCHEDULE

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import doc_lists  # noqa: E402

PAGES = doc_lists.pages()
RESULT_STATUSES = (status.OK, status.SKIPPED, status.UNSUPPORTED, status.ERROR)
ERROR_KINDS = {value for name, value in vars(status).items() if name.startswith("ERROR_")}


def page(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def differ(where: str, found, expected) -> str:
    """One line: what a list in the docs lacks and what it has that the code does not."""
    missing = [x for x in expected if x not in found]
    extra = [x for x in found if x not in expected]
    order = "" if missing or extra else f"; order {list(found)}, the code's {list(expected)}"
    return f"{where}: missing {missing}, extra {extra}{order}"


def table(text: str, after: str) -> list[list[str]]:
    """The cells of the first table after the line starting with `after` (header and rule left out)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]


def ticked(cell: str) -> str | None:
    """The text of a cell that is one `code span`, else None."""
    found = re.fullmatch(r"`([^`]+)`", cell)
    return found.group(1) if found else None


def paragraph(text: str, containing: str) -> str:
    return next(p for p in text.split("\n\n") if containing in p)


# ------------------------------------------------------------------ generated lists


def test_every_generated_list_is_what_the_code_gives():
    stale = doc_lists.stale()
    assert not stale, "\n".join(stale)


def test_the_id_forms_vary_every_setting_the_id_reads():
    """Scenario._id reads these settings; doc_lists writes an id form for each value they take."""
    source = textwrap.dedent(inspect.getsource(Scenario._id))
    read = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
    }
    varied = doc_lists.ID_SETTINGS
    assert read == varied, differ("scripts/doc_lists.py ID_SETTINGS, the settings Scenario._id reads", varied, read)


def test_every_id_form_the_docs_give_is_one_the_code_makes():
    forms = set(re.findall(r"`(MODEL-[^`]*)`", doc_lists.id_forms()))
    wrong = [
        f"{path.relative_to(ROOT)}: `{form}`"
        for path in PAGES
        for form in re.findall(r"`(MODEL-[^`]*)`", path.read_text(encoding="utf-8"))
        if form not in forms
    ]
    assert not wrong, f"id forms no scenario has: {'; '.join(wrong)} (the forms: {', '.join(sorted(forms))})"


# ------------------------------------------------------------------ statuses


def test_the_verdicts_of_judging_md_are_status_py_s_worst_first():
    found = [ticked(row[0]) for row in table(page("docs/judging.md"), "## Verdicts")]
    assert found == list(status.SEVERITY), differ("docs/judging.md, Verdicts", found, status.SEVERITY)


def test_the_readme_names_every_verdict_worst_first():
    text = paragraph(page("README.md"), "Verdicts, worst first:")
    found = re.findall(r"`([^`]+)`", text.split("Verdicts, worst first:", 1)[1].split("([docs/judging.md]")[0])
    found = [word for word in found if not word.startswith("--")]
    assert found == list(status.SEVERITY), differ("README.md, Verdicts", found, status.SEVERITY)


def test_the_result_statuses_and_error_kinds_of_judging_md_are_status_py_s():
    rows = table(page("docs/judging.md"), "## A result's status")
    found = [ticked(row[0]) for row in rows]
    assert found == list(RESULT_STATUSES), differ("docs/judging.md, result statuses", found, RESULT_STATUSES)
    error_row = next(row[1] for row in rows if ticked(row[0]) == status.ERROR)
    kinds = set(re.findall(r"`(\w+)` \(", error_row))
    assert kinds == ERROR_KINDS, differ("docs/judging.md, error kinds", sorted(kinds), sorted(ERROR_KINDS))


def test_this_file_knows_every_word_of_status_py():
    """A status added to status.py is a verdict, a result status or an error kind, each checked above."""
    words = {value for name, value in vars(status).items() if name.isupper() and isinstance(value, str)}
    placed = set(status.SEVERITY) | set(RESULT_STATUSES) | ERROR_KINDS
    assert words <= placed, f"specperf/status.py: {sorted(words - placed)} placed in no list of the docs"


# ------------------------------------------------------------------ profile fields

TABLES = {
    "### `[profile]`": ProfileTable,
    "### `[models.NAME]`": ModelTable,
    "### `[methods.LABEL]`": MethodTable,
    "### `[[cells]]`": CellTable,
}
SCHEMA = ProfileFile.model_json_schema()


def enum_of(schema: object) -> list | None:
    """The first list of choices (`enum`) in a field's JSON Schema."""
    if isinstance(schema, dict):
        if "enum" in schema:
            return schema["enum"]
        return next((e for e in map(enum_of, schema.values()) if e is not None), None)
    if isinstance(schema, list):
        return next((e for e in map(enum_of, schema) if e is not None), None)
    return None


def enumeration(text: str) -> list[str]:
    """The longest run of code spans joined by ", ", " or " or " and " (`a`, `b` or `c`), quotes off;
    one code span of words split at the spaces (`T4 A10 A100`)."""
    spans = r"`[^`]+`"
    runs = []
    for run in re.finditer(rf"{spans}(?:(?:,? or |, | and ){spans})*", text):
        words = [span.strip("`").strip('"') for span in re.findall(spans, run.group(0))]
        runs.append(words[0].split() if len(words) == 1 else words)
    return max(runs, key=len, default=[])


@pytest.mark.parametrize("heading", TABLES)
def test_each_profile_table_has_one_row_per_field(heading):
    model = TABLES[heading]
    rows = [ticked(row[0]) for row in table(page("docs/profile-format.md"), heading) if ticked(row[0])]
    # a method table passes other fields to vLLM; those the suite checks itself have rows too
    checked = {name for m in METHODS.values() for name in m.requires} | {SCHEDULE} if model is MethodTable else set()
    expected = list(model.model_fields)
    assert set(expected) <= set(rows) <= set(expected) | checked, differ(
        f"docs/profile-format.md, {heading[4:]}", rows, expected + sorted(checked & set(rows))
    )


@pytest.mark.parametrize("heading", TABLES)
def test_the_choices_a_profile_table_lists_are_the_fields_choices(heading):
    """Where a row lists choices (`"cpu"` or `"gpu"`), it lists exactly the field's, in order."""
    model = TABLES[heading]
    properties = SCHEMA["$defs"][model.__name__]["properties"]
    wrong = []
    for row in table(page("docs/profile-format.md"), heading):
        name = ticked(row[0])
        choices = enum_of(properties.get(name)) if name else None
        if choices is None:
            continue
        listed = enumeration(" | ".join(row[1:]))
        if len(listed) > 1 and set(listed) & set(choices) and listed != choices:
            wrong.append(differ(f"docs/profile-format.md, {heading[4:]} `{name}`", listed, choices))
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("heading", TABLES)
def test_the_defaults_a_profile_table_gives_are_the_fields_defaults(heading):
    """A default written as a value (`5`, `"gpu"`, `{}`, `false`) is the field's; prose ("the
    model's own") is left alone."""
    model = TABLES[heading]
    wrong = []
    for row in table(page("docs/profile-format.md"), heading):
        name = ticked(row[0])
        if not name or len(row) < 3:
            continue
        try:
            written = json.loads(row[2].strip("`"))
        except ValueError:
            continue
        field = model.model_fields[name]
        default = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
        if written != default:
            wrong.append(
                f"docs/profile-format.md, {heading[4:]} `{name}`: default {written!r}, the field's {default!r}"
            )
    assert not wrong, "\n".join(wrong)


def test_the_profile_wide_settings_are_those_a_cell_cannot_set():
    text = paragraph(page("docs/profile-format.md"), "are profile-wide")
    found = re.findall(r"`(\w+)`", text)
    expected = [name for name in ProfileTable.model_fields if name not in CellTable.model_fields]
    assert sorted(found) == sorted(expected), differ("docs/profile-format.md, profile-wide settings", found, expected)


# ------------------------------------------------------------------ profiles, commands, claims


def test_the_readmes_profiles_are_the_profile_files():
    rows = [ticked(row[0]) for row in table(page("README.md"), "## Profiles")]
    files = sorted(p.stem for p in (ROOT / "fixtures" / "scenarios").glob("*.toml"))
    assert sorted(rows) == files, differ("README.md, Profiles", rows, files)


def test_the_readmes_commands_are_the_clis():
    import argparse

    from specperf import cli

    sub = argparse.ArgumentParser().add_subparsers()
    for command in cli.COMMANDS:
        command.add_parser(sub)
    block = page("README.md").split("## Commands", 1)[1].split("```")[1]
    found = re.findall(r"^specperf (\w+)", block, re.M)
    assert set(found) == set(sub.choices), differ("README.md, Commands", set(found), list(sub.choices))


def test_the_cpu_profiles_trace_what_the_docs_say():
    """cpu-smoke traces every greedy offline scenario; cpu-full every one but the MTP target's; neither
    traces a sampled one."""
    for name, untraced_methods in (("cpu-smoke", set()), ("cpu-full", {"mtp"})):
        scenarios = load_profile(name).scenarios
        offline = [s for s in scenarios if s.mode == OFFLINE and s.sampling.greedy]
        untraced = {s.model.name for s in offline if not s.trace}
        methods = {s.method.name for s in offline if s.model.name in untraced and not s.is_reference}
        assert methods == untraced_methods, (
            f"fixtures/scenarios/{name}.toml: untraced {sorted(untraced)}, methods {methods}"
        )
        assert all(not s.trace for s in scenarios if not s.sampling.greedy)
    assert "traced but the sampled and served cells" in page("README.md")
    traces_page = " ".join(page("docs/traces.md").split())
    assert "every offline scenario but the sampled ones (the traces' acceptance rules are greedy ones)" in traces_page
    assert "and `cpu-full` every one but those and the MTP target's" in traces_page


# ------------------------------------------------------------------ modules and files named


PACKAGE = ROOT / "specperf"
TOP = "|".join(sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")))
EXAMPLES = {"fixtures/scenarios/own.toml"}  # a file a page makes up to show an error message


def module_problem(dotted: str) -> str | None:
    """Why `specperf.a.b` (or `a.b` under the package) names no module, or no name in one."""
    parts = dotted.removeprefix("specperf.").split(".")
    path = PACKAGE
    for i, part in enumerate(parts):
        if (path / part).is_dir():
            path = path / part
        elif (path / f"{part}.py").is_file():
            source = (path / f"{part}.py").read_text(encoding="utf-8")
            rest = parts[i + 1 :]
            if rest and not re.search(rf"^\s*(def|class) {rest[0]}\b|^{rest[0]}\b.*=", source, re.M):
                return f"{rest[0]} is not defined in {path.relative_to(ROOT)}/{part}.py"
            return None
        else:
            return f"no module {part} in {path.relative_to(ROOT)}"
    return None


def test_every_module_and_file_the_docs_name_exists():
    wrong = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        named = set(
            re.findall(r"(?<![\w./-])((?:specperf|tests|tests_perf|benchmarks|scripts|fixtures)/[\w./-]*\w)", text)
        )
        wrong += [f"{path.relative_to(ROOT)}: {n} does not exist" for n in named - EXAMPLES if not (ROOT / n).exists()]
        dotted = re.findall(rf"(?<![\w./-])((?:specperf|{TOP})(?:\.[a-z_]\w*)+)(?![\w/-])", text)
        for name in set(dotted):
            if re.search(r"\.(py|md|json|toml|html)$", name) or "." not in name.removeprefix("specperf."):
                continue
            if problem := module_problem(name):
                wrong.append(f"{path.relative_to(ROOT)}: {name}: {problem}")
    assert not wrong, "\n".join(wrong)


def test_add_a_method_names_every_trait_and_kind_of_proposer():
    from specperf import methods

    traits = [f.name for f in dataclasses.fields(methods.SDMethod)][4:]  # after name, marker, description, proposer
    derived = [name for name, value in vars(methods.SDMethod).items() if isinstance(value, property)]
    kinds = ["MODEL_FREE", "HEAD", "DRAFT_MODEL", "COMBINED"]
    guide = page("docs/howto/add-a-method.md")
    missing = [name for name in [*traits, *derived, *kinds] if f"`{name}`" not in guide and name != "is_reference"]
    assert missing == [], f"docs/howto/add-a-method.md: names none of {missing}"
