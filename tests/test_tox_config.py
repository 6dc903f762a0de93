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
            if program.startswith("{toxworkdir}"):      # another environment's interpreter, like the gate's candidate
                assert program in allowed, f"{TOX_INI}: [{section}] runs {program} without allowlist_externals"
