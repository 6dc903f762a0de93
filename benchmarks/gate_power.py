"""The paired gate's power on this machine: how often it flags a known slowdown, and how often nothing.

Each repeat is one gate run of one scenario, as `pytest tests_perf --candidate PYTHON` runs it:
current and candidate engines start fresh (`--instances` of each side by side, in `--sets` sets of
fresh engines), warm up, and run rounds alternately.  Both sides run through a wrapper interpreter
that loads the CPU-tier fault plugin; the candidate's sleeps a fraction of every engine step
(`step_slowdown`), the current's a fraction of 0, so the two differ by nothing else; a candidate
fraction of 0 is an A/A gate.  With `--candidate PYTHON` the A/A row runs that environment as the
candidate instead (two environments of one build), in both role orders unless `--roles` says one:
"A/A" with this interpreter driving the current side, "A/A swapped" with `--candidate` driving it.  Repeats are the
outer loop and slowdowns the inner one, so every row is measured in the same hours of the
machine's life.  Each gate is judged on wall time (the gate's measure) and on the engines' CPU time
per token (time stolen by other tenants is not in it), with the profile's engine-offset floor.
`--json` keeps every gate's rounds, for judging them again offline (`--replay`).

With `--shared-engines` every arm of a repeat runs on the same engines: one gate per repeat, whose
candidate reads its step slowdown from a file that is switched before each of its rounds (the arms
take turns within every engine pair, each in both run orders), and whose A/A role order alternates
from repeat to repeat.  The engine starts, most of a gate's time here, are then paid once for all
arms; each arm is still judged on its own pairs over all the engine pairs, so its false alarms and
its power are those of a gate of its own, while the arms of one repeat share their engines' offsets
(they are not independent of one another).  Each gate's verdict is three-way, as the gate gives it
(regression flagged, inconclusive, pass, improvement); an A/A false alarm is a regression or an
improvement.

`--replay FILES --resample N` also draws N gates per design from the engine pairs measured, per
scenario, arm and role order, each engine pair with all its pairs: a design of 8 is cpu-gate's (8
engine pairs judged once at 95%), 8:16:2 the same grown by `--gate-max-sets 8` (two engine pairs a
set while inconclusive, each look at the confidence judge/sequential.py spends to it). Drawn gates
share engine pairs with one another, so their rates say what the design does with engine pairs like
those measured, on fewer independent engine pairs than gates.  `--replay` also judges each gate by
each design on its own engine pairs in the order they were measured, where it has enough: a gate of
16 engine pairs (`--sets 8`) gives cpu-gate's verdict on its first 8 and on its last 8, and the
sequential gate's on as many as it needed.  Prints figures, asserts nothing.
Needs the CPU tier's environment:

    .tox/cpu/bin/python benchmarks/gate_power.py --slowdowns 0 0.03 0.05 0.10 --repeats 10 --json power.jsonl
    .tox/cpu/bin/python benchmarks/gate_power.py --replay power.jsonl --resample 2000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu_tier"))
from suite import slowed_python  # noqa: E402

DEFAULT_SCENARIOS = ["smollm2-135m-ngram-k3-bs1-instructcoder"]
CLOCKS = ("wall", "cpu")
THREE_WAY = ("regression", "inconclusive", "pass", "improvement")


def one_gate(scenario, calls, current: str, candidate: str, pairs: int, instances: int, sets: int) -> dict:
    """Fresh engines, warm-up, `pairs` pairs: per side every round's wall time, CPU time, tokens and
    engine pair."""
    from specperf.run.measurement import measure_rounds
    from specperf.run.pool import EnginePool

    pool = EnginePool(log=lambda line: None)
    try:
        measured = measure_rounds(
            pool,
            {"current": (scenario, current), "candidate": (scenario, candidate)},
            calls.calls,
            scenario.output_len,
            scenario.warmup,
            pairs,
            instances=instances,
            sets=sets,
        )
    finally:
        pool.close()
    return {
        side: [{"wall_s": r.wall_s, "cpu_s": r.cpu_s, "tokens": r.output_tokens, "cluster": r.instance} for r in rounds]
        for side, rounds in measured.rounds.items()
    } | {"start_s": measured.start_s, "measure_s": measured.measure_s}


def shared_gate(
    scenario,
    calls,
    current: str,
    candidate: str,
    control: Path,
    arms: dict[str, float],
    pairs: int,
    instances: int,
    sets: int,
) -> list[dict]:
    """One gate whose candidate sleeps each arm's fraction in turn (written to `control`, which the
    candidate's fault plugin reads at every step), `pairs` pairs per arm.  The arms take turns
    within each engine pair; with an odd number of arms each meets both run orders there.  Returns
    one gate per arm as one_gate gives it, with the side that ran first in each pair."""
    from specperf.run import loop, measurement

    names = list(arms)
    assert len(names) % 2 == 1, "an odd number of arms gives each arm both run orders in every engine pair"
    turns: dict[int, int] = {}  # candidate rounds so far per engine pair
    played: list[tuple[str, str | None]] = []  # per measured round: its side, and the arm of a candidate's
    calls_made, warming = 0, False
    generate, warm_up = loop._generate, measurement.warm_up

    def set_fraction(fraction: float) -> None:
        control.write_text(f"{fraction:.6f}")

    def switched_generate(engines, label, prompts, max_tokens, deadline):
        nonlocal calls_made
        if not warming:
            if calls_made % len(calls.calls) == 0:  # a round's first call
                side, cluster = getattr(label, "label", label), getattr(label, "cluster", 0)
                arm = None
                if side == "candidate":
                    turn = turns.get(cluster, 0)
                    turns[cluster] = turn + 1
                    arm = names[turn % len(names)]
                    set_fraction(arms[arm])
                played.append((side, arm))
            calls_made += 1
        return generate(engines, label, prompts, max_tokens, deadline)

    def quiet_warm_up(*args, **kwargs):
        nonlocal warming
        warming = True
        set_fraction(0.0)
        try:
            return warm_up(*args, **kwargs)
        finally:
            warming = False

    loop._generate, measurement.warm_up = switched_generate, quiet_warm_up
    try:
        gate = one_gate(scenario, calls, current, candidate, pairs * len(names), instances, sets)
    finally:
        loop._generate, measurement.warm_up = generate, warm_up
        set_fraction(0.0)
    assert len(played) == 2 * len(gate["candidate"])
    split = {name: {"current": [], "candidate": [], "first": []} for name in names}
    for k, (cur, cand) in enumerate(zip(gate["current"], gate["candidate"])):  # pair k: rounds 2k and 2k+1
        (first, arm_a), (_, arm_b) = played[2 * k], played[2 * k + 1]
        arm = arm_a or arm_b
        split[arm]["current"].append(cur)
        split[arm]["candidate"].append(cand)
        split[arm]["first"].append(first)
    return [split[name] | {"start_s": gate["start_s"], "measure_s": gate["measure_s"]} for name in names]


def judge(gate: dict, clock: str, tolerance: float, offset_floor: float):
    """A gate's verdict on all its engine pairs at once, at the session's confidence."""
    from specperf.judge.paired import CONFIDENCE

    return units_verdict(gate_units(gate, clock), tolerance, offset_floor, CONFIDENCE)


def report(gates: list[dict], tolerance: float, offset_floor: float) -> None:
    """Per scenario, arm and clock: the three-way verdicts (regression flagged, inconclusive, pass,
    improvement), A/A interval coverage, spread."""
    rows = {}
    for gate in gates:
        for clock in CLOCKS:
            verdict = judge(gate, clock, tolerance, offset_floor)
            rows.setdefault((gate["scenario"], gate["arm"], clock), []).append(verdict)
    print(f"\npaired gate, tolerance {tolerance:.0%}, engine-offset floor {offset_floor:.1%}")
    print(
        f"{'scenario':<40} {'arm':>11} {'clock':>5} {'gates':>5} {'flagged':>7} {'inconc.':>7} {'pass':>5} "
        f"{'improv.':>7} {'0 in CI':>7} {'median change':>13} {'range':>15} {'CI width':>8} {'SD engines':>10} "
        f"{'SD pairs':>8}"
    )
    for (sid, arm, clock), judged in sorted(rows.items()):
        verdicts = [v for v in judged if v.change is not None]  # too few pairs: invalid, left out
        if not verdicts:
            continue
        changes = [v.change for v in verdicts]
        widths = [v.ci_high - v.ci_low for v in verdicts]
        engines = [v.between_engines for v in verdicts if v.between_engines is not None]
        pairs = [v.between_pairs for v in verdicts if v.between_pairs is not None]
        counts = {status: sum(v.status == status for v in verdicts) for status in THREE_WAY}
        print(
            f"{sid:<40} {arm:>11} {clock:>5} {len(verdicts):>5} "
            + " ".join(f"{counts[status]:>{width}}" for status, width in zip(THREE_WAY, (7, 7, 5, 7)))
            + f" {sum(v.ci_low <= 0 <= v.ci_high for v in verdicts):>7} {statistics.median(changes):>+13.1%} "
            f"{f'{min(changes):+.1%}..{max(changes):+.1%}':>15} {statistics.median(widths):>8.1%} "
            f"{statistics.median(engines) if engines else math.nan:>10.1%} "
            f"{statistics.median(pairs) if pairs else math.nan:>8.1%}"
        )
    for sid, clock in sorted({(k[0], k[2]) for k in rows}):
        same = [v for (s, arm, c), vs in rows.items() if s == sid and c == clock and arm.startswith("A/A") for v in vs]
        if same:
            wrong = sum(v.status in ("regression", "improvement") for v in same)
            print(f"{sid}, {clock} time: A/A false alarms {wrong} of {len(same)} gates")


def engine_pairs(gates: list[dict], clock: str = "wall") -> dict[tuple[str, str, str], list[tuple[list, list]]]:
    """Per scenario, arm and role order ("given": this interpreter drives the current side, "swapped":
    `--candidate` does; a shared-engines repeat's arms take its A/A's order), every engine pair
    measured: its pairs' current and candidate throughputs."""
    swapped = {(g["scenario"], g["repeat"]) for g in gates if g["arm"] == "A/A swapped"}
    found: dict[tuple[str, str, str], list[tuple[list, list]]] = {}
    for gate in gates:
        arm = "A/A" if gate["arm"].startswith("A/A") else gate["arm"]
        order = "swapped" if (gate["scenario"], gate["repeat"]) in swapped else "given"
        found.setdefault((gate["scenario"], arm, order), []).extend(gate_units(gate, clock))
    return found


