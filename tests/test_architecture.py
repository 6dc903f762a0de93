"""docs/architecture.md names every module of the package once, under the layer tests/test_layers.py
gives it, so that the page stays true to the code."""

from __future__ import annotations

import re
from pathlib import Path

from test_layers import LAYERS, layer_of, module_name, sources

PAGE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def documented() -> dict[str, int]:
    """Module -> the number of the layer section (0-based) that names it."""
    found, section = {}, None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (\d+)\. ", line)
        if heading:
            section = int(heading.group(1)) - 1
        elif line.startswith("## "):
            section = None
        row = re.match(r"^\| `(specperf[\w.]*)` \| .+ \|$", line)
        if row and section is not None:
            assert row.group(1) not in found, f"{PAGE}: {row.group(1)} named twice"
            found[row.group(1)] = section
    return found


def test_the_page_has_a_section_per_layer_in_order():
    numbers = [int(m.group(1)) for m in re.finditer(r"^## (\d+)\. ", PAGE.read_text(), re.M)]
    assert numbers == list(range(1, len(LAYERS) + 1))


def test_every_module_is_named_in_its_layer():
    modules = {module_name(p) for p in sources()} - {"specperf"}
    modules = {m for m in modules if ".migrations.versions" not in m}
    pages = documented()
    assert sorted(modules - pages.keys()) == [], "modules missing from docs/architecture.md"
    assert sorted(pages.keys() - modules) == [], "docs/architecture.md names modules that do not exist"
    assert {m: pages[m] for m in modules if pages[m] != layer_of(m)} == {}, "modules under the wrong layer"
