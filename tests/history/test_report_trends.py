"""Trend lines in the report: the last runs of each scenario on its hardware, vLLM changes marked."""

from __future__ import annotations

import pytest
from nightly import nightly_dir
from records import make_record

from specperf.cli import main
from specperf.history import History
from specperf.report.trends import load_trends


def test_the_report_draws_each_scenario_s_trend_with_version_changes_escaped(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    versions = ["0.31.0", "0.31.0", "<b>0.32</b>", "<b>0.32</b>"]
    dirs = [nightly_dir(tmp_path / "reports", n, 100 - 5 * n, v) for n, v in enumerate(versions)]
    with History(url) as history:
        for folder in dirs:
            history.record_run_dir(folder)
    assert main(["report", str(dirs[-1]), "--history", url]) == 0
    html = (dirs[-1] / "index.html").read_text()
    assert html.count('<svg class="spark"') == 1 + 4  # the table's throughput line; 4 metrics in the details
    assert html.count('<line class="version"') == 5  # one vLLM change on each
    assert "&lt;b&gt;0.32&lt;/b&gt;" in html and "<b>0.32</b>" not in html
    assert "(4 runs, 85–100; vLLM → &lt;b&gt;0.32&lt;/b&gt;)" in html
    assert capsys.readouterr().out.startswith("report: ")


def test_no_database_no_trends_and_none_is_created(tmp_path):
    folder = nightly_dir(tmp_path / "reports", 0, 100, "0.32.0")
    assert main(["report", str(folder)]) == 0
    assert '<svg class="spark"' not in (folder / "index.html").read_text()
    assert not (tmp_path / "reports" / "history.sqlite").exists()


def test_an_unreadable_database_is_a_problem_line_not_a_failed_report(tmp_path):
    trends = load_trends("postgresql://specperf@127.0.0.1:1/history", [make_record()])
    assert not trends and len(trends.problems) == 1
    assert trends.problems[0].startswith("trends not shown: history postgresql://specperf@127.0.0.1:1/history: ")


@pytest.mark.parametrize("url", ["no database at all", "sqlite:///:memory:"])
def test_a_url_that_names_no_file_is_no_crash_and_creates_nothing(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    trends = load_trends(url, [make_record()])
    assert not trends and len(trends.problems) <= 1
    assert not any(tmp_path.iterdir())