def units_verdict(units: list[tuple[list, list]], tolerance: float, floor: float, confidence: float):
    """The verdict on these engine pairs' pairs, as the session judges a gate's throughput."""
    from specperf.judge.paired import compare_paired

    current = [v for unit in units for v in unit[0]]
    candidate = [v for unit in units for v in unit[1]]
    clusters = [c for c, unit in enumerate(units) for _ in unit[0]]
    return compare_paired("throughput_tok_s", current, candidate, tolerance, clusters, floor, confidence=confidence)


def design_verdict(units: list[tuple[list, list]], design: tuple[int, int, int], tolerance: float, floor: float):
    """The verdict of a design (first look's engine pairs, most, engine pairs a set) on these engine
    pairs taken in order, and the engine pairs it used.  A design whose most equals its first is a
    gate of one look at 95%; else one set at a time while inconclusive, each look at the confidence
    judge/sequential.py spends to it, as `--gate-max-sets` runs it."""
    from specperf.judge.sequential import look_confidence

    first, most, step = design
    looks: list[float] = []
    for size in range(first, most + 1, step):
        looks += [size / most] if most > first else []
        verdict = units_verdict(units[:size], tolerance, floor, look_confidence(looks))
        if verdict.status != "inconclusive":
            break
    return verdict, size


