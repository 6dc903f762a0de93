"""Reports of a run: one self-contained HTML page, a Markdown summary and a JSON summary.

Rendered from the stored result files of one or more run directories, never from live objects,
so a crashed, interrupted or sharded run still gets its report.  The command line reaches it as
`specperf report RUN_DIR [RUN_DIR ...] [--out DIR]`; the pytest plugin at the end of a run.

Modules: loading (read and merge run directories), view (the view model, built once),
analyses (pure computations), charts (SVG geometry), html, markdown and summary (the renderers).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..storage import ResultFileError, atomic_write_text
from .analyses.clocks import CPU_CLOCKS
from .analyses.study_figure import REFERENCE_DATA, load_reference, study_panel, study_series_name
from .format import TEXT_LIMIT
from .html import render_html
from .loading import RunData, load_run
from .markdown import md_escape, render_markdown
from .summary import summary_json
from .trends import load_trends
from .view import IMPROVEMENT_HINT, ReportView, build_view

__all__ = [
    "CPU_CLOCKS",
    "IMPROVEMENT_HINT",
    "REFERENCE_DATA",
    "TEXT_LIMIT",
    "ReportView",
    "ResultFileError",
    "RunData",
    "build_report",
    "build_view",
    "load_reference",
    "load_run",
    "md_escape",
    "render_html",
    "render_markdown",
    "study_panel",
    "study_series_name",
    "summary_json",
    "write_report",
    "write_run_report",
    "add_trends",
]


def write_run_report(data: RunData, out_dir: Path) -> Path:
    """Write index.html, summary.md and summary.json of runs already loaded (load_run) into out_dir.

    All three are rendered before any is written, so a rendering error leaves the folder as it was."""
    view = build_view(data)
    files = {
        "summary.json": json.dumps(summary_json(view), indent=2, sort_keys=True, allow_nan=False) + "\n",
        "summary.md": render_markdown(view),
        "index.html": render_html(view),
    }
    out_dir = Path(out_dir)
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
    return out_dir / "index.html"


def write_report(run_dirs: list[Path], out_dir: Path | None = None, history_url: str | None = None) -> Path:
    """Load the run directories and write their report into out_dir (default: the first run directory),
    with trend lines from the history database at `history_url` where one is given."""
    return build_report(run_dirs, out_dir, history_url)[0]


def build_report(
    run_dirs: list[Path], out_dir: Path | None = None, history_url: str | None = None
) -> tuple[Path, list[str]]:
    """write_report's page, and what the report could not use (files, trends), one line each."""
    dirs = [Path(d) for d in run_dirs]
    data = add_trends(load_run(dirs), history_url)
    return write_run_report(data, Path(out_dir) if out_dir is not None else dirs[0]), data.problems


def add_trends(data: RunData, history_url: str | None) -> RunData:
    """Trend lines of the results from the history database; what it skipped joins the report's problems."""
    data.trends = load_trends(history_url, data.results)
    data.problems += data.trends.problems
    return data
