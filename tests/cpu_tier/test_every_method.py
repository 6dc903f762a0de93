"""The SD methods the main job leaves to cpu-full, end to end on real vLLM engines (CPU build): the
tiny targets' EAGLE, EAGLE-3 and MTP heads and the adaptive proposer beside n-gram and the draft
model (profiles/methods.toml), in one run."""

import json

import pytest
from suite import PROFILES, assert_methods_accept_and_are_lossless, only_run_dir, read_results, run_suite

from specperf.analysis.traces import request_positions

pytestmark = pytest.mark.cpu_tier


@pytest.fixture(scope="module")
def methods_run(tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    done = run_suite(str(PROFILES / "methods.toml"), reports, tmp_path_factory.mktemp("baselines"), "--history", "off")
    assert done.returncode == 0, done.stdout[-3000:]
    run_dir = only_run_dir(reports)
    return done, run_dir, read_results(run_dir)


def test_every_method_drafts_accepts_and_is_lossless(methods_run):
    _, _, results = methods_run
    assert {r["status"] for r in results.values()} == {"ok"}
    assert_methods_accept_and_are_lossless(results, {"ngram", "draft_model", "adaptive", "eagle", "eagle3", "mtp"})


def test_the_learned_heads_are_traced_but_the_tiny_mimo(methods_run):
    _, _, results = methods_run
    untraced = {r["scenario"]["model"]["name"] for r in results.values() if not r["scenario"]["trace"]}
    assert untraced == {"tiny-mimo"}
    assert all(r["trace"]["notes"] == [] for r in results.values() if r["scenario"]["trace"])


def test_the_adaptive_proposer_drafts_by_its_rule_and_headroom_is_simulated(methods_run):
    """Per step of the adaptive proposer: n-gram's acceptance where n-gram proposes, the draft
    model's elsewhere, as the traces computed them for every position; the draft model's own
    traced steps agree with its per-position acceptance; the run's headroom has every bound."""
    _, run_dir, results = methods_run
    steps = {"ngram": 0, "draft": 0, "draft_agrees": 0, "draft_steps": 0}
    for sid, result in results.items():
        method = result["scenario"]["method"]["name"]
        if method not in ("adaptive", "draft_model"):
            continue
        for request in result["trace"]["requests"]:
            ngram_acc, draft_acc = request["ngram_acc"], request["draft_acc"]
            assert len(draft_acc) == len(ngram_acc) > 0 and request["prompt_len"] > 0, sid
            for p, d, a in zip(
                request_positions(request["drafted"], request["accepted"]), request["drafted"], request["accepted"]
            ):
                if p + a + 1 > len(draft_acc):  # past max_tokens: the output no longer shows it
                    continue
                if method == "adaptive" and ngram_acc[p - 1] > 0:
                    steps["ngram"] += 1
                    assert a == min(ngram_acc[p - 1] - 1, d), (sid, p, d, a)
                    continue
                steps["draft" if method == "adaptive" else "draft_steps"] += 1
                steps["draft_agrees"] += a == min(draft_acc[p - 1] - 1, d)
    assert steps["ngram"] > 0 and steps["draft"] > 0, steps
    # the draft's acceptance from one pass over the output against vLLM's own verification steps
    assert steps["draft_agrees"] >= 0.95 * (steps["draft"] + steps["draft_steps"]), steps
    headroom = {h["id"]: h for h in json.loads((run_dir / "summary.json").read_text())["traces"]["headroom"]}
    for sid in (
        "smollm2-135m-ngram-k3-bs1-instructcoder-traced",
        "smollm2-135m-draft-k3-bs1-instructcoder-traced",
        "smollm2-135m-adaptive-k3-bs1-instructcoder-traced",
    ):
        row = headroom[sid]
        assert row["simulated"] > 0 and row["oracle"] >= row["simulated"] and row["measured"] > 0, row
        if "ngram" not in sid:
            assert row["combined"] >= row["oracle"] and row["adaptive"] > 0, row
    assert "Headroom: measured, simulated and the oracle bounds" in (run_dir / "index.html").read_text()
    assert "hidden states" in headroom["tiny-llama-eagle-k3-bs1-instructcoder-traced"]["note"]