def design_name(design: tuple[int, int, int]) -> str:
    first, most, _ = design
    return f"{first}" if most == first else f"{first}->{most}"


def gate_units(gate: dict, clock: str = "wall") -> list[tuple[list, list]]:
    """A gate's engine pairs in the order they were measured: each its pairs' current and candidate
    throughputs."""
    by_cluster: dict[int, tuple[list, list]] = {}
    for a, b in zip(gate["current"], gate["candidate"]):
        current, candidate = by_cluster.setdefault(a["cluster"], ([], []))
        current.append(a["tokens"] / a[f"{clock}_s"])
        candidate.append(b["tokens"] / b[f"{clock}_s"])
    return [by_cluster[c] for c in sorted(by_cluster)]


def in_order(gates: list[dict], designs: list[tuple[int, int, int]], tolerance: float, floor: float) -> None:
    """Each gate judged again by each design on its own engine pairs in the order they were measured
    (wall clock), as if the sets a design did not need had not run.  A design of one look judges
    every whole block of its engine pairs as a gate of its own (fresh engines each): a gate of 16
    engine pairs is two of cpu-gate's 8, and one sequential gate's (8->16)."""
    rows: dict[tuple[str, str, str], list] = {}
    print(f"\neach gate by design, engine pairs in measured order, tolerance {tolerance:.0%}, floor {floor:.1%}")
    for gate in gates:
        units = gate_units(gate)
        for design in designs:
            first, most, _ = design
            if first == most:  # one look: every whole block of `most` engine pairs
                starts = list(range(0, len(units) - most + 1, most))
            else:  # sequential: one gate, from the first engine pair
                starts = [0] if len(units) >= most else []
            for start in starts:
                verdict, used = design_verdict(units[start:], design, tolerance, floor)
                rows.setdefault((gate["scenario"], gate["arm"], design_name(design)), []).append(verdict)
                print(
                    f"  {gate['scenario']} repeat {gate['repeat'] + 1}, {gate['arm']}, {design_name(design)}: "
                    f"{verdict.status}, {verdict.change:+.1%} [{verdict.ci_low:+.1%}, {verdict.ci_high:+.1%}] on "
                    f"engine pairs {start + 1}-{start + used}"
                )
    for (sid, arm, design), verdicts in sorted(rows.items()):
        counts = " / ".join(str(sum(v.status == status for v in verdicts)) for status in THREE_WAY)
        print(f"{sid:<40} {arm:>11} {design:>6}: {counts} (flagged / inconclusive / pass / improvement)")


