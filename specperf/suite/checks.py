"""Option values and combinations that cannot work, each a one-line usage error before anything runs;
and a gate's two builds, described once."""

from __future__ import annotations

import pytest

from ..options import options
from ..run.hardware.device import has_nvidia_gpu
from .closing import run_history_url
from .profile import chosen_profile

MAX_SCENARIO_TIMEOUT_S = 7 * 24 * 3600.0

ENVIRONMENTS_KEY = pytest.StashKey[dict]()


def check_options(config) -> None:
    """Option values and combinations that cannot work: a one-line usage error before anything runs."""
    from ..judge.verdicts import MIN_ROUNDS

    opts = options(config)
    rounds = opts.rounds
    if rounds is not None and rounds < 1:
        raise pytest.UsageError(f"--rounds must be at least 1, got {rounds}")
    if rounds is not None and rounds < MIN_ROUNDS and opts.update_baselines:
        raise pytest.UsageError(
            f"--update-baselines needs at least {MIN_ROUNDS} rounds per scenario "
            f"(the significance test needs them), got --rounds {rounds}"
        )
    timeout = opts.scenario_timeout_s
    if not 0 < timeout <= MAX_SCENARIO_TIMEOUT_S:  # NaN fails this too
        raise pytest.UsageError(
            f"--scenario-timeout must be positive seconds, at most {MAX_SCENARIO_TIMEOUT_S:g} (a week), got {timeout}"
        )
    if opts.run_dir is not None and opts.resume not in (None, opts.run_dir):
        raise pytest.UsageError("--run-dir goes on from the run it holds by itself: give it or --resume, not both")
    if opts.resume is not None:
        chosen_profile(config)  # the run file must be readable and of the same profile
    if opts.shard is not None:
        from ..run.sharding import parse_shard

        try:
            parse_shard(opts.shard)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
    if opts.max_shard_hours is not None:
        from ..run.sharding import parse_max_shard_hours

        if opts.shard is None:
            raise pytest.UsageError("--max-shard-hours goes with --shard I/N (it changes how the shards are cut)")
        try:
            parse_max_shard_hours(opts.max_shard_hours)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
    rolling = opts.rolling_baseline
    if rolling is not None:
        if rolling < 1:
            raise pytest.UsageError(f"--rolling-baseline must be at least 1, got {rolling}")
        url = run_history_url(config)
        if url is None:
            raise pytest.UsageError("--rolling-baseline reads the run history, which --history off turns off")
        from ..history import History, HistoryError

        try:
            History(url).close()  # reachable, and of a schema this suite reads
        except HistoryError as err:
            raise pytest.UsageError(f"--rolling-baseline: {err}") from None
    elif opts.two_strike:
        raise pytest.UsageError(
            "--two-strike goes with --rolling-baseline N (it looks at the run before in the history)"
        )
    if has_nvidia_gpu():
        from ..run.hardware.device import describe_device

        try:
            describe_device()  # CUDA_VISIBLE_DEVICES must name devices NVML lists
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
    if opts.gate_max_sets is not None and not opts.candidate:
        raise pytest.UsageError("--gate-max-sets goes with --candidate (it adds engine sets to a gate)")
    if opts.gate_max_sets is not None and not 1 <= opts.gate_max_sets <= 64:
        raise pytest.UsageError(f"--gate-max-sets must be 1..64 sets, got {opts.gate_max_sets}")
    blocks = opts.gate_blocks
    if blocks is not None and blocks < 1:
        raise pytest.UsageError(f"--gate-blocks must be at least 1, got {blocks}")
    if opts.serve_url:
        from ..run.serving.remote import check_url

        if problem := check_url(opts.serve_url):
            raise pytest.UsageError(f"--serve-url: {problem}")
        if opts.candidate:
            raise pytest.UsageError("--serve-url cannot go with --candidate: a gate starts both builds' servers itself")
    if opts.candidate:
        if opts.update_baselines:
            raise pytest.UsageError(
                "--update-baselines cannot go with --candidate: a gate judges the candidate "
                "against the current build, and records no baseline"
            )
        gate_environments(config)


def check_colocation(config, scenarios) -> None:
    """The engines each selected scenario keeps alive together fit in GPU memory (run/gate/colocation.py):
    else a usage error naming the profile file and the fix, before any engine starts.  Only where the
    engines run on a GPU: CPU engines size their KV cache by kv_cache_memory_bytes, and a running
    server (--serve-url) starts nothing."""
    from ..run.gate.colocation import colocation_problem

    opts = options(config)
    if opts.serve_url or not has_nvidia_gpu():
        return
    problem = colocation_problem(scenarios, chosen_profile(config).path, opts.candidate is not None, opts.gate_blocks)
    if problem:
        raise pytest.UsageError(problem)


def gate_environments(config) -> dict | None:
    """The two builds of a gate (--candidate), described once; None without one."""
    if options(config).candidate is None:
        return None
    if ENVIRONMENTS_KEY not in config.stash:
        from ..run.builds import environments
        from ..run.gate.sides import CANDIDATE, CURRENT

        try:
            candidate = environments.describe(options(config).candidate)
            config.stash[ENVIRONMENTS_KEY] = {CURRENT: environments.describe(), CANDIDATE: candidate}
        except environments.EnvironmentProblem as err:
            raise pytest.UsageError(f"--candidate: {err}") from None
    return config.stash[ENVIRONMENTS_KEY]
