"""The study's released acceptance traces (SpecDecode-Bench/simulator, data/<model>/combined_<dataset>.jsonl):
each file read into the simulator's requests, and the study's sample of them."""

from __future__ import annotations

import json
import random
from pathlib import Path

from .simulate import EAGLE, EAGLE3, NGRAM, SEED, RequestAcceptance

STUDY_SAMPLE = 300  # requests the study's simulator draws per dataset (random.sample, seed 42)


def read_study_traces(path: Path) -> list[RequestAcceptance]:
    """The study's released trace file (data/<model>/combined_<dataset>.jsonl): per line an id, the
    prompt and generated token ids, and acc_ngram / acc_eagle {"acc_len": [...]}; as the study's
    loader (request.py) also reads them, a single "acc" stands for whichever of the two is missing,
    and "acc_eagle_three" (a list, or {"acc_len": [...]}) is EAGLE-3's.  Anything else (not UTF-8,
    not a trace line, an acceptance length that is no whole number from 0 up, no line at all) is a
    ValueError naming the file and line."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid UTF-8 (byte {err.start + 1})") from None
    requests = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            requests.append(RequestAcceptance(str(item["id"]), len(item["prompt_token_ids"]), _acceptance(item)))
        except RecursionError:
            raise ValueError(f"{path}:{number}: not a study trace line (nested too deeply)") from None
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{number}: not a study trace line ({type(err).__name__}: {err})") from None
    if not requests:
        raise ValueError(f"{path}: no trace lines")
    return requests


def _acceptance(item: dict) -> dict[str, list[int]]:
    acc = {}
    for name, key in ((NGRAM, "acc_ngram"), (EAGLE, "acc_eagle")):
        source = item[key] if key in item else item.get("acc")
        if source is not None:
            acc[name] = _lengths(source["acc_len"])
    three = item.get("acc_eagle_three")
    if three is not None:
        acc[EAGLE3] = _lengths(three["acc_len"] if isinstance(three, dict) else three)
    return acc


MAX_ACCEPTED = 1_000_000  # tokens one step may accept: far beyond any output, and a float's range


def _lengths(values) -> list[int]:
    """Accepted tokens per step: whole numbers from 0 up."""
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_ACCEPTED for v in values
    ):
        raise TypeError(f"acc_len must be a list of whole numbers from 0 to {MAX_ACCEPTED}")
    return values


def study_sample(requests: list[RequestAcceptance], k: int = STUDY_SAMPLE) -> list[RequestAcceptance]:
    """The study's draw: random.seed(42) then random.sample of the requests with any output."""
    return random.Random(SEED).sample([r for r in requests if any(r.acc_len.values())], k=min(k, len(requests)))