def resampled(gates: list[dict], draws: int, designs: list[tuple[int, int, int]], tolerance: float, floor: float):
    """Gates drawn from the engine pairs measured (each engine pair with all its pairs, without
    replacement within a gate): per design (design_verdict), the three-way verdicts and the engine
    pairs used."""
    rng = random.Random(1)
    print(f"\nresampled gates ({draws} a row), tolerance {tolerance:.0%}, engine-offset floor {floor:.1%}")
    print(
        f"{'scenario':<40} {'arm':>5} {'roles':>7} {'measured':>8} {'design':>9} "
        + " ".join(f"{s:>11}" for s in THREE_WAY)
    )
    for (sid, arm, order), units in sorted(engine_pairs(gates).items()):
        for design in designs:
            if len(units) < design[1]:
                continue
            counts = dict.fromkeys(THREE_WAY, 0)
            used = 0
            for _ in range(draws):
                verdict, size = design_verdict(rng.sample(units, design[1]), design, tolerance, floor)
                counts[verdict.status] += 1
                used += size
            print(
                f"{sid:<40} {arm:>5} {order:>7} {len(units):>8} {design_name(design):>9} "
                + " ".join(f"{counts[s] / draws:>11.1%}" for s in THREE_WAY)
                + f"   mean engine pairs {used / draws:.1f}"
            )


def lean(gates: list[dict]) -> None:
    """Where an A/A leans: the candidate's mean log ratio split by which side started its engines
    first (engine pairs alternate: even ones start the current side first) and by which side ran
    first in a pair (it flips with each pair of an engine pair, starting with the side that
    started first); run/measurement.py's schedule."""
    split: dict[tuple[str, str], list[float]] = {}
    for gate in (g for g in gates if g["arm"].startswith("A/A")):
        seen: dict[int, int] = {}
        for k, (a, b) in enumerate(zip(gate["current"], gate["candidate"])):
            cluster = a["cluster"]
            turn = seen.get(cluster, 0)
            seen[cluster] = turn + 1
            log_ratio = math.log((b["tokens"] / b["wall_s"]) / (a["tokens"] / a["wall_s"]))
            split.setdefault(("started first", "current" if cluster % 2 == 0 else "candidate"), []).append(log_ratio)
            ran_first = gate["first"][k] if "first" in gate else "current" if (cluster + turn) % 2 == 0 else "candidate"
            split.setdefault(("ran first", ran_first), []).append(log_ratio)
    for (what, side), values in sorted(split.items()):
        sem = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
        print(
            f"A/A, {side} {what}: candidate {math.expm1(statistics.fmean(values)):+.2%} "
            f"(+- {sem:.2%} per pair as independent), {len(values)} pairs"
        )


