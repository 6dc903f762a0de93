"""The Markdown summary (summary.md): short enough for a CI job page or a pull-request comment.

Every cell that holds text from a result file goes through md_escape; numeric cells are formatted
numbers and nothing else.
"""

from __future__ import annotations

from ..status import PASS
from .analyses.memory import MemoryCell, MemoryTable
from .format import NONE, fmt_estimate, fmt_mib, fmt_num, fmt_ratio
from .tree_chain import TreeVsChain
from .view import ReportView, ScenarioView

MARKDOWN_ROWS = 200  # scenarios listed


def md_escape(text, limit: int = 300) -> str:
    """Untrusted text for a Markdown table cell: one line, no HTML, no table breaks, no code spans or links."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("\\", "\\\\")
    for char in "|*_[]!#~":
        text = text.replace(char, "\\" + char)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "&#96;")


def memory_text(cell: MemoryCell) -> str:
    """One cell of the memory table as plain text: "1770 MiB x1.77 (baseline 1700 MiB x1.70)", then what
    the configs call for: "; draft 270 MiB, KV +6 KiB/token x1.13"."""
    text = fmt_mib(cell.peak_mib) + (f" {fmt_ratio(cell.ratio)}" if cell.ratio else "")
    if cell.baseline_peak_mib is not None:
        text += f" (baseline {fmt_mib(cell.baseline_peak_mib)}"
        text += f" {fmt_ratio(cell.baseline_ratio)})" if cell.baseline_ratio else ")"
    estimate = fmt_estimate(cell)
    return text + (f"; {md_escape(estimate)}" if estimate else "")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _scenario_table(views: list[ScenarioView]) -> list[str]:
    lines = [
        "| Scenario | Verdict | Throughput (tok/s) | Speedup | Acceptance length | Why |",
        "|---|---|---:|---:|---:|---|",
    ]
    for view in views:
        status = md_escape(view.status)
        lines.append(
            _row(
                [
                    md_escape(view.id),
                    f"**{status}**" if view.failed else status,
                    fmt_num(view.value("throughput_tok_s")),
                    fmt_num(view.value("speedup")),
                    fmt_num(view.value("mean_acceptance_length")),
                    md_escape("; ".join(view.why())),
                ]
            )
        )
    return lines


def _tree_table(trees: list[TreeVsChain]) -> list[str]:
    lines = [
        _row(["Model", "Dataset", "k", "Batch", "Tree", "Backend", "Speedup tree / chain", "Acceptance tree / chain"]),
        "|---|---|---:|---:|---|---|---:|---:|",
    ]
    for t in trees[:MARKDOWN_ROWS]:
        pair = [f"{fmt_num(t.tree_speedup)} / {fmt_num(t.chain_speedup)}"]
        pair.append(f"{fmt_num(t.tree_acceptance)} / {fmt_num(t.chain_acceptance)}")
        backend = t.backend if t.drafted_as_tree else f"{t.backend or 'default'} (drafted as a chain)"
        names = [md_escape(t.model), md_escape(t.dataset), str(t.k), str(t.batch_size), md_escape(t.tree)]
        lines.append(_row(names + [md_escape(backend)] + pair))
    return lines


def _memory_table(memory: MemoryTable) -> list[str]:
    lines = [
        _row(["Model", "Dataset", "Batch", "no-SD"] + [md_escape(m) for m in memory.methods]),
        "|---|---|---:|---:|" + "---:|" * len(memory.methods),
    ]
    for row in memory.rows[:MARKDOWN_ROWS]:
        lines.append(
            _row(
                [md_escape(row.model), md_escape(row.dataset), fmt_num(row.batch_size)]
                + [memory_text(c) if c else NONE for c in [row.reference, *row.methods]]
            )
        )
    return lines


def render_markdown(view: ReportView) -> str:
    header, views = view.header, view.scenarios
    counts = ", ".join(f"{c.n} {md_escape(c.status)}" for c in header.counts if c.n)
    outcome = "FAILED" if header.failed else "passed"
    lines = [f"## specperf: {outcome} ({counts or 'no results'}; {header.total} scenarios)", ""]
    facts = []
    if header.profiles:
        facts.append("profile " + md_escape(", ".join(header.profiles)))
    if header.run_ids:
        facts.append("run " + md_escape(", ".join(header.run_ids)))
    vllm = ", ".join(header.vllm) or "unknown"
    if header.baseline_vllm:
        vllm += " (baseline " + ", ".join(header.baseline_vllm) + ")"
    facts.append("vLLM " + md_escape(vllm))
    if header.hardware_keys:
        facts.append("hardware " + md_escape(", ".join(header.hardware_keys)))
    facts.append(md_escape(header.clocks.line))
    facts.append(f"run time {header.run_time}")
    if header.engine_starts is not None:
        facts.append(f"{header.engine_starts} engine starts")
    lines.append(" · ".join(facts))
    if header.interrupted:
        lines += ["", "**The run was interrupted or has not finished: results may be missing.**"]
    if header.loads_code:
        lines += [
            "",
            "The engines loaded code the profile allowed (allow_code): " + md_escape(", ".join(header.loads_code)),
        ]
    if header.throttle_warning:
        lines += ["", "**" + md_escape(header.throttle_warning) + "**"]
    if header.foreign_at_preflight:
        processes = md_escape("; ".join(header.foreign_at_preflight), limit=1000)
        lines += ["", f"**Foreign processes were computing on the GPUs before the run started: {processes}.**"]
    for problem in header.problems:
        lines += ["", "Problem: " + md_escape(problem)]
    if view.gate is not None:
        lines += ["", _gate_lines(view.gate)]
    if not views:
        return "\n".join(lines + ["", "No scenario results."]) + "\n"
    attention = [v for v in views if v.status != PASS]
    passing = [v for v in views if v.status == PASS]
    shown = 0
    if attention:
        lines += [""] + _scenario_table(attention[:MARKDOWN_ROWS])
        shown += min(len(attention), MARKDOWN_ROWS)
    if passing and shown < MARKDOWN_ROWS:
        rows = passing[: MARKDOWN_ROWS - shown]
        shown += len(rows)
        lines += ["", f"<details><summary>{len(passing)} passing scenarios</summary>", ""]
        lines += _scenario_table(rows) + ["", "</details>"]
    if len(views) > shown:
        lines += ["", f"… and {len(views) - shown} more scenarios in the HTML report."]
    if view.trees:
        lines += ["", "### Tree against chain", ""] + _tree_table(view.trees)
    if view.memory.rows:
        lines += ["", "### Peak memory against no-SD", ""] + _memory_table(view.memory)
    return "\n".join(lines) + "\n"


def _gate_lines(gate) -> str:
    """The gate in a few lines: the builds, methods a build lacks, settings and outputs that differ."""
    parts = ["**Upgrade gate**: " + md_escape(gate.versions) + " (speed judged pair by pair; baseline = current build)"]
    for method, sides in gate.capabilities:
        if any(s != "supported" for s in sides):
            parts.append(
                f"- {md_escape(method)}: "
                + "; ".join(f"{md_escape(b['side'])}: {md_escape(s)}" for b, s in zip(gate.builds, sides))
            )
    for setting, values, ids in gate.config_diff:
        parts.append(
            f"- setting {md_escape(setting)}: {md_escape(values[0])} → {md_escape(values[1])} ({len(ids)} scenarios)"
        )
    for scenario_id, changed, total in gate.drift:
        parts.append(f"- output drift in {md_escape(scenario_id)}: {changed} of {total} requests")
    return "\n".join(parts)
