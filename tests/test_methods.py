"""The method registry (specperf/methods.py) is the one place that names SD methods: every trait
the code asks about is declared there, and no other module of the package spells a method name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from specperf.methods import COMBINED, DRAFT_MODEL, HEAD, METHODS, MODEL_FREE, REFERENCE, method_of, token_tree
from specperf.run import vllm_methods

PACKAGE = Path(__file__).resolve().parent.parent / "specperf"
# Where a method's name is the point: the registry, vLLM's per-release table, and the simulator's
# own vocabulary (the study's trace files name their acceptance acc_ngram and acc_eagle).
ALLOWED = {"methods.py", "run/vllm_methods.py", "analysis/simulate.py"}
NAMES = {m.name for m in METHODS.values()} | {m.marker for m in METHODS.values()} | {REFERENCE.marker}
# Words that are a method's name but name something else there: the adaptive proposer's simulated
# bound, a field of analysis/headroom.Headroom, its column and its key in the report's view.
OTHER_MEANING = {
    ("cli/simulate.py", "adaptive"),
    ("analysis/headroom.py", "adaptive"),
    ("report/traces.py", "adaptive"),
}


def literals(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_module_but_the_registry_spells_a_method_name():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in ALLOWED
        for line, value in literals(path)
        if value in NAMES and (str(path.relative_to(PACKAGE)), value) not in OTHER_MEANING
    ]
    assert found == []


def test_every_declared_method_has_its_vllm_names_per_release():
    """vLLM's table also lists methods the suite does not run (medusa, mlp_speculator, ...); every
    method the suite declares must be in it."""
    assert set(METHODS) <= {span.method for span in vllm_methods.SPANS}


@pytest.mark.parametrize(
    "name, proposer",
    [
        ("ngram", MODEL_FREE),
        ("suffix", MODEL_FREE),
        ("eagle", HEAD),
        ("eagle3", HEAD),
        ("mtp", HEAD),
        ("draft_model", DRAFT_MODEL),
        ("adaptive", COMBINED),
    ],
)
def test_each_method_declares_how_it_drafts(name, proposer):
    assert method_of(name).proposer == proposer


def test_traits_follow_from_the_kind_of_proposer():
    assert method_of("none").is_reference and not method_of("none").has_own_weights
    assert not method_of("ngram").has_own_weights and method_of("ngram").ngram_drafts
    assert method_of("mtp").has_own_weights and method_of("mtp").head_in_target and method_of("mtp").learned
    assert method_of("adaptive").drafts_with_a_model and not method_of("adaptive").learned
    assert method_of("adaptive").fit_from == "draft_model" and method_of("draft_model").draft_over_output


def test_a_name_the_suite_does_not_know_has_no_trait():
    unknown = method_of("medusa")
    assert not (unknown.is_reference or unknown.has_own_weights or unknown.learned or unknown.ngram_drafts)
    assert unknown.simulated_as is None and unknown.study_series == {} and unknown.requires == ()


STUDY_TREES = {  # scripts/bench_latency.py (e40377b1) get_speculative_token_tree
    4: "[(0,), (1,), (0,0), (1,0)]",
    6: "[(0,), (1,), (0, 0), (1, 0), (0, 0, 0), (1, 0, 0)]",
    10: "[(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1), (0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]",
    14: "[(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1), (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 0), "
    "(1, 0, 1), (1, 1, 0), (1, 1, 1)]",
}


@pytest.mark.parametrize("k", sorted(STUDY_TREES))
def test_the_studys_trees_are_valid_trees_of_k_nodes(k):
    nodes = token_tree(STUDY_TREES[k], k)
    assert len(nodes) == k and max(map(len, nodes)) == 3 - (k == 4)


@pytest.mark.parametrize(
    ("text", "k", "words"),
    [
        ("[(0,), (0, 0)]", 3, "the tree has 2 nodes, num_speculative_tokens is 3"),
        ("[(0,), (1, 0)]", 2, "node (1, 0) has no parent (1,)"),
        ("[(0,), (0,)]", 2, "a node is listed twice"),
        ("[(0,), (-1,)]", 2, "child numbers (integers >= 0)"),
        ("[[0], [1]]", 2, "must be a list of node paths"),
        ("(0, 1", 2, "must be a list of node paths"),
    ],
)
def test_a_malformed_tree_is_named(text, k, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        token_tree(text, k)


def test_a_tree_method_names_its_chain_and_a_chain_method_takes_no_tree():
    trees = {m.name: m.tree_of for m in METHODS.values() if m.tree_of}
    assert trees == {"eagle_tree": "eagle", "eagle3_tree": "eagle3"}
    assert all(METHODS[m].requires == ("speculative_token_tree",) for m in trees)
