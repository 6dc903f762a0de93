"""The serving mode's load generator against vLLM's own `vllm bench serve`, on one running server.

One server (run/serving/server.py) of a profile scenario's model and method; the scenario's workload
prompts as text, greedy, the same output length and concurrency for both clients; the two take
turns, `--repeats` times each, so the server's drift touches both.  Prints, per client, the
medians over repeats of median TTFT, median TPOT, median ITL and output throughput, and the
suite's figures over vLLM's, as a ratio of the medians and as the median of each repeat's ratio.
vLLM's benchmark is called in this process (the CPU build's `vllm` console script fails on its
distribution name).  Prints figures, asserts nothing:

    .tox/cpu/bin/python benchmarks/serve_peer.py -k smollm2-135m-ngram-k3-bs1-instructcoder-traced \\
        --concurrency 2 --requests 8 --output-len 32 --repeats 9
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

FIGURES = ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")


def suite_round(url: str, model: str, prompts: list[str], output_len: int, concurrency: int) -> dict:
    from specperf.run.serving.load import run_round

    measured = run_round(url, model, prompts, output_len, concurrency)
    shown = measured.percentiles()
    return {
        "median_ttft_ms": shown["ttft_s_p50"] * 1000,
        "median_tpot_ms": shown["tpot_s_p50"] * 1000,
        "median_itl_ms": shown["itl_s_p50"] * 1000,
        "output_throughput": measured.throughput,
        "errors": measured.errors,
        "client_bound": measured.client_bound,
    }


def vllm_round(url: str, model: str, dataset: Path, count: int, output_len: int, concurrency: int, out: Path) -> dict:
    """One run of vLLM's benchmark, called in this process: as a process of its own, the server
    idled while it imported, and the first requests after the pause ran a third slower."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as vllm_bench_serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = [
        *("--backend", "vllm", "--base-url", url, "--model", model, "--tokenizer", model),
        *("--dataset-name", "custom", "--dataset-path", str(dataset), "--skip-chat-template"),
        "--disable-shuffle",  # the prompts in the suite's order, so both clients pair the same requests
        *("--num-prompts", str(count), "--custom-output-len", str(output_len)),
        *("--max-concurrency", str(concurrency), "--request-rate", "inf", "--temperature", "0"),
        *("--num-warmups", str(concurrency)),
        *("--disable-tqdm", "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name),
    ]
    return vllm_bench_serve(parser.parse_args(args))


def main() -> int:
    from specperf import checkpoints
    from specperf.paths import dataset_dir
    from specperf.profiles import workloads
    from specperf.profiles.scenarios import load_profile
    from specperf.run.builds.versions import installed_vllm
    from specperf.run.calls import CallPreparer, prompting
    from specperf.run.pool import engine_config
    from specperf.run.serving.server import Server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke")
    parser.add_argument("-k", dest="scenario", default="smollm2-135m-ngram-k3-bs1-instructcoder-traced")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    scenario = next(s for s in load_profile(args.profile).scenarios if s.id == args.scenario)
    tokenizer = CallPreparer(dataset_dir()).tokenizer(scenario)
    sample = workloads.load(
        scenario.dataset,
        args.requests,
        scenario.seed,
        dataset_dir(),
        tokenizer=tokenizer,
        prompting=prompting(scenario),
    )
    prompts = [workloads.render_prompt(r, tokenizer) for r in sample.requests]
    work = Path(tempfile.mkdtemp(prefix="serve-peer-"))
    dataset = work / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    config = engine_config(scenario)
    model = checkpoints.resolve(scenario.model.path)
    server = Server(config, work / "server.log", installed_vllm()[1]).start()
    print(f"server of {scenario.id} healthy in {server.start_s:.0f} s; log {work / 'server.log'}", flush=True)
    rounds: dict[str, list[dict]] = {"suite": [], "vllm bench serve": []}
    try:
        suite_round(server.url, model, prompts, args.output_len, args.concurrency)  # warm-up
        for repeat in range(args.repeats):
            rounds["suite"].append(suite_round(server.url, model, prompts, args.output_len, args.concurrency))
            out = work / f"vllm-{repeat}.json"
            rounds["vllm bench serve"].append(
                vllm_round(server.url, model, dataset, len(prompts), args.output_len, args.concurrency, out)
            )
    finally:
        server.stop()
    print(
        f"{len(prompts)} requests, concurrency {args.concurrency}, {args.output_len} tokens, "
        f"{args.repeats} repeats each, alternating"
    )
    print(f"{'client':<18}" + "".join(f"{name:>20}" for name in FIGURES))
    medians = {}
    for client, measured in rounds.items():
        medians[client] = {name: statistics.median(r[name] for r in measured) for name in FIGURES}
        print(f"{client:<18}" + "".join(f"{medians[client][name]:>20.2f}" for name in FIGURES))
    ratio = {name: medians["suite"][name] / medians["vllm bench serve"][name] for name in FIGURES}
    print(f"{'suite / vllm':<18}" + "".join(f"{ratio[name]:>20.3f}" for name in FIGURES))
    # each repeat's two rounds ran back to back: their ratio cancels the server's drift between repeats
    paired = {
        name: statistics.median(s[name] / v[name] for s, v in zip(rounds["suite"], rounds["vllm bench serve"]))
        for name in FIGURES
    }
    print(f"{'paired ratio':<18}" + "".join(f"{paired[name]:>20.3f}" for name in FIGURES))
    print(
        f"suite rounds: errors {[r['errors'] for r in rounds['suite']]}, "
        f"client-bound {[r['client_bound'] for r in rounds['suite']]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
