"""`specperf simulate`: speedup bounds from acceptance traces (the study's, or a traced run's with
the step cost fitted to it, and each traced scenario's headroom)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..analysis.simulate import EAGLE3, MODES
from ..analysis.simulate import PROPOSERS as SIMULATED
from ..methods import method_of
from ..storage import load_results


def print_fitted_costs(run_dirs: list[Path]) -> int:
    """The step-cost model fitted from the traced results of run directories (analysis/cost_fit.py)."""
    from ..analysis.cost_fit import fit_costs

    fitted = fit_costs([r for d in run_dirs for r in load_results(d) if r.ok])
    if not fitted:
        print(
            "specperf: error: no traced results with per-step batch counts in " + ", ".join(map(str, run_dirs)),
            file=sys.stderr,
        )
        return 2
    for cost in fitted:
        kv, token, fixed = cost.forward.coefficients
        rest_token, rest_fixed = cost.rest.coefficients
        print(
            f"{cost.model}: target forward = {kv:.3g} s x KV tokens + {token:.3g} s x tokens + {fixed:.3g} s "
            f"(error {cost.forward.error:.1%} over {cost.forward.steps} steps); "
            f"rest of a step (sampling included) {rest_token:.3g} s x tokens + {rest_fixed:.3g} s "
            f"(error {cost.rest.error:.1%})"
        )
        for method, fit in cost.drafts.items():
            formula = (
                f"{fit.coefficients[0]:.3g} x the forward"
                if method_of(method).drafting_fit == "share"
                else "{:.3g} s x KV tokens + {:.3g} s x drafted tokens per request".format(*fit.coefficients)
            )
            print(f"    drafting, {method}: {formula} (error {fit.error:.1%} over {fit.steps} steps)")
    return 0


# simulate.Speedup's fields as the study's simulator prints them; the first is the one it returns
SPEEDUP_WAYS = {"throughput": "throughput", "per_request": "request mean", "latency": "latency"}
MAX_BATCH = 1_000_000  # far beyond any engine; a bound keeps the arithmetic in a float's range
AGREE = {True: "yes", False: "no", None: "-"}  # simulated within the cost model's error of measured
# held-out: the simulator's worst error on the scenario's k fitted on another k of its traced sweep
# (analysis/held_out.py); a simulated best k is printed only with it


def print_headroom(run_dirs: list[Path]) -> None:
    """Each traced scenario's measured, simulated and bound speedups (analysis/headroom.py)."""
    from ..analysis.headroom import headroom

    def x(value):
        return f"{value:.2f}x" if value is not None else "-"

    rows = headroom([r for d in run_dirs for r in load_results(d) if r.ok])
    print(
        f"\n{'scenario':<52} {'measured':>9} {'simulated':>9} {'held-out':>8} {'error':>6} {'oracle':>7} "
        f"{'combined':>8} {'adaptive':>8} {'best k':>10}  agree"
    )
    for h in rows:
        error = f"{h.speedup_error:.0%}" if h.speedup_error is not None else "-"
        held = f"{h.held_out:+.1%}" if h.held_out is not None else "-"
        best = f"k{h.best_k.k} {h.best_k.speedup:.2f}x" if h.best_k and h.held_out is not None else "-"
        print(
            f"{h.scenario_id:<52} {x(h.measured):>9} {x(h.simulated):>9} {held:>8} {error:>6} {x(h.oracle):>7} "
            f"{x(h.combined):>8} {x(h.adaptive):>8} {best:>10}  {AGREE[h.within_error]:<5}"
            + (f"  ({h.note})" if h.note else "")
        )


def print_best_k(folder: Path, datasets: list[str], proposers: list[str], batches: list[int]) -> int:
    """Per dataset and proposer, the fastest k from 1 to 5 at each batch size, its speedup and the
    oracle's bound (analysis/simulate.py best_k)."""
    from ..analysis import simulate, study_traces

    print("\nbest k (simulated speedup; the oracle's bound in brackets)")
    print(f"{'dataset':<14} {'proposer':<9}" + "".join(f"{f'bs{b}':>19}" for b in batches))
    for dataset in datasets:
        requests = study_traces.study_sample(study_traces.read_study_traces(folder / f"combined_{dataset}.jsonl"))
        for proposer in proposers:
            best = simulate.best_k(requests, proposer, batches, dataset=dataset)
            cells = "".join(f"{f'k{best[b].k} {best[b].speedup:.2f} ({best[b].oracle:.2f})':>19}" for b in batches)
            print(f"{dataset:<14} {proposer:<9}{cells}")
    return 0


