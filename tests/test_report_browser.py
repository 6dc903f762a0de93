"""The report in a real browser (headless Chromium), and a study-scale page of 300 scenarios.

Chromium is found on PATH (chromium, chromium-browser, google-chrome).  Without it the browser
tests skip, except under CI (CI=true), where they fail.  Artifacts (pages, screenshots, the
300-scenario page's size and load time) go to $SPECPERF_ARTIFACTS when set, else tmp_path/artifacts.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from records import gpu_device, gpu_telemetry
from test_report import IMG_INJECTION, SCRIPT_INJECTION, make_record, make_run, mixed_records

from specperf import report
from specperf.records import Memory, ScenarioResult

# Payloads that would leave a trace in the DOM if they ever ran.
DOM_SCRIPT = "<script>document.body.setAttribute('data-pwned','script')</script>"
DOM_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def require_chromium() -> str:
    """The browser's path; a skip without one, or a failure under CI (CI=true)."""
    path = find_chromium()
    if path is None:
        message = f"no headless browser on PATH ({', '.join(BROWSERS)})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + ": CI must run the browser tests")
        pytest.skip(message)
    return path


@pytest.fixture
def chromium() -> str:
    return require_chromium()


@pytest.fixture
def artifacts(tmp_path) -> Path:
    folder = Path(os.environ.get("SPECPERF_ARTIFACTS") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_chromium(binary: str, args: list[str], profile: Path) -> subprocess.CompletedProcess:
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def console_messages(stderr: str) -> list[str]:
    """Console output and CSP violations that Chromium logs; the report itself logs nothing."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Content Security Policy" in line]


def test_chromium_is_required_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="CI must run the browser tests"):
        require_chromium()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require_chromium()


def test_page_in_headless_chromium(tmp_path, chromium, artifacts):
    """Artifacts: report.html and report-screenshot.png."""
    records = mixed_records()
    records[6].outputs[0].prompt += DOM_SCRIPT + DOM_IMG
    index = report.write_report([make_run(tmp_path / "run", records)])
    shutil.copy(index, artifacts / "report.html")
    url = index.resolve().as_uri()

    # the detector sees what it must: a page with a script error and a blocked load
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><meta http-equiv='Content-Security-Policy' content=\"default-src 'none'\">"
        "<p>x</p><img src='missing.png'>",
        encoding="utf-8",
    )
    assert console_messages(run_chromium(chromium, ["--dump-dom", broken.as_uri()], tmp_path / "probe").stderr)

    dom = run_chromium(chromium, ["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<body" in dom.stdout
    assert "data-pwned" not in dom.stdout.split("<body", 1)[1].split(">", 1)[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom.stdout
    assert SCRIPT_INJECTION not in dom.stdout and IMG_INJECTION not in dom.stdout
    assert "<img" not in dom.stdout
    assert "8 scenarios shown" in dom.stdout  # the filter script ran under the page's CSP
    assert console_messages(dom.stderr) == []

    screenshot = artifacts / "report-screenshot.png"
    shot = run_chromium(
        chromium,
        [f"--screenshot={screenshot}", "--window-size=1400,2000", "--hide-scrollbars", url],
        tmp_path / "profile-shot",
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert screenshot.exists() and screenshot.stat().st_size > 10_000
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert console_messages(shot.stderr) == []
    print(f"report screenshot: {screenshot}")


# --------------------------------------------------------------------------- 300 scenarios

# (name, path, GPUs): the study's targets; GLM-4.5-Air runs only no-SD and MTP at batch 1, 2, 4.
STUDY_TARGETS = (
    ("llama3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 1),
    ("llama3-70b", "meta-llama/Meta-Llama-3-70B-Instruct", 4),
    ("qwen3-8b", "Qwen/Qwen3-8B", 1),
)
STUDY_METHODS = ("nosd", "ngram", "ngram-k5", "eagle", "eagle3-k3", "draft_model")
STUDY_DATASETS = ("gsm8k", "cnn_dailymail", "sharegpt", "instructcoder")
ARTICLE = (
    "(CNN) The city council voted on Tuesday to extend the pilot programme for another year, "
    "citing a 12% drop in late buses & fewer complaints <since March>. "
) * 20


def study_scale_records() -> list[ScenarioResult]:
    """300 scenarios shaped like the study's grid, with regressions, errors, invalid runs and improvements."""
    rng = random.Random(42)
    grid = [
        (t, m, d, b) for t in STUDY_TARGETS for m in STUDY_METHODS for d in STUDY_DATASETS for b in (1, 16, 64, 128)
    ]
    grid += [
        (("glm-4.5-air", "zai-org/GLM-4.5-Air", 4), m, d, b)
        for m in ("nosd", "mtp")
        for d in ("gsm8k", "instructcoder")
        for b in (1, 2, 4)
    ]
    records = []
    for i, ((model, path, gpus), method, dataset, bs) in enumerate(grid):
        verdict = (
            "error"
            if i % 37 == 5
            else "regression"
            if i % 23 == 7
            else "invalid"
            if i % 41 == 11
            else "improvement"
            if i % 29 == 3
            else "no-baseline"
            if i % 31 == 1
            else "pass"
        )
        throughput = round(rng.uniform(40, 4000), 1)
        change = {"regression": -0.15, "improvement": 0.12}.get(verdict, rng.uniform(-0.03, 0.03))
        verdicts = [
            {
                "metric": "throughput_tok_s",
                "status": verdict if verdict in ("regression", "improvement") else "pass",
                "baseline": round(throughput / (1 + change), 1),
                "current": throughput,
                "change": change,
                "tolerance": 0.05,
                "p_value": 0.004 if verdict in ("regression", "improvement") else None,
                "note": "",
            }
        ]
        speedup = baseline_speedup = None
        if method != "nosd":
            speedup = round(max(0.8, 2.1 - 0.18 * math.log2(bs) + rng.uniform(-0.2, 0.2)), 3)
            baseline_speedup = round(speedup * rng.uniform(0.97, 1.03), 3)
            verdicts.append(
                {
                    "metric": "speedup",
                    "status": "pass",
                    "baseline": baseline_speedup,
                    "current": speedup,
                    "change": speedup / baseline_speedup - 1,
                    "tolerance": 0.05,
                    "note": "",
                }
            )
        record = make_record(
            model,
            method,
            bs,
            dataset,
            verdict=verdict,
            throughput=throughput,
            speedup=speedup,
            baseline_speedup=baseline_speedup,
            k=5 if method == "ngram-k5" else 3,
            model_path=path,
            status="error" if verdict == "error" else "ok",
            metric_verdicts=verdicts,
            error="EngineDeadError: CUDA out of memory <tried to allocate 2.0 GiB>" if verdict == "error" else None,
            prompt=f"Could you summarize the following article, please reuse text: {i} " + ARTICLE,
            output="The council extended the pilot by a year; late buses fell 12%. " * 12,
            device=gpu_device(count=gpus),
        )
        if record.ok:
            record.outputs = [record.outputs[0].model_copy(update={"request_id": f"r0-{j}"}) for j in range(3)]
            record.gpu_telemetry = gpu_telemetry(sm_clock_median=1980.0 - rng.uniform(0, 30))
            record.memory = Memory(peak_mib=60000 + rng.uniform(0, 9000), source="torch.cuda.max_memory_allocated")
        records.append(record)
    return records


def test_study_scale_records_cover_the_grid():
    records = study_scale_records()
    assert len(records) == 300 and len({r.id for r in records}) == 300
    statuses = {r.verdict.status for r in records}
    assert {"error", "regression", "invalid", "improvement", "no-baseline", "pass"} <= statuses


def test_study_scale_page_size(tmp_path):
    """Without a browser too: the page stays well under 5 MB and leads with attention and the scenario table."""
    html = report.render_html(report.build_view(report.load_run([make_run(tmp_path / "run", study_scale_records())])))
    assert len(html.encode("utf-8")) < 5 * 2**20
    assert html.index('<section id="attention">') < html.index('<table class="scenarios">') < html.index("<svg")
    assert html.count("<tr data-filterable") == 300 and html.count('<details class="scenario"') == 300


def test_study_scale_page_in_headless_chromium(tmp_path, chromium, artifacts):
    """Artifacts: report-300.html, report-300-screenshot.png, report-300.json (size, render and load times)."""
    run = make_run(tmp_path / "run", study_scale_records())
    started = time.perf_counter()
    index = report.write_report([run])
    render_s = time.perf_counter() - started
    size = index.stat().st_size
    assert size < 5 * 2**20
    shutil.copy(index, artifacts / "report-300.html")

    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p>", encoding="utf-8")

    def dump(url: str, name: str) -> tuple[float, subprocess.CompletedProcess]:
        started = time.perf_counter()
        done = run_chromium(chromium, ["--dump-dom", url], tmp_path / name)
        return time.perf_counter() - started, done

    blank_s = min(dump(blank.as_uri(), f"blank{i}")[0] for i in range(2))
    timings = [dump(index.resolve().as_uri(), f"page{i}") for i in range(2)]
    page_s, dom = min(timings, key=lambda t: t[0])
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<section id="attention">' in dom.stdout and '<table class="attention">' in dom.stdout
    assert '<table class="scenarios">' in dom.stdout
    assert dom.stdout.count("<tr data-filterable") == 300
    assert "300 scenarios shown" in dom.stdout
    assert console_messages(dom.stderr) == []

    screenshot = artifacts / "report-300-screenshot.png"
    shot = run_chromium(
        chromium,
        [f"--screenshot={screenshot}", "--window-size=1400,2400", "--hide-scrollbars", index.resolve().as_uri()],
        tmp_path / "shot",
    )
    assert shot.returncode == 0 and screenshot.exists()
    facts = {
        "scenarios": 300,
        "bytes": size,
        "render_s": round(render_s, 3),
        "chromium_dump_dom_s": round(page_s, 3),
        "chromium_blank_page_s": round(blank_s, 3),
        "load_s_beyond_blank": round(page_s - blank_s, 3),
    }
    (artifacts / "report-300.json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    print(f"300-scenario report: {facts}")
