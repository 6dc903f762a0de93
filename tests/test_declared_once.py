"""Each option and each default is stated once: the command-line options in options.py's table
(pytest adds them from it, the run reads them back into the same record), and a scenario setting's
default in the scenario record, which the profile format and the judges take from there."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import BaseModel

from specperf.options import Options, declarations

PACKAGE = Path(__file__).resolve().parent.parent / "specperf"


def calls_of(name: str) -> list[str]:
    """The package's modules that call a function or method `name`, once per call."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if called == name:
                    found.append(str(path.relative_to(PACKAGE)))
    return found


def assignments_of(name: str) -> list[str]:
    """The package's modules that assign module-level `name`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(str(path.relative_to(PACKAGE)))
    return found


def test_pytest_is_told_of_options_in_one_place_only():
    assert calls_of("addoption") == ["options.py"]


class OptionGroup:
    """Stands in for pytest's parser and its option group: what the plugin adds."""

    def __init__(self):
        self.added: list[tuple[tuple[str, ...], dict]] = []

    def getgroup(self, name: str, description: str = "") -> OptionGroup:
        return self

    def addoption(self, *flags: str, **settings) -> None:
        self.added.append((flags, settings))


def test_the_plugin_adds_the_fields_of_the_record_each_once():
    from specperf.plugin import pytest_addoption

    group = OptionGroup()
    pytest_addoption(group)
    assert [settings["dest"] for _, settings in group.added] == [f.name for f in fields(Options)]
    assert [flags for flags, _ in group.added] == [(declared.flag,) for declared in declarations().values()]


def given_on_the_command_line(name: str) -> tuple[list[str], object]:
    """The arguments that give option `name` a value other than its default, and that value as pytest parses it."""
    declared = declarations()[name]
    if declared.parser.get("action") == "store_true":
        return [declared.flag], True
    if "choices" in declared.parser:
        value = declared.parser["choices"][-1]
        return [declared.flag, value], value
    kind = declared.parser.get("type", str)
    value = {int: "7", float: "12.5", str: f"given-{name}"}[kind]
    return [declared.flag, value], kind(value)


@pytest.mark.parametrize("name", list(declarations()))
def test_each_option_given_reaches_its_field_read_as_declared(pytester, name):
    args, parsed = given_on_the_command_line(name)
    given = Options.parse(pytester.parseconfig("-p", "no:cacheprovider", *args))
    default = Options.parse(pytester.parseconfig("-p", "no:cacheprovider"))
    assert getattr(given, name) == declarations()[name].read(parsed) != getattr(default, name)
    assert {f.name for f in fields(Options) if getattr(given, f.name) != getattr(default, f.name)} == {name}


def test_options_left_out_take_their_declared_defaults(pytester, monkeypatch, tmp_path):
    from specperf import paths

    monkeypatch.setenv(paths.DATASET_DIR_VARIABLE, str(tmp_path))  # read when the options are added
    opts = Options.parse(pytester.parseconfig("-p", "no:cacheprovider"))
    assert opts.dataset_dir == tmp_path
    assert opts.reports_dir == Path(paths.DEFAULT_REPORTS_DIR) and opts.baseline_dir == paths.baseline_dir()
    assert opts.scenario_timeout_s == 3600.0 and opts.output_check == "auto" and opts.update_baselines is False
    with pytest.raises(AttributeError):
        opts.rounds = 3  # type: ignore[misc]  # frozen


def test_the_gate_tolerance_is_the_scenario_records_everywhere():
    """The same float object, not an equal literal: a restated 0.03 would be another object."""
    from specperf.judge.paired import GATE_TOLERANCE
    from specperf.judge.rules import DEFAULT_RULES
    from specperf.profiles.schema import ProfileTable
    from specperf.records import Scenario

    default = Scenario.model_fields["gate_tolerance"].default
    assert ProfileTable.model_fields["gate_tolerance"].default is default
    assert DEFAULT_RULES.gate_tolerance is default and GATE_TOLERANCE is default
    assert assignments_of("GATE_TOLERANCE") == ["records/scenario.py"]


def test_the_profile_format_takes_every_scenario_default_from_the_record():
    """Every [profile] and [models.NAME] setting a scenario record also has: the same default."""
    from specperf.profiles.schema import ModelTable, ProfileTable
    from specperf.records import Model, Scenario

    for table, record in ((ProfileTable, Scenario), (ModelTable, Model)):
        defaults = {}
        for name in table.model_fields.keys() & record.model_fields.keys():
            ours, theirs = table.model_fields[name], record.model_fields[name]
            if not ours.is_required() and not theirs.is_required():
                defaults[name] = (
                    ours.get_default(call_default_factory=True),
                    theirs.get_default(call_default_factory=True),
                )
        differing = {
            name
            for name, (ours, theirs) in defaults.items()
            if ours != theirs and not (isinstance(theirs, BaseModel) and type(theirs).model_validate(ours) == theirs)
        }  # a table of a record's settings (sampling) differs only where the record it makes differs
        assert differing == set(), table.__name__
        assert len(defaults) >= (10 if table is ProfileTable else 2)
    assert (
        ProfileTable.model_fields["gate_engine_offset"].default is Scenario.model_fields["gate_engine_offset"].default
    )


def test_the_no_sd_label_is_defined_once():
    assert assignments_of("NO_SD_LABEL") == ["records/scenario.py"]