def kept(gate: dict, args, scenario, floor: float, started_at: float, facts: dict, note: str = "") -> dict:
    """The gate with what ran it, appended to `--json` and said in a line."""
    gate |= {"started_at": started_at, "ended_at": time.time(), "scenario": scenario.id, **facts}
    gate |= {"output_len": scenario.output_len, "requests": scenario.num_requests}
    if args.json:
        with open(args.json, "a", encoding="utf-8") as out:
            out.write(json.dumps(gate) + "\n")
    verdict = judge(gate, "wall", scenario.gate_tolerance, floor)
    print(
        f"  repeat {facts['repeat'] + 1}, {facts['arm']}: {verdict.line()}; starts {gate['start_s']:.0f} s, "
        f"rounds {gate['measure_s']:.0f} s {note}",
        flush=True,
    )
    return gate


def shared_gates(args, scenario, calls, wrappers: Path, pairs: int, instances: int, sets: int, floor: float) -> list:
    """`--shared-engines`: per repeat one gate of every arm on the same engines (shared_gate)."""
    control = wrappers / "slowdown"
    control.write_text("0")
    zero = wrappers / "zero"
    zero.write_text("0")
    fractions = {("A/A" if f == 0 else f"{f:.0%}"): f for f in args.slowdowns}
    gates = []
    for repeat in range(args.repeats):
        swap = args.candidate is not None and (args.roles == "swapped" or (args.roles == "both" and repeat % 2 == 1))
        current_python, candidate_python = sys.executable, args.candidate or sys.executable
        if swap:
            current_python, candidate_python = candidate_python, current_python
        # both sides through the fault plugin, each reading a file at every step: the same overhead
        folder = wrappers / f"repeat{repeat}"
        folder.mkdir()
        current = slowed_python(folder, zero, current_python)
        candidate = slowed_python(folder, control, candidate_python)
        arms = {("A/A swapped" if swap and f == 0 else name): f for name, f in fractions.items()}
        started_at = time.time()
        measured = shared_gate(scenario, calls, current, candidate, control, arms, pairs, instances, sets)
        for arm, gate in zip(arms, measured):
            facts = {"arm": arm, "repeat": repeat, "shared": True, "pairs": pairs, "instances": instances, "sets": sets}
            gates.append(kept(gate, args, scenario, floor, started_at, facts, "(all arms)"))
    return gates


