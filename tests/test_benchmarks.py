"""The benchmarks run by hand, hours at a time, so nothing else would notice when a change to the
package breaks one: every name a benchmark imports from specperf must still exist."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def specperf_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from specperf... import name` in the file, at any depth."""
    return [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "specperf"
        for alias in node.names
    ]


def test_there_are_benchmarks_that_import_the_package():
    assert sum(bool(specperf_imports(path)) for path in BENCHMARKS) >= 5


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_every_name_a_benchmark_imports_exists(path):
    missing = [
        f"{module}.{name}"
        for module, name in specperf_imports(path)
        if not hasattr(importlib.import_module(module), name) and importlib.util.find_spec(f"{module}.{name}") is None
    ]
    assert not missing, f"{path.name} imports names the package no longer has: {missing}"