def run(args) -> int:
    """Speedup per batch size from the study's released acceptance traces (analysis/simulate.py)."""
    import json

    from ..analysis import simulate, study_traces

    if args.fit_from:
        status = print_fitted_costs([Path(d) for d in args.fit_from])
        if not status:
            print_headroom([Path(d) for d in args.fit_from])
        if status or not args.study_traces:
            return status
    if not args.study_traces:
        print("specperf: error: simulate needs --study-traces DIR or --fit-from RUN_DIR", file=sys.stderr)
        return 2
    folder, batches, rows = Path(args.study_traces), args.batch_sizes, []
    if bad := [b for b in batches if not 1 <= b <= MAX_BATCH]:
        print(f"specperf: error: --batch-sizes: {bad[0]} is not a batch size from 1 to {MAX_BATCH}", file=sys.stderr)
        return 2
    print(
        f"{'dataset':<14} {'proposer':<9} {'mode':<7} {'speedup by':<12}" + "".join(f"{f'bs{b}':>7}" for b in batches)
    )
    for dataset in args.datasets:
        path = folder / f"combined_{dataset}.jsonl"
        if not path.is_file():
            print(f"specperf: error: {path}: no such trace file (expected combined_<dataset>.jsonl)", file=sys.stderr)
            return 2
        try:
            requests = study_traces.study_sample(study_traces.read_study_traces(path))
        except ValueError as err:
            print(f"specperf: error: {err}", file=sys.stderr)
            return 2
        for proposer in args.proposers:
            needs = (
                (simulate.NGRAM, simulate.learned_key(requests[0])) if proposer == simulate.COMBINED else (proposer,)
            )
            if not all(name in r.acc_len for r in requests for name in needs):
                print(f"specperf: error: {path}: no {' and '.join(needs)} acceptance in every line", file=sys.stderr)
                return 2
            for mode in ("oracle",) if proposer == simulate.COMBINED else args.modes:
                values = simulate.simulate_speedups(requests, proposer, mode, batches, dataset=dataset)
                ways = {way: {b: getattr(values[b], way) for b in batches} for way in SPEEDUP_WAYS}
                row_of = {"dataset": dataset, "proposer": proposer, "mode": mode, "speedup": ways["throughput"]}
                rows.append(row_of | {"per_request": ways["per_request"], "latency": ways["latency"]})
                for i, (way, label) in enumerate(SPEEDUP_WAYS.items()):
                    row = f"{dataset:<14} {proposer:<9} {mode:<7}" if i == 0 else " " * 32
                    print(f"{row} {label:<12}" + "".join(f"{ways[way][b]:>7.2f}" for b in batches))
    if args.best_k:
        status = print_best_k(folder, args.datasets, [p for p in args.proposers if p != simulate.COMBINED], batches)
        if status:
            return status
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        print(f"written: {args.json}")
    if args.html:
        from ..report.study_curves import render_study_curves
        from ..storage import atomic_write_text

        atomic_write_text(Path(args.html), render_study_curves(rows, str(folder)))
        print(f"written: {args.html}")
    return 0


def add_parser(sub) -> None:
    simulate = sub.add_parser(
        "simulate",
        help="speedup per batch size from acceptance traces: fixed k, oracle, the per-step best of n-gram and EAGLE",
    )
    simulate.add_argument(
        "--study-traces",
        metavar="DIR",
        help="the study's released traces (SpecDecode-Bench/simulator data/llama3.1-8B/)",
    )
    simulate.add_argument(
        "--fit-from",
        nargs="+",
        metavar="RUN_DIR",
        help="fit the step-cost model to the traced results of these runs, print it and "
        "each traced scenario's measured, simulated and oracle speedups",
    )
    simulate.add_argument("--datasets", nargs="+", default=["gsm8k", "instructcoder", "sharegpt", "cnn"])
    simulate.add_argument(
        "--proposers",
        nargs="+",
        default=list(SIMULATED),
        choices=[*SIMULATED, EAGLE3],
        help="eagle: the learned head the traces hold (EAGLE-3 in the study's release); eagle3: "
        "the acc_eagle_three ground truth, where the traces have one",
    )
    simulate.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    simulate.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 8, 16, 32, 64, 128])
    simulate.add_argument(
        "--best-k",
        action="store_true",
        help="also the fastest k from 1 to 5 per dataset, proposer and batch size, beside the oracle's bound",
    )
    simulate.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    simulate.add_argument("--html", metavar="FILE", help="also draw the curves, a chart per dataset, as an HTML page")
    simulate.set_defaults(func=run)
