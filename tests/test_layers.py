"""The package's shape: imports go from higher layers to lower ones only, and no module is too long."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "specperf"

# Lowest first.  A module may import its own layer's and lower layers' modules only.
LAYERS = [
    {
        "specperf.status",
        "specperf.records",
        "specperf.messages",
        "specperf.methods",
        "specperf.paths",
        "specperf.schedule",
    },
    {"specperf.storage"},
    {"specperf.history"},
    {"specperf.judge"},
    {"specperf.analysis"},
    {"specperf.checkpoints"},
    {"specperf.profiles"},
    {"specperf.run"},
    {"specperf.report"},
    {"specperf.suite", "specperf.options", "specperf.hookspecs", "specperf.plan"},
    {"specperf.plugin", "specperf.cli"},
]
MAX_LINES = 350


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    for index, names in enumerate(LAYERS):
        if any(module == name or module.startswith(name + ".") for name in names):
            return index
    return None


def imports_of(path: Path) -> set[str]:
    """specperf modules imported by a file, relative imports resolved."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + (node.module.split(".") if node.module else []))
            if target == "specperf" or (not node.module and node.level):
                found |= {f"{target}.{alias.name}" for alias in node.names}
            else:
                found.add(target)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.startswith("specperf.")}


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    assert [module_name(p) for p in sources() if layer_of(module_name(p)) is None] == ["specperf"]


def test_no_import_from_a_lower_layer_to_a_higher_one():
    upward = []
    for path in sources():
        own = layer_of(module_name(path))
        for target in imports_of(path):
            if own is not None and layer_of(target) is not None and layer_of(target) > own:
                upward.append(f"{module_name(path)} -> {target}")
    assert not upward


def test_no_import_circle():
    graph = {module_name(p): {t for t in imports_of(p) if t != module_name(p)} for p in sources()}
    modules = set(graph)

    def resolve(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    edges = {
        m: {r for t in targets if (r := resolve(t)) and r != m and r != "specperf"} for m, targets in graph.items()
    }
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(module: str, path: list[str]) -> bool:
        state[module] = 1
        for nxt in edges[module]:
            if state.get(nxt) == 1:
                cycle.extend(path + [module, nxt])
                return True
            if nxt not in state and visit(nxt, path + [module]):
                return True
        state[module] = 2
        return False

    for module in sorted(modules):
        if module not in state and visit(module, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_no_module_is_too_long():
    long = {module_name(p): n for p in sources() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long
