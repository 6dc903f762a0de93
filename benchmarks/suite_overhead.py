"""What the suite costs in measured throughput: the suite's engine process against a bare `LLM.generate`.

For each scenario two kinds of engine with the same engine config run side by side, rounds alternating
(A B B A ..., `--instances` engines of each kind, pair j on instance j % instances, as the upgrade gate
pairs builds), both driven by the suite's measuring loop (`measure_rounds`: warm-up, then the
scenario's calls once per round):

- suite: the suite's `Engine`, its child process exactly as a run starts it; its round throughput is
  the one a run reports (output tokens over the engine-timed wall time of the round's calls).
- bare: a plain process that builds `vllm.LLM` with the same kwargs and environment (the engine
  process's own `engine_arguments`, run/builds/arguments.py's mapping) and times `llm.generate` on the same
  token-id prompts with the same SamplingParams, and nothing else: no counters, no memory, no texts.

Per scenario it prints the median of the per-pair throughput ratios suite/bare, the Hodges-Lehmann
change with its 95% bootstrap interval (judge.paired), whether the goal (within 1%) is met, each
kind's time per round outside its timed region (parent-side time of its calls minus the
engine-timed time, as a share of the parent-side time), and whether both kinds gave the same greedy
outputs in every round.  Fresh engines of one build differ by a few percent on a small CPU, so the
interval holds that offset only as far as `--instances` averages it; `--repeats` measures each
scenario again on fresh engines.  `--bare-metrics` has the bare process read vLLM's spec-decode
counters before and after each call as the suite's engine does (outside the timed region), to tell
whether those reads cost throughput.  Prints figures, asserts nothing.  Needs the CPU tier's
environment, and the CPU otherwise idle:

    .tox/cpu/bin/python benchmarks/suite_overhead.py --pairs 16 --instances 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from multiprocessing.connection import Connection, Pipe
from pathlib import Path

DEFAULT_SCENARIOS = [
    "smollm2-135m-nosd-bs1-instructcoder",
    "smollm2-135m-ngram-k3-bs1-instructcoder",
    "smollm2-135m-ngram-k3-bs4-instructcoder",
]
GOAL = 0.01
BARE = "bare"  # the pool's "python" of the bare side: the start hook below reads it
SOURCE = str(Path(__file__).resolve().parents[1])
NO_COUNTERS = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}


# ---------------------------------------------------------------- the bare process


def serve_bare(fd: int, config_json: str, read_counters: bool) -> None:
    """Build `LLM` as the suite's engine does, then answer (prompts, max_tokens) with the time of
    `llm.generate` and the output token ids; None ends it."""
    from specperf.run.engines.engine import EngineConfig
    from specperf.run.engines.process import engine_arguments, installed_facts, read_spec_counters

    conn = Connection(fd)
    config = EngineConfig(**json.loads(config_json))
    import vllm
    from vllm import LLM, SamplingParams

    llm = LLM(**engine_arguments(config, installed_facts(vllm.__version__)))
    conn.send("ready")
    while (request := conn.recv()) is not None:
        prompts, max_tokens = request
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        if read_counters:
            read_spec_counters(llm)
        t0 = time.perf_counter()
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
        wall_s = time.perf_counter() - t0
        if read_counters:
            read_spec_counters(llm)
        conn.send((wall_s, [list(o.outputs[0].token_ids) for o in outputs]))


class BareEngine:
    """The parent's handle on a bare process; answers the loop as the suite's Engine does."""

    provenance: dict = {}
    effective_config: dict = {}

    def __init__(self, config, start_timeout_s: float, read_counters: bool = False):
        from specperf.run.engines.engine import EngineError

        self.config = config
        self._conn, theirs = Pipe()
        env = dict(
            os.environ, **config.env, PYTHONPATH=os.pathsep.join(filter(None, [SOURCE, os.environ.get("PYTHONPATH")]))
        )
        self._process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve-bare",
                str(theirs.fileno()),
                json.dumps(dataclasses.asdict(config)),
                str(int(read_counters)),
            ],
            pass_fds=[theirs.fileno()],
            env=env,
        )
        theirs.close()
        deadline = time.monotonic() + start_timeout_s
        while not self._conn.poll(1.0):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise EngineError(f"bare engine did not start (exit code {self._process.returncode})")
        self._conn.recv()

    def generate(self, prompts: list[list[int]], max_tokens: int, timeout_s: float):
        from specperf.run.engines.engine import EngineError
        from specperf.run.engines.protocol import Reply

        self._conn.send((prompts, max_tokens))
        try:
            wall_s, token_ids = self._conn.recv()
        except EOFError:
            raise EngineError(f"bare engine died (exit code {self._process.wait()})") from None
        return Reply(
            wall_s=wall_s,
            output_tokens=sum(len(ids) for ids in token_ids),
            token_ids=token_ids,
            texts=[""] * len(token_ids),
            counters_before=NO_COUNTERS,
            counters_after=NO_COUNTERS,
        )

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._conn.send(None)
                self._process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._conn.close()


# ---------------------------------------------------------------- the parent


class Recorded:
    """An engine whose generate calls are timed from the parent's side too: (kind, parent s, engine s)."""

    def __init__(self, engine, kind: str, log: list):
        self._engine, self._kind, self._log = engine, kind, log

    def generate(self, prompts, max_tokens, timeout_s):
        t0 = time.perf_counter()
        reply = self._engine.generate(prompts, max_tokens, timeout_s)
        self._log.append((self._kind, time.perf_counter() - t0, reply.wall_s))
        return reply

    def __getattr__(self, name):
        return getattr(self._engine, name)


