"""The suite's command-line options, each declared once, parsed once per run into one frozen record.

Every option is a field of `Options`: the field's name is the option's (its pytest `dest`), its
annotation the type the run reads, and its `option(...)` the flag, default and help pytest shows.
plugin.py adds them all (`add_options`) and everything else reads `options(config)`, so an option
has one name, one type and one default everywhere, and no code reads the raw command line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pytest

from . import paths

DECLARATION = "option"  # the key of a field's declaration in its metadata


@dataclass(frozen=True)
class Declaration:
    """How pytest's parser takes one option, and how its parsed value becomes the field's."""

    flag: str
    help: str
    default: Any  # a callable is called when the option is added (it reads the environment, say)
    read: Callable[[Any], Any]  # the parsed value as the run reads it
    parser: dict[str, Any]  # type, action, choices, metavar

    def add(self, group: pytest.OptionGroup, dest: str) -> None:
        default = self.default() if callable(self.default) else self.default
        group.addoption(self.flag, dest=dest, default=default, help=self.help, **self.parser)


def _as_given(given: Any) -> Any:
    return given


def option(flag: str, help: str, *, default: Any = None, read: Callable[[Any], Any] = _as_given, **parser: Any) -> Any:
    """A field of Options that is the command-line option `flag`."""
    return field(metadata={DECLARATION: Declaration(flag, help, default, read, parser)})


def _path_or_none(given: str | None) -> Path | None:
    return Path(given) if given else None


@dataclass(frozen=True)
class Options:
    """A run's options: one field per option, declared where it stands (`option(...)`)."""

    profile: str | None = option(
        "--profile",
        "scenario profile name in fixtures/scenarios/ or a .toml path "
        "(default: cpu-smoke without an NVIDIA GPU, h100-nightly with one)",
    )
    rounds: int | None = option("--rounds", "measured rounds per scenario (overrides the profile)", type=int)
    reports_dir: Path = option(
        "--reports-dir",
        "where run directories are written (default: reports)",
        default=paths.DEFAULT_REPORTS_DIR,
        read=Path,
    )
    baseline_dir: Path = option(
        "--baseline-dir",
        "baseline store (default: the suite's baselines/)",
        read=lambda given: Path(given or paths.baseline_dir()),
    )
    dataset_dir: Path | None = option(
        "--dataset-dir",
        "folder of workload JSONL files (default: $SPECPERF_DATASET_DIR, else a shared/datasets "
        "folder beside the checkout, else the dataset hub)",
        default=paths.dataset_dir,
        read=_path_or_none,
    )
    update_baselines: bool = option(
        "--update-baselines",
        "store this run's valid results as the new baselines (complete runs only)",
        default=False,
        action="store_true",
    )
    scenario_timeout_s: float = option(
        "--scenario-timeout",
        "seconds one scenario's warm-up and rounds may take before its engine is killed "
        "and a timeout recorded (default: 3600)",
        default=3600.0,
        type=float,
    )
    resume: Path | None = option(
        "--resume",
        "continue an interrupted run: keep its finished results, measure the rest",
        read=_path_or_none,
        metavar="RUN_DIR",
    )
    shard: str | None = option(  # as given: suite/checks.check_options parses it
        "--shard",
        "run shard I of N of the selection (for N machines; merge with `specperf report`)",
        metavar="I/N",
    )
    max_shard_hours: float | None = option(
        "--max-shard-hours",
        "with --shard: cut an engine's scenarios into pieces of at most H hours by the default cost "
        "model, as `specperf plan --max-shard-hours H` does (give both the same H)",
        type=float,
        metavar="H",
    )
    run_dir: Path | None = option(
        "--run-dir",
        "this run's directory (default: <reports-dir>/<run id>); where it already holds a run (its "
        "run.json), that run goes on as with --resume, so a retried shard keeps what it finished "
        "(under -n the run file is written at the end only)",
        read=lambda given: Path(given).absolute() if given else None,  # '.' too has a name then
        metavar="DIR",
    )
    candidate: str | None = option(
        "--candidate",
        "upgrade gate: also run every scenario on the vLLM of this interpreter's environment "
        "(with specperf installed), rounds alternating, and judge it against this one",
        metavar="PYTHON",
    )
    serve_url: str | None = option(
        "--serve-url",
        "measure the selected serve scenarios on this running vLLM server (nothing is started; "
        "offline scenarios and no-SD references are left out): its /v1/models, /version and /metrics are recorded",
        metavar="URL",
    )
    output_check: str = option(
        "--output-check",
        "how greedy outputs are checked (lossless, stable): auto (rounds of their own in vLLM's "
        "batch-invariant mode on a GPU, the timing rounds on a CPU), rounds, or timing",
        default="auto",
        choices=("auto", "timing", "rounds"),  # run/output_check.py OPTIONS, not imported here: it imports numpy
    )
    inconclusive: str = option(
        "--inconclusive",
        "whether a metric that can neither be shown within its tolerance nor shown worse (a gate's "
        "speed, a sampled scenario's acceptance) fails the case (fail) or is only reported (warn)",
        default="fail",
        choices=("fail", "warn"),
    )
    gate_max_sets: int | None = option(
        "--gate-max-sets",
        "upgrade gate: where a scenario's speed is inconclusive after the profile's sets of fresh "
        "engines, add one set at a time, up to N sets in all, judging each look with a wider interval "
        "so that the looks raise no false alarm (judge/sequential.py)",
        type=int,
        metavar="N",
    )
    gate_blocks: int | None = option(
        "--gate-blocks",
        "where two engines do not fit in memory: alternate blocks of N rounds, one engine alive "
        "(overrides the profile's gate_blocks)",
        type=int,
        metavar="N",
    )
    history: str | None = option(  # as given: history.database.history_url resolves it
        "--history",
        "run history database: sqlite:///FILE or postgresql://... (default: $SPECPERF_HISTORY, "
        "else <reports-dir>/history.sqlite); 'off' records nothing",
        metavar="URL",
    )
    rolling_baseline: int | None = option(
        "--rolling-baseline",
        "judge against the median of the last N valid runs in the history instead of baselines/",
        type=int,
        metavar="N",
    )
    two_strike: bool = option(
        "--two-strike",
        "with --rolling-baseline: a speed regression fails only when the next run confirms it",
        default=False,
        action="store_true",
    )
    sd_trace: bool = option(
        "--sd-trace",
        "trace every scenario (per-step acceptance, step time breakdown); ids end in -traced",
        default=False,
        action="store_true",
    )

    @classmethod
    def parse(cls, config: pytest.Config) -> Options:
        parsed = cls(**{name: declared.read(config.getoption(name)) for name, declared in declarations().items()})
        if parsed.run_dir is not None and parsed.resume is None and (parsed.run_dir / "run.json").is_file():
            return replace(parsed, resume=parsed.run_dir)  # a run there already: it goes on (--resume)
        return parsed

    def new_run_dir(self, run_id: str) -> Path:
        """Where a run that resumes none writes: --run-dir, else <reports-dir>/<run id>."""
        return self.run_dir if self.run_dir is not None else Path(self.reports_dir) / run_id


def declarations() -> dict[str, Declaration]:
    """Every option's declaration, by field name."""
    return {f.name: f.metadata[DECLARATION] for f in fields(Options)}


def add_options(group: pytest.OptionGroup) -> None:
    """Declare every option to pytest (plugin.py's pytest_addoption)."""
    for name, declared in declarations().items():
        declared.add(group, name)


OPTIONS_KEY = pytest.StashKey[Options]()


def options(config: pytest.Config) -> Options:
    """The run's options, parsed on first use."""
    if OPTIONS_KEY not in config.stash:
        config.stash[OPTIONS_KEY] = Options.parse(config)
    return config.stash[OPTIONS_KEY]
