"""The `specperf` command: one module per subcommand (report, compare, noise, simulate, history, plan, tune).

Measuring is pytest's job (`pytest tests_perf --profile NAME`); these commands only read run
directories (or acceptance traces), so a crashed, sharded or old run can still be reported and
compared.  Every command exits 0 when all is well, 1 on a regression, 2 on bad input or usage;
bad input is one line naming the file and the problem, and control characters in what is printed
are escaped (ids, prompts and errors come from files).
"""

from __future__ import annotations

import argparse
import sys

from ..messages import PrintableStream, on_one_line
from ..storage import ResultFileError
from . import compare, history, noise, plan, report, simulate, tune

COMMANDS = (report, compare, noise, simulate, history, plan, tune)
EXIT_CODES = "exit codes: 0 all is well, 1 a regression, 2 bad input or usage"


class CommandParser(argparse.ArgumentParser):
    """Every command's and verb's parser: its --help ends with the one exit-code rule."""

    def __init__(self, *args, epilog: str | None = EXIT_CODES, **kwargs) -> None:
        super().__init__(*args, epilog=epilog, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="specperf", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    args = parser.parse_args(argv)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(stdout), PrintableStream(stderr)
    try:
        return args.func(args)
    except ResultFileError as err:
        print(on_one_line(f"specperf: error: {err}"), file=sys.stderr)
        return 2
    except OSError as err:  # a folder it cannot write (read-only, a directory where a file goes), a full disk
        where = f"{err.filename}: " if err.filename else ""
        print(on_one_line(f"specperf: error: {where}{err.strerror or err}"), file=sys.stderr)
        return 2
    finally:
        sys.stdout, sys.stderr = stdout, stderr
