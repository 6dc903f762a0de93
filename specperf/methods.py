"""The SD methods the suite knows, each declared once with every trait the code asks about.

A profile names a method (`method = "eagle3"`); everything else (its pytest marker, how its draft
is proposed, whose weights count as the draft's, whether vLLM's n-gram rule applies, how tracing,
the cost fit, the simulator and the study's figures treat it) is read from its entry here.  Which
vLLM release accepts it, and under which name, is the per-release table in run/builds/methods.py.
Adding a method is one entry in METHODS (and one in that table): docs/howto/add-a-method.md says
which traits each kind of method sets, and who reads each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How a method proposes its draft.
NO_DRAFT = "no draft"  # the no-SD reference
MODEL_FREE = "model-free"  # from the context alone (n-gram, suffix): no weights, no KV cache
HEAD = "head"  # a learned head on the target's hidden states (EAGLE, EAGLE-3, MTP)
DRAFT_MODEL = "draft model"  # a small model of its own
COMBINED = "combined"  # per step, model-free where it has a match, else a draft model


@dataclass(frozen=True)
class SDMethod:
    name: str  # as a profile writes it, and vLLM's speculative_config method
    marker: str  # its pytest marker (the reference: "nosd", also its id label)
    description: str  # the marker's description
    proposer: str  # one of the kinds above
    head_in_target: bool = False  # the head is layers of the target's own checkpoint (MTP)
    ngram_drafts: bool = False  # its drafts are vLLM's n-gram rule's (analysis/ngram.py predicts them)
    ngram_window: bool = False  # prompt_lookup_min/max apply (vLLM: either defaults to the other)
    draft_in_engine: bool = False  # its draft model runs in the engine process through transformers
    draft_over_output: bool = False  # tracing runs its draft model over each output (draft_acc)
    requires: tuple[str, ...] = ()  # method parameters a profile must give
    simulated_as: str | None = None  # analysis/simulate.py's proposer: "ngram", "draft" or "adaptive" (None: not)
    drafting_fit: str | None = None  # analysis/cost_fit.py: "share" of the forward, "learned", or None
    fit_from: str | None = None  # the method whose fitted drafting cost it takes (its own: None)
    tree_of: str | None = None  # verifies a token tree (speculative_token_tree) drafted as this chain method
    study_series: dict[int, str] = field(default_factory=dict)  # the study's figure 1 series, by k
    figure3_series: dict[int, str] = field(default_factory=dict)  # the study's figure 3 series, by k

    @property
    def is_reference(self) -> bool:
        return self.proposer == NO_DRAFT

    @property
    def has_own_weights(self) -> bool:
        """Draft weights and a KV cache beyond the target's (a model-free proposer has neither)."""
        return self.proposer in (HEAD, DRAFT_MODEL, COMBINED)

    @property
    def learned(self) -> bool:
        """A learned drafter alone: a head or a draft model."""
        return self.proposer in (HEAD, DRAFT_MODEL)

    @property
    def drafts_with_a_model(self) -> bool:
        """Its draft is a model named by `model` (not a head over the target's hidden states)."""
        return self.proposer in (DRAFT_MODEL, COMBINED)


REFERENCE = SDMethod("none", "nosd", "the no-SD reference scenarios", NO_DRAFT)

