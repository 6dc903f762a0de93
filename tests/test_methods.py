"""The method registry (specperf/methods.py) is the one place that names SD methods: every trait
the code asks about is declared there, and no other module of the package spells a method name."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from specperf.analysis import simulate
from specperf.methods import HEAD, METHODS, MODEL_FREE, REFERENCE, method_of, token_tree
from specperf.run.builds import methods as vllm_methods

PACKAGE = Path(__file__).resolve().parent.parent / "specperf"
# Where a method's name is the point: the registry, vLLM's per-release table, and the simulator's
# own vocabulary (the study's trace files name their acceptance acc_ngram and acc_eagle).
ALLOWED = {"methods.py", "run/builds/methods.py", "analysis/simulate.py"}
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


# The traits of one method must fit together: each rule is what the code that reads a trait
# assumes of it (docs/howto/add-a-method.md names the readers).
SIMULATED = {simulate.NGRAM, simulate.DRAFT, simulate.ADAPTIVE}  # what analysis/headroom.py can simulate
RULES = {
    "the reference is no method a profile declares": lambda m: not m.is_reference,
    "simulated_as is one the headroom can simulate": lambda m: m.simulated_as in {None, *SIMULATED},
    "simulated as n-gram: its drafts are vLLM's n-gram rule's": lambda m: (
        m.simulated_as != simulate.NGRAM or m.ngram_drafts
    ),
    "simulated with a draft model: tracing runs it over each output": lambda m: (
        m.simulated_as not in (simulate.DRAFT, simulate.ADAPTIVE) or m.draft_over_output
    ),
    "n-gram drafts: model-free, with n-gram's window": lambda m: (
        not m.ngram_drafts or (m.proposer == MODEL_FREE and m.ngram_window)
    ),
    "a draft run over outputs or in the engine is a draft model": lambda m: (
        not (m.draft_over_output or m.draft_in_engine) or m.drafts_with_a_model
    ),
    "a head in the target is a head": lambda m: not m.head_in_target or m.proposer == HEAD,
    "drafting fitted as a share is model-free, as learned is learned": lambda m: (
        m.drafting_fit is None or (m.drafting_fit, m.proposer == MODEL_FREE) in {("share", True), ("learned", False)}
    ),
    "a learned drafter's fit is learned": lambda m: not m.learned or m.drafting_fit == "learned",
    "fit_from names a method fitted as learned": lambda m: (
        m.fit_from is None or (m.fit_from in METHODS and METHODS[m.fit_from].drafting_fit == "learned")
    ),
    "a tree method names its chain method, of its kind, and needs its tree": lambda m: (
        m.tree_of is None
        or (
            METHODS[m.tree_of].proposer == m.proposer
            and not METHODS[m.tree_of].tree_of
            and "speculative_token_tree" in m.requires
        )
    ),
    "a method that needs `model` drafts with a model": lambda m: "model" not in m.requires or m.drafts_with_a_model,
}


@pytest.mark.parametrize("name", METHODS)
def test_each_methods_traits_fit_together(name):
    broken = [rule for rule, holds in RULES.items() if not holds(METHODS[name])]
    assert broken == [], f"{name}: {'; '.join(broken)}"


def test_the_study_series_are_series_of_the_studys_figures():
    reference = json.loads((PACKAGE / "report" / "reference_data.json").read_text())
    figure1 = {name for panel in reference["fig1_speedup_vs_batch"]["panels"].values() for name in panel}
    figure3 = {
        name
        for panel in reference["fig3_throughput_tokens_per_s"].values()
        for by_batch in panel.values()
        for name in by_batch
    }
    assert {name for m in METHODS.values() for name in m.study_series.values()} <= figure1
    assert {name for m in METHODS.values() for name in m.figure3_series.values()} <= figure3


def test_only_a_model_free_method_has_no_weights_of_its_own():
    assert not REFERENCE.has_own_weights and REFERENCE.is_reference
    assert all(m.has_own_weights == (m.proposer != MODEL_FREE) for m in METHODS.values())


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
