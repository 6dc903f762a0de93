"""The suite's command-line options, parsed once per run into one frozen record.

plugin.py declares them (pytest_addoption); everything else reads `options(config)`, so an option
has one name, one type and one default everywhere, and no code reads the raw command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from . import paths


@dataclass(frozen=True)
class Options:
    profile: str | None  # --profile: a name in fixtures/scenarios/ or a .toml path; None: the default
    rounds: int | None  # --rounds: overrides every scenario's
    reports_dir: Path  # --reports-dir
    baseline_dir: Path  # --baseline-dir, else the suite's baselines/
    dataset_dir: Path | None  # --dataset-dir; None: the dataset hub
    update_baselines: bool  # --update-baselines
    scenario_timeout_s: float  # --scenario-timeout
    resume: Path | None  # --resume RUN_DIR
    shard: str | None  # --shard I/N, as given (suite/checks.check_options parses it)
    candidate: str | None  # --candidate PYTHON: an upgrade gate
    serve_url: str | None  # --serve-url URL: serve scenarios measured on a running server
    gate_blocks: int | None  # --gate-blocks N
    output_check: str  # --output-check WAY (run/output_check.py)
    history: str | None  # --history URL, as given (history.database.history_url resolves it)
    rolling_baseline: int | None  # --rolling-baseline N
    two_strike: bool  # --two-strike
    sd_trace: bool  # --sd-trace

    @classmethod
    def parse(cls, config: pytest.Config) -> Options:
        def given(name: str):
            return config.getoption(name)

        dataset_dir = given("dataset_dir")
        return cls(
            profile=given("profile"),
            rounds=given("rounds"),
            reports_dir=Path(given("reports_dir")),
            baseline_dir=Path(given("baseline_dir") or paths.baseline_dir()),
            dataset_dir=Path(dataset_dir) if dataset_dir else None,
            update_baselines=bool(given("update_baselines")),
            scenario_timeout_s=given("scenario_timeout"),
            resume=Path(given("resume")) if given("resume") else None,
            shard=given("shard"),
            candidate=given("candidate"),
            serve_url=given("serve_url"),
            gate_blocks=given("gate_blocks"),
            output_check=given("output_check"),
            history=given("history"),
            rolling_baseline=given("rolling_baseline"),
            two_strike=bool(given("two_strike")),
            sd_trace=bool(given("sd_trace")),
        )


OPTIONS_KEY = pytest.StashKey[Options]()


def options(config: pytest.Config) -> Options:
    """The run's options, parsed on first use."""
    if OPTIONS_KEY not in config.stash:
        config.stash[OPTIONS_KEY] = Options.parse(config)
    return config.stash[OPTIONS_KEY]