# The speculative methods this suite measures; whether the installed vLLM runs one is checked
# when its engine starts.
METHODS: dict[str, SDMethod] = {
    m.name: m
    for m in (
        SDMethod(
            "ngram",
            "ngram",
            "n-gram (prompt lookup) scenarios",
            MODEL_FREE,
            ngram_drafts=True,
            ngram_window=True,
            simulated_as="ngram",
            drafting_fit="share",
            study_series={3: "ngram-k3", 5: "ngram-k5"},
            figure3_series={3: "N-gram"},
        ),
        SDMethod("eagle", "eagle", "EAGLE scenarios", HEAD, drafting_fit="learned", study_series={3: "EAGLE"}),
        SDMethod(
            "eagle3",
            "eagle3",
            "EAGLE-3 scenarios",
            HEAD,
            drafting_fit="learned",
            study_series={3: "EAGLE-3"},
            figure3_series={3: "EAGLE-3"},
        ),
        # Tree verification (the study's profile-q3-8b-eagle-tree*.sh): the head drafts a token tree,
        # the target verifies every branch in one step; vLLM takes the tree as speculative_token_tree.
        SDMethod(
            "eagle_tree",
            "eagle_tree",
            "EAGLE scenarios verifying a token tree",
            HEAD,
            requires=("speculative_token_tree",),
            drafting_fit="learned",
            tree_of="eagle",
        ),
        SDMethod(
            "eagle3_tree",
            "eagle3_tree",
            "EAGLE-3 scenarios verifying a token tree",
            HEAD,
            requires=("speculative_token_tree",),
            drafting_fit="learned",
            tree_of="eagle3",
        ),
        SDMethod(
            "draft_model",
            "draft_model",
            "draft-model scenarios",
            DRAFT_MODEL,
            draft_over_output=True,
            simulated_as="draft",
            drafting_fit="learned",
            study_series={3: "DraftModel"},
        ),
        SDMethod(
            "mtp",
            "mtp",
            "multi-token-prediction scenarios",
            HEAD,
            head_in_target=True,
            drafting_fit="learned",
            figure3_series={3: "MTP"},
        ),
        SDMethod("suffix", "suffix", "suffix-decoding scenarios", MODEL_FREE),
        SDMethod(
            "adaptive",
            "adaptive",
            "scenarios of specperf's adaptive proposer (n-gram, else a draft model)",
            COMBINED,
            ngram_window=True,
            draft_in_engine=True,
            draft_over_output=True,
            requires=("model", "prompt_lookup_min", "prompt_lookup_max"),
            simulated_as="adaptive",
            fit_from="draft_model",
        ),
    )
}


def token_tree(text: str, k: int) -> tuple[tuple[int, ...], ...]:
    """vLLM's speculative_token_tree: node paths such as "[(0,), (1,), (0, 0)]", child i of its
    parent path; each node's parent is in the tree, and there are k nodes (one draft token each).
    Raises ValueError with the problem in words."""
    import ast

    try:
        nodes = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        nodes = None
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, tuple) and n for n in nodes):
        raise ValueError(f"must be a list of node paths such as '[(0,), (1,), (0, 0)]', got {text!r}")
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for n in nodes for i in n):
        raise ValueError(f"node paths hold child numbers (integers >= 0), got {text!r}")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"a node is listed twice in {text!r}")
    orphan = next((n for n in nodes if len(n) > 1 and n[:-1] not in nodes), None)
    if orphan is not None:
        raise ValueError(f"node {orphan} has no parent {orphan[:-1]} in the tree")
    if len(nodes) != k:
        raise ValueError(f"the tree has {len(nodes)} nodes, num_speculative_tokens is {k}: one draft token per node")
    return tuple(nodes)


def method_of(name: str) -> SDMethod:
    """The declaration of a method name (the reference's too).  A name the suite does not know (read
    from an old or foreign result file) gets no trait at all: nothing treats it as any method."""
    if name == REFERENCE.name:
        return REFERENCE
    return METHODS.get(name) or SDMethod(name, name, f"{name} scenarios", proposer="unknown")


K_FIELD = "num_speculative_tokens"  # speculative_config's k
K_IN_LABEL = re.compile(r"-k(\d+)$")  # a method label's k, as profiles name it ("ngram-k3")


def label_with_k(label: str, k: int) -> str:
    """The label of the method drafting `k` tokens: its -kN replaced, or appended where it had none."""
    return f"{label_stem(label)}-k{k}"


def label_stem(label: str) -> str:
    """A method label without its -kN: what the k sweeps of one method share ("ngram")."""
    return K_IN_LABEL.sub("", label)