def outside_share(log: list, kind: str) -> tuple[float, float]:
    """(share of the parent-side time outside the engine-timed region, ms outside per call) of one kind."""
    parent = sum(p for k, p, _ in log if k == kind)
    inside = sum(w for k, _, w in log if k == kind)
    calls = sum(1 for k, _, _ in log if k == kind)
    return (parent - inside) / parent, 1000 * (parent - inside) / calls


def goal_line(verdict) -> str:
    """Met when the whole interval lies within +-GOAL; "estimate" when only the estimate does."""
    if -GOAL <= verdict.ci_low and verdict.ci_high <= GOAL:
        return "met"
    return "estimate" if abs(verdict.change) <= GOAL else "NOT met"


def main() -> int:
    from specperf.judge.paired import compare_paired, ratios
    from specperf.paths import dataset_dir
    from specperf.profiles.scenarios import load_profile
    from specperf.run.calls import CallPreparer
    from specperf.run.engines.engine import Engine
    from specperf.run.measurement import measure_rounds
    from specperf.run.pool import EnginePool

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke")
    parser.add_argument("-k", dest="select", nargs="*", default=DEFAULT_SCENARIOS)
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--instances", type=int, default=2, help="engines of each kind, side by side")
    parser.add_argument("--repeats", type=int, default=1, help="measurements of each scenario, fresh engines each")
    parser.add_argument(
        "--bare-metrics",
        action="store_true",
        help="the bare process reads the spec-decode counters around each call, as the suite does",
    )
    args = parser.parse_args()

    log: list = []

    def start(config, start_timeout_s, python=None):
        if python == BARE:
            return Recorded(BareEngine(config, start_timeout_s, args.bare_metrics), "bare", log)
        return Recorded(Engine(config, start_timeout_s), "suite", log)

    def rounds_runner(step, count):  # after the warm-up: only the measured rounds are logged
        log.clear()
        for _ in range(count):
            step()

    scenarios = [s for s in load_profile(args.profile).scenarios if s.id in args.select]
    prepare = CallPreparer(dataset_dir())
    rows = []
    for scenario in [s for s in scenarios for _ in range(args.repeats)]:
        calls = prepare(scenario)
        pool = EnginePool(start=start, log=lambda line: None)
        try:
            measured = measure_rounds(
                pool,
                {"suite": (scenario, None), "bare": (scenario, BARE)},
                calls.calls,
                scenario.output_len,
                scenario.warmup,
                args.pairs,
                instances=args.instances,
                rounds_runner=rounds_runner,
            )
        finally:
            pool.close()
        suite, bare = ([r.throughput for r in measured.rounds[kind]] for kind in ("suite", "bare"))
        verdict = compare_paired("throughput_tok_s", bare, suite, 0.0)
        outputs = {json.dumps(r.token_ids) for kind in ("suite", "bare") for r in measured.rounds[kind]}
        rows.append(
            (
                scenario.id,
                measured.measure_s / (2 * args.pairs),
                statistics.median(suite),
                statistics.median(bare),
                statistics.median(ratios(bare, suite)) - 1,
                verdict,
                outside_share(log, "suite"),
                outside_share(log, "bare"),
                len(outputs) == 1,
            )
        )

    print(
        f"\n{args.pairs} pairs, {args.instances} engine(s) of each kind"
        f"{', the bare one reading counters' if args.bare_metrics else ''}; change = suite / bare - 1 "
        f"(Hodges-Lehmann, 95% bootstrap interval); goal: within {GOAL:.0%}"
    )
    print(
        f"{'scenario':<42} {'round s':>7} {'suite tok/s':>11} {'bare tok/s':>10} {'median':>7} {'change':>7} "
        f"{'95% interval':>17} {'goal':>8} {'outside, suite':>18} {'outside, bare':>18} {'outputs':>7}"
    )
    for sid, round_s, s_tps, b_tps, median, v, (s_share, s_ms), (b_share, b_ms), same in rows:
        print(
            f"{sid:<42} {round_s:>7.2f} {s_tps:>11.1f} {b_tps:>10.1f} {median:>+7.1%} {v.change:>+7.1%} "
            f"{f'[{v.ci_low:+.1%}, {v.ci_high:+.1%}]':>17} {goal_line(v):>8} "
            f"{f'{s_share:.2%}, {s_ms:.1f} ms/call':>18} {f'{b_share:.2%}, {b_ms:.1f} ms/call':>18} "
            f"{'same' if same else 'DIFFER':>7}"
        )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-bare"]:
        serve_bare(int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1")
        sys.exit(0)
    sys.exit(main())