def main() -> int:
    from specperf.paths import dataset_dir
    from specperf.profiles.scenarios import load_profile
    from specperf.run.calls import CallPreparer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-gate")
    parser.add_argument("-k", dest="select", nargs="*", default=DEFAULT_SCENARIOS)
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.0, 0.03, 0.05, 0.10])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--pairs", type=int, help="default: the profile's rounds")
    parser.add_argument("--instances", type=int, help="engines per side alive (default: the profile's)")
    parser.add_argument("--sets", type=int, help="sets of fresh engines (default: the profile's)")
    parser.add_argument("--offset-floor", type=float, help="default: the profile's gate_engine_offset")
    parser.add_argument("--output-len", type=int, help="tokens per request (default: the scenario's)")
    parser.add_argument("--requests", type=int, help="requests per round (default: the scenario's)")
    parser.add_argument("--candidate", help="the A/A row's candidate: another environment's python")
    parser.add_argument(
        "--roles",
        choices=["both", "given", "swapped"],
        default="both",
        help="with --candidate: A/A gates with this interpreter as current (given), as candidate (swapped), or both",
    )
    parser.add_argument(
        "--shared-engines",
        action="store_true",
        help="every arm of a repeat on the same engines, the candidate's slowdown switched between its rounds "
        "(an odd number of arms; with --candidate the A/A role order alternates from repeat to repeat)",
    )
    parser.add_argument("--json", help="append every gate's rounds to this file (JSON lines)")
    parser.add_argument("--replay", nargs="+", help="judge the gates of these --json files again; measure nothing")
    parser.add_argument(
        "--resample",
        type=int,
        metavar="N",
        help="with --replay: also N gates per design drawn from the engine pairs measured (--designs)",
    )
    parser.add_argument(
        "--designs",
        nargs="+",
        default=["8", "8:16:2"],
        help="with --replay: FIRST[:MOST:STEP] engine pairs (cpu-gate: 8; with --gate-max-sets 8: 8:16:2), each "
        "gate judged by each on its own engine pairs in measured order and, with --resample, on drawn ones",
    )
    parser.add_argument(
        "--busy",
        help="with --replay: leave out gates that overlap a window of this file (lines 'START END', Unix "
        "seconds: when something else was known to load the machine)",
    )
    args = parser.parse_args()

    scenarios = [s for s in load_profile(args.profile).scenarios if s.id in args.select]
    scenarios = [
        s.model_copy(
            update={"output_len": args.output_len or s.output_len, "num_requests": args.requests or s.num_requests}
        )
        for s in scenarios
    ]
    first = scenarios[0]
    floor = first.gate_engine_offset if args.offset_floor is None else args.offset_floor
    if args.replay:
        gates = [json.loads(line) for path in args.replay for line in Path(path).read_text().splitlines() if line]
        if args.busy:
            windows = [tuple(map(float, line.split())) for line in Path(args.busy).read_text().splitlines() if line]
            quiet = [
                g for g in gates if not any(g["started_at"] < end and start < g["ended_at"] for start, end in windows)
            ]
            print(f"{len(gates) - len(quiet)} of {len(gates)} gates overlap a busy window of {args.busy}; left out")
            gates = quiet
        report(gates, first.gate_tolerance, floor)
        lean(gates)
        designs = [tuple(int(x) for x in (d.split(":") if ":" in d else (d, d, 1))) for d in args.designs]
        in_order(gates, designs, first.gate_tolerance, floor)
        if args.resample:
            resampled(gates, args.resample, designs, first.gate_tolerance, floor)
        return 0
    prepare = CallPreparer(dataset_dir())
    wrappers = Path(tempfile.mkdtemp(prefix="gate-power-"))
    (wrappers / "current").mkdir()
    current = slowed_python(wrappers / "current", 0.0)  # a path of its own: another engine slot
    gates = []
    for scenario in scenarios:
        calls = prepare(scenario)
        pairs, instances = args.pairs or scenario.rounds, args.instances or scenario.gate_instances
        sets = args.sets or scenario.gate_engine_sets
        arms = {("A/A" if f == 0 else f"{f:.0%}"): (current, slowed_python(wrappers, f)) for f in args.slowdowns}
        if args.candidate and "A/A" in arms:
            del arms["A/A"]
            orders = {"given": [False], "swapped": [True], "both": [False, True]}[args.roles]
            arms = {
                ("A/A swapped" if swap else "A/A"): (args.candidate, sys.executable)
                if swap
                else (sys.executable, args.candidate)
                for swap in orders
            } | arms
        t0 = time.monotonic()
        if args.shared_engines:
            gates += shared_gates(args, scenario, calls, wrappers, pairs, instances, sets, floor)
            print(f"  ({time.monotonic() - t0:.0f} s for {args.repeats} shared gates)", flush=True)
            continue
        for repeat in range(args.repeats):  # slowdowns interleaved: every row sees the same hours
            for arm, (a, b) in arms.items():
                started_at = time.time()
                gate = one_gate(scenario, calls, a, b, pairs, instances, sets)
                facts = {"arm": arm, "repeat": repeat, "pairs": pairs, "instances": instances, "sets": sets}
                gates.append(kept(gate, args, scenario, floor, started_at, facts))
        print(f"  ({time.monotonic() - t0:.0f} s for {args.repeats * len(arms)} gate runs)", flush=True)
    report(gates, first.gate_tolerance, floor)
    lean(gates)
    return 0


if __name__ == "__main__":
    sys.exit(main())
