"""tox.ini runs every command it names: tox refuses a program outside the environment unless allowlisted."""

from __future__ import annotations

import configparser
from pathlib import Path

TOX_INI = Path(__file__).resolve().parents[1] / "tox.ini"


def test_programs_outside_an_environment_are_allowlisted():
    config = configparser.ConfigParser(interpolation=None)
    config.read(TOX_INI)
    for section in config.sections():
        allowed = config[section].get("allowlist_externals", "").split()
        commands = "\n".join(config[section].get(key, "") for key in ("commands_pre", "commands"))
        for line in filter(None, (line.strip() for line in commands.splitlines())):
            program = line.split()[0]
            if program.startswith("{toxworkdir}"):  # another environment's interpreter, like the gate's candidate
                assert program in allowed, f"{TOX_INI}: [{section}] runs {program} without allowlist_externals"


def test_ci_sets_CI_and_tox_passes_it_to_the_tests_that_need_their_tools():
    """Under CI=true a missing Chromium, PostgreSQL or actionlint fails the browser, history and
    linter tests (tests/test_report_browser.py::test_chromium_is_required_under_ci); .ci/run sets it
    and the unit environment (which runs them) must receive it."""
    ci = (TOX_INI.parent / ".ci" / "run").read_text()
    assert "\nexport CI=true\n" in ci and ci.index("export CI=true") < ci.index("python3 -m tox")
    config = configparser.ConfigParser(interpolation=None)
    config.read(TOX_INI)
    assert "CI" in config["testenv:unit"]["passenv"].replace(",", " ").split()
    assert config["tox"]["env_list"].split(",")[0].strip() == "unit"
