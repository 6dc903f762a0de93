"""Each scenario's metrics over its last runs on the same hardware, read from the history store,
as small trend lines with vLLM version changes marked."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..records import ScenarioResult
from .format import fmt_num
from .svg import sparkline

TREND_METRICS = (
    ("throughput_tok_s", "throughput (tok/s)"),
    ("speedup", "speedup"),
    ("mean_acceptance_length", "acceptance length"),
    ("lossless_fraction", "lossless"),
)
LAST_RUNS = 20


@dataclass
class Trends:
    """scenario id -> metric -> trend line geometry (svg.sparkline), and lines on what was skipped."""

    lines: dict[str, dict[str, dict]] = field(default_factory=dict)
    runs: int = LAST_RUNS
    source: str = ""  # the database, password hidden
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.lines)


def _line(series) -> dict | None:
    if len(series.points) < 2:
        return None
    tips = [
        f"{p.finished_at:%Y-%m-%d %H:%M} · {p.run_id} · vLLM {p.vllm or '?'}: {fmt_num(p.value)}" for p in series.points
    ]
    line = sparkline([p.value for p in series.points], tips, series.version_changes())
    line["versions"] = [series.points[i].vllm or "?" for i in series.version_changes()]
    line["count"] = len(series.points)
    return line


def load_trends(url: str | None, results: list[ScenarioResult], last: int = LAST_RUNS) -> Trends:
    """Trend lines of the results' scenarios on their own hardware keys; a database that cannot be read
    is one line in `problems`, never a failed report."""
    from ..history import History, HistoryError
    from ..history.database import missing_sqlite_file
    from ..messages import shown_url

    trends = Trends(runs=last)
    if url is None or missing_sqlite_file(url) is not None:  # a report never creates a database
        return trends
    trends.source = shown_url(url)
    try:
        with History(url, read_only=True) as history:
            reader = history.reader()
            for result in results:
                for metric, _ in TREND_METRICS:
                    if metric not in result.metrics:
                        continue
                    line = _line(
                        reader.series(
                            result.id, metric, result.device.hardware_key, last=last, scenario_hash=result.scenario.hash
                        )
                    )
                    if line is not None:
                        trends.lines.setdefault(result.id, {})[metric] = line
            trends.problems += list(reader.skipped.values())
    except HistoryError as err:
        trends.problems.append(f"trends not shown: {err}")
    return trends
