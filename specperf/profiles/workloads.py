"""Workload loaders: the six prompt sets of the study behind one interface.

``load(name, n, seed, dataset_dir, tokenizer)`` returns a :class:`WorkloadSample`
holding ``n`` requests drawn deterministically from ``seed``. Sources are tried
in this order:

1. a local directory (``--dataset-dir``) of JSONL files, one record a line, with
   the field names of the project's offline samples. Per workload the real file
   is tried first, then a labelled stand-in where one exists
   (``instructcoder.jsonl`` then ``instructcoder_editeval.jsonl``; ``aime.jsonl``
   then ``aime24.jsonl``);
2. the Hugging Face hub through ``datasets.load_dataset`` (imported only here;
   its cache and ``HF_DATASETS_OFFLINE`` apply as usual);
3. for GPQA only, synthetic four-choice questions in GPQA's exact template,
   labelled as a synthetic stand-in (GPQA's authors ask that real items not be
   published, so none ship with the project).

Sampling ranks every record by ``sha256(f"{seed}:{id}")`` and takes the lowest
``n`` (after the ShareGPT filter): the same seed gives the same ids whatever the
order of the file, removing records that were not picked leaves the pick
unchanged, and a smaller sample is a prefix of a larger one. Asking for more
requests than there are gives all of them; the caller records ``len(requests)``.

This module is pure Python: no vLLM import. The tokenizer arguments only need
the Hugging Face tokenizer methods used here (``__call__``/``encode`` and
``apply_chat_template``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "WORKLOADS",
    "Request",
    "Workload",
    "WorkloadError",
    "WorkloadSample",
    "WorkloadUnavailable",
    "load",
    "overlap_bleu4",
    "render_prompt",
]

log = logging.getLogger(__name__)


class WorkloadError(Exception):
    """A workload source exists but is malformed (names the file and line)."""


class WorkloadUnavailable(Exception):
    """No source for a workload could be found or opened."""


@dataclass(frozen=True)
class Request:
    """One prompt of a workload."""

    id: str
    text: str
    chat: bool
    reference_completion: str | None = None


@dataclass(frozen=True)
class WorkloadSample:
    """The requests drawn from one workload, with where they came from."""

    workload: str
    requests: tuple[Request, ...]
    source: str
    checksum: str
    stand_in: str | None


# --------------------------------------------------------------------------
# The study's prompt templates (DESIGN.md, "Facts from the study").
# --------------------------------------------------------------------------

CNN_PREFIX = "Could you summarize the following article, please reuse text from the article if possible: "
INSTRUCTCODER_SUFFIX = " Just output the code, do not include any explanation."
GPQA_TEMPLATE = (
    "What is the correct answer to this question: {question}\n"
    "Choices:\n"
    "(A) {correct}\n"
    "(B) {incorrect1}\n"
    "(C) {incorrect2}\n"
    "(D) {incorrect3}\n"
    "\n"
    'Format your response as follows: "The correct answer is (insert answer here)".'
)

# ShareGPT filter of the study, in tokens of the target tokenizer.
SHAREGPT_MIN_PROMPT_TOKENS = 4
SHAREGPT_MAX_PROMPT_TOKENS = 1024
SHAREGPT_MAX_TOTAL_TOKENS = 2048

STAND_IN_EDITEVAL = "EditEval stands in for InstructCoder"
STAND_IN_AIME24 = "AIME 2024 stands in for AIME 2022-24"
STAND_IN_GPQA_SYNTHETIC = "synthetic four-choice questions stand in for GPQA-Main"


def cnn_prompt(article: str) -> str:
    return CNN_PREFIX + article


def instructcoder_prompt(input: str, instruction: str) -> str:
    return f"{input}\n\n{instruction}{INSTRUCTCODER_SUFFIX}"


def gpqa_prompt(question: str, correct: str, incorrect1: str, incorrect2: str, incorrect3: str) -> str:
    """GPQA's template with the correct answer at (A), as the study places it."""
    return GPQA_TEMPLATE.format(
        question=question,
        correct=correct,
        incorrect1=incorrect1,
        incorrect2=incorrect2,
        incorrect3=incorrect3,
    )


# --------------------------------------------------------------------------
# Record parsing: one function per workload, shared by files and the hub.
# --------------------------------------------------------------------------


class _FieldError(Exception):
    """A record lacks a field or has one of the wrong type (no location yet)."""


@dataclass(frozen=True)
class _Item:
    id: str | None
    text: str
    reference: str | None


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _str_field(rec: Mapping[str, Any], *names: str) -> str:
    """The first of ``names`` present in ``rec``; it must be a string."""
    for name in names:
        if name in rec:
            value = rec[name]
            if not isinstance(value, str):
                raise _FieldError(f"field {name!r} must be a string, got {_describe(value)}")
            return value
    alternatives = " or ".join(repr(n) for n in names)
    raise _FieldError(f"missing field {alternatives}")


def _opt_str_field(rec: Mapping[str, Any], name: str) -> str | None:
    value = rec.get(name)
    return value if isinstance(value, str) else None


def _id_field(rec: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        if name in rec:
            value = rec[name]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise _FieldError(f"field {name!r} must be a string or an integer, got {_describe(value)}")
            return str(value)
    return None


def _parse_cnn(rec: Mapping[str, Any]) -> _Item:
    return _Item(_id_field(rec, "id"), cnn_prompt(_str_field(rec, "article")), _opt_str_field(rec, "highlights"))


_HUMAN_ROLES = frozenset({"human", "user"})


def _parse_sharegpt(rec: Mapping[str, Any]) -> _Item | None:
    """First human turn and the reply to it; None for a conversation without one."""
    rid = _id_field(rec, "id")
    if "prompt" in rec:
        prompt = _str_field(rec, "prompt")
        reference = _str_field(rec, "reference_completion")
        return _Item(rid, prompt, reference)
    if "conversations" not in rec:
        raise _FieldError("missing field 'prompt' (or 'conversations')")
    turns = rec["conversations"]
    if not isinstance(turns, list):
        raise _FieldError(f"field 'conversations' must be a list, got {_describe(turns)}")
    for pos, turn in enumerate(turns):
        if not isinstance(turn, Mapping):
            raise _FieldError(f"conversations[{pos}] must be an object, got {_describe(turn)}")
        if turn.get("from") in _HUMAN_ROLES:
            if pos + 1 >= len(turns):
                return None
            reply = turns[pos + 1]
            if not isinstance(reply, Mapping) or reply.get("from") in _HUMAN_ROLES:
                return None
            prompt, answer = turn.get("value"), reply.get("value")
            if not isinstance(prompt, str) or not isinstance(answer, str):
                return None
            return _Item(rid, prompt, answer)
    return None


def _parse_instructcoder(rec: Mapping[str, Any]) -> _Item:
    instruction = _str_field(rec, "instruction")
    code = _str_field(rec, "input")
    return _Item(_id_field(rec, "id"), instructcoder_prompt(code, instruction), _opt_str_field(rec, "output"))


def _parse_gsm8k(rec: Mapping[str, Any]) -> _Item:
    return _Item(_id_field(rec, "id"), _str_field(rec, "question"), _opt_str_field(rec, "answer"))


def _parse_aime(rec: Mapping[str, Any]) -> _Item:
    return _Item(_id_field(rec, "id"), _str_field(rec, "problem"), _opt_str_field(rec, "solution"))


def _parse_gpqa(rec: Mapping[str, Any]) -> _Item:
    text = gpqa_prompt(
        _str_field(rec, "question", "Question"),
        _str_field(rec, "correct_answer", "Correct Answer"),
        _str_field(rec, "incorrect_answer_1", "Incorrect Answer 1"),
        _str_field(rec, "incorrect_answer_2", "Incorrect Answer 2"),
        _str_field(rec, "incorrect_answer_3", "Incorrect Answer 3"),
    )
    return _Item(_id_field(rec, "id", "Record ID"), text, None)


# --------------------------------------------------------------------------
# Synthetic GPQA stand-in: simple, obviously synthetic science questions.
# --------------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:.4g}"


# (id stem, question template, unit, correct, three wrong formulas, parameter sets)
_SYNTHETIC_KINDS: tuple[tuple[Any, ...], ...] = (
    (
        "distance",
        "A cart moves in a straight line at a constant {0} m/s for {1} s. How far does it travel?",
        "m",
        lambda v, t: v * t,
        (lambda v, t: v + t, lambda v, t: v / t, lambda v, t: 2 * v * t),
        ((3, 4), (6, 5)),
    ),
    (
        "voltage",
        "A current of {0} A flows through a resistor of {1} ohm. What is the voltage across the resistor?",
        "V",
        lambda i, r: i * r,
        (lambda i, r: r / i, lambda i, r: i + r, lambda i, r: i * r * r),
        ((2, 10), (0.5, 8)),
    ),
    (
        "force",
        "A net force accelerates a {0} kg mass at {1} m/s^2. What is the magnitude of the force?",
        "N",
        lambda m, a: m * a,
        (lambda m, a: m + a, lambda m, a: m / a, lambda m, a: m * a * a),
        ((5, 3), (2, 9)),
    ),
    (
        "kinetic-energy",
        "A {0} kg ball moves at {1} m/s. What is its kinetic energy?",
        "J",
        lambda m, v: 0.5 * m * v * v,
        (lambda m, v: m * v * v, lambda m, v: m * v, lambda m, v: 0.5 * m * v),
        ((2, 3), (4, 5)),
    ),
    (
        "density",
        "A block has a mass of {0} g and a volume of {1} cm^3. What is its density?",
        "g/cm^3",
        lambda m, vol: m / vol,
        (lambda m, vol: vol / m, lambda m, vol: m * vol, lambda m, vol: m - vol),
        ((54, 20), (89, 10)),
    ),
    (
        "power",
        "A device draws {0} A from a {1} V supply. What power does it use?",
        "W",
        lambda i, v: v * i,
        (lambda i, v: v / i, lambda i, v: v + i, lambda i, v: v * i * i),
        ((2, 12), (5, 230)),
    ),
    (
        "moles",
        "How many moles of water (molar mass 18 g/mol) are in {0} g of water?",
        "mol",
        lambda m: m / 18,
        (lambda m: m * 18, lambda m: 18 / m, lambda m: m / 9),
        ((36,), (9,)),
    ),
    (
        "frequency",
        "A pendulum completes one full cycle every {0} s. What is its frequency?",
        "Hz",
        lambda t: 1 / t,
        (lambda t: t, lambda t: 2 / t, lambda t: 2 * t),
        ((0.5,), (4,)),
    ),
    (
        "wave-speed",
        "A wave has a frequency of {0} Hz and a wavelength of {1} m. What is its speed?",
        "m/s",
        lambda f, lam: f * lam,
        (lambda f, lam: f / lam, lambda f, lam: f + lam, lambda f, lam: lam / f),
        ((10, 2), (50, 4)),
    ),
    (
        "length-conversion",
        "How many metres are there in {0} km?",
        "m",
        lambda x: x * 1000,
        (lambda x: x * 100, lambda x: x * 10, lambda x: x / 1000),
        ((3,), (0.25,)),
    ),
)


def synthetic_gpqa_records() -> list[dict[str, str]]:
    """Twenty synthetic four-choice questions with GPQA's field names (deterministic)."""
    records: list[dict[str, str]] = []
    for stem, question, unit, correct, wrong, param_sets in _SYNTHETIC_KINDS:
        for k, params in enumerate(param_sets, start=1):
            shown = [_num(p) for p in params]
            answers = [f"{_num(fn(*params))} {unit}" for fn in (correct, *wrong)]
            records.append(
                {
                    "id": f"synthetic-gpqa-{stem}-{k}",
                    "question": question.format(*shown),
                    "correct_answer": answers[0],
                    "incorrect_answer_1": answers[1],
                    "incorrect_answer_2": answers[2],
                    "incorrect_answer_3": answers[3],
                }
            )
    return records


# --------------------------------------------------------------------------
# Workload definitions.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalFile:
    """A file name looked for in the dataset directory; ``stand_in`` labels a substitute."""

    filename: str
    stand_in: str | None = None


@dataclass(frozen=True)
class HubSource:
    """Arguments for ``datasets.load_dataset``."""

    path: str
    config: str | None
    split: str
    data_files: str | None = None
    revision: str | None = None
    id_column: str | None = None  # None (or absent): ids are "<id_prefix><row>"
    id_prefix: str = ""

    def describe(self) -> str:
        parts = [f"config {self.config}"] if self.config else []
        if self.data_files:
            parts.append(f"file {self.data_files}")
        parts.append(f"split {self.split}")
        if self.revision:
            parts.append(f"revision {self.revision}")
        return f"{self.path} ({', '.join(parts)})"


@dataclass(frozen=True)
class Workload:
    """One prompt set of the study and where to find it."""

    name: str
    title: str
    chat: bool
    local_files: tuple[LocalFile, ...]
    hub: HubSource
    parse: Callable[[Mapping[str, Any]], _Item | None] = field(repr=False, compare=False)
    token_filter: bool = False
    synthetic: Callable[[], list[dict[str, str]]] | None = field(default=None, repr=False, compare=False)
    synthetic_stand_in: str | None = None

    def load(self, n: int, seed: int, dataset_dir: str | Path | None, tokenizer: Any = None) -> WorkloadSample:
        return _load(self, n, seed, dataset_dir, tokenizer)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="cnn_dailymail",
            title="CNN/DailyMail summarisation",
            chat=True,
            local_files=(LocalFile("cnn_dailymail.jsonl"),),
            hub=HubSource("abisee/cnn_dailymail", "3.0.0", "train", id_column="id"),
            parse=_parse_cnn,
        ),
        Workload(
            name="sharegpt",
            title="ShareGPT V3 unfiltered chat",
            chat=True,
            local_files=(LocalFile("sharegpt.jsonl"),),
            hub=HubSource(
                "anon8231489123/ShareGPT_Vicuna_unfiltered",
                None,
                "train",
                data_files="ShareGPT_V3_unfiltered_cleaned_split.json",
                id_column="id",
            ),
            parse=_parse_sharegpt,
            token_filter=True,
        ),
        Workload(
            name="instructcoder",
            title="InstructCoder code editing",
            chat=True,
            local_files=(
                LocalFile("instructcoder.jsonl"),
                LocalFile("instructcoder_editeval.jsonl", STAND_IN_EDITEVAL),
            ),
            hub=HubSource("likaixin/InstructCoder", None, "train", id_column="id", id_prefix="instructcoder-train-"),
            parse=_parse_instructcoder,
        ),
        Workload(
            name="gsm8k",
            title="GSM8K math word problems",
            chat=True,
            local_files=(LocalFile("gsm8k.jsonl"),),
            hub=HubSource("openai/gsm8k", "main", "train", id_prefix="gsm8k-train-"),
            parse=_parse_gsm8k,
        ),
        Workload(
            name="aime",
            title="AIME 2022-24 (raw prompt)",
            chat=False,
            local_files=(
                LocalFile("aime.jsonl"),
                LocalFile("aime24.jsonl", STAND_IN_AIME24),
            ),
            hub=HubSource("AI-MO/aimo-validation-aime", None, "train", id_column="id", id_prefix="aime-"),
            parse=_parse_aime,
        ),
        Workload(
            name="gpqa",
            title="GPQA-Main four-choice science",
            chat=True,
            local_files=(LocalFile("gpqa.jsonl"),),
            hub=HubSource("Idavidrein/gpqa", "gpqa_main", "train", id_column="Record ID", id_prefix="gpqa-"),
            parse=_parse_gpqa,
            synthetic=synthetic_gpqa_records,
            synthetic_stand_in=STAND_IN_GPQA_SYNTHETIC,
        ),
    )
}


# --------------------------------------------------------------------------
# Record tables: a local JSONL file or a hub dataset, read row by row.
# --------------------------------------------------------------------------


class _ListTable:
    """Parsed records held in memory (local files, synthetic items)."""

    def __init__(self, ids: list[str], items: list[_Item | None]):
        self.ids = ids
        self._items = items

    def item(self, row: int) -> _Item | None:
        return self._items[row]


class _HubTable:
    """A ``datasets.Dataset``; rows are parsed only when sampled."""

    def __init__(self, workload: Workload, ds: Any):
        self._workload = workload
        self._ds = ds
        spec = workload.hub
        n_rows = len(ds)
        columns = list(getattr(ds, "column_names", ()) or ())
        if spec.id_column and spec.id_column in columns:
            raw = [str(x) for x in ds[spec.id_column]]
            counts: dict[str, int] = {}
            for rid in raw:
                counts[rid] = counts.get(rid, 0) + 1
            # Duplicated ids get the row number so that every id stays unique and stable.
            self.ids = [rid if counts[rid] == 1 else f"{rid}#{row}" for row, rid in enumerate(raw)]
        else:
            self.ids = [f"{spec.id_prefix}{row}" for row in range(n_rows)]

    def item(self, row: int) -> _Item | None:
        try:
            return self._workload.parse(self._ds[row])
        except _FieldError as exc:
            raise WorkloadError(f"hub:{self._workload.hub.path} row {row}: {exc}") from None


def _read_jsonl(workload: Workload, path: Path) -> tuple[_ListTable, str]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    checksum = hashlib.sha256(data).hexdigest()
    ids: list[str] = []
    items: list[_Item | None] = []
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WorkloadError(f"{path}:{lineno}: not valid UTF-8 (byte {exc.start + 1})") from None
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{path}:{lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(rec, dict):
            raise WorkloadError(f"{path}:{lineno}: expected a JSON object, got {_describe(rec)}")
        try:
            item = workload.parse(rec)
        except _FieldError as exc:
            raise WorkloadError(f"{path}:{lineno}: {exc}") from None
        rid = (item.id if item is not None else None) or _id_field(rec, "id") or f"{path.stem}:{lineno}"
        if rid in first_line:
            raise WorkloadError(f"{path}:{lineno}: duplicate id {rid!r} (first on line {first_line[rid]})")
        first_line[rid] = lineno
        ids.append(rid)
        items.append(item)
    if not ids:
        raise WorkloadError(f"{path}: no records")
    return _ListTable(ids, items), checksum


def _synthetic_table(workload: Workload) -> tuple[_ListTable, str]:
    assert workload.synthetic is not None
    records = workload.synthetic()
    blob = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    items = [workload.parse(r) for r in records]
    ids = [r["id"] for r in records]
    return _ListTable(ids, items), hashlib.sha256(blob.encode("utf-8")).hexdigest()


_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _open_hub(workload: Workload) -> tuple[_HubTable, str, str]:
    """Load the hub dataset; returns (table, revision, checksum). Raises _HubFailure with the reason."""
    spec = workload.hub
    try:
        import datasets  # optional: only the hub fallback needs it
    except ImportError as exc:
        raise _HubFailure(f"the 'datasets' package is not importable ({_one_line(exc)})") from None
    kwargs: dict[str, Any] = {"split": spec.split}
    if spec.config is not None:
        kwargs["name"] = spec.config
    if spec.data_files is not None:
        kwargs["data_files"] = spec.data_files
    if spec.revision is not None:
        kwargs["revision"] = spec.revision
    try:
        ds = datasets.load_dataset(spec.path, **kwargs)
        table = _HubTable(workload, ds)
    except Exception as exc:  # any hub failure means "unavailable", with its reason
        raise _HubFailure(_one_line(exc)) from None
    revision = spec.revision or _cached_revision(ds) or "unpinned"
    fingerprint = getattr(ds, "_fingerprint", None)
    checksum = f"fingerprint:{fingerprint}" if fingerprint else f"revision:{revision}"
    return table, revision, checksum


def _cached_revision(ds: Any) -> str | None:
    """The hub commit recorded in the dataset's cache path, where there is one."""
    try:
        files = ds.cache_files
    except Exception:  # best effort
        return None
    for entry in files or ():
        filename = entry.get("filename", "") if isinstance(entry, Mapping) else ""
        for part in reversed(Path(filename).parts):
            if _SHA_RE.match(part):
                return part
    return None


class _HubFailure(Exception):
    pass


# --------------------------------------------------------------------------
# Sampling.
# --------------------------------------------------------------------------


def _rank(seed: int, ids: Sequence[str]) -> list[int]:
    """Row numbers ordered by sha256(seed:id): order-independent and nested in n."""

    def key(row: int) -> tuple[bytes, int]:
        return hashlib.sha256(f"{seed}:{ids[row]}".encode()).digest(), row

    return sorted(range(len(ids)), key=key)


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of ``text`` as the target tokenizer counts them (``tokenizer(text).input_ids``)."""
    if callable(tokenizer):
        encoded = tokenizer(text)
        ids = getattr(encoded, "input_ids", None)
        if ids is None and isinstance(encoded, Mapping):
            ids = encoded.get("input_ids")
        if ids is None and isinstance(encoded, Sequence) and not isinstance(encoded, str):
            ids = encoded
        if ids is not None:
            return len(ids)
    if hasattr(tokenizer, "encode"):
        return len(tokenizer.encode(text))
    raise TypeError(
        f"cannot count tokens with {type(tokenizer).__name__}: "
        "expected tokenizer(text).input_ids or tokenizer.encode(text)"
    )


def _passes_sharegpt_filter(item: _Item, tokenizer: Any) -> bool:
    prompt_len = count_tokens(tokenizer, item.text)
    if not SHAREGPT_MIN_PROMPT_TOKENS <= prompt_len <= SHAREGPT_MAX_PROMPT_TOKENS:
        return False
    reference_len = count_tokens(tokenizer, item.reference or "")
    return prompt_len + reference_len <= SHAREGPT_MAX_TOTAL_TOKENS


def _sample(workload: Workload, table: Any, n: int, seed: int, tokenizer: Any) -> tuple[Request, ...]:
    picked: list[Request] = []
    if n == 0:
        return ()
    for row in _rank(seed, table.ids):
        item = table.item(row)
        if item is None:
            continue
        if workload.token_filter and not _passes_sharegpt_filter(item, tokenizer):
            continue
        picked.append(Request(table.ids[row], item.text, workload.chat, item.reference))
        if len(picked) == n:
            break
    return tuple(picked)


# --------------------------------------------------------------------------
# Public entry points.
# --------------------------------------------------------------------------


def _load(workload: Workload, n: int, seed: int, dataset_dir: str | Path | None, tokenizer: Any) -> WorkloadSample:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if workload.token_filter and tokenizer is None:
        raise ValueError(
            f"{workload.name}: the study's filter (prompt {SHAREGPT_MIN_PROMPT_TOKENS}..{SHAREGPT_MAX_PROMPT_TOKENS} "
            f"tokens, prompt + reference <= {SHAREGPT_MAX_TOTAL_TOKENS} tokens) "
            "needs the target tokenizer: pass tokenizer="
        )

    if dataset_dir is not None:
        directory = Path(dataset_dir)
        for local in workload.local_files:
            path = directory / local.filename
            if path.is_file():
                table, checksum = _read_jsonl(workload, path)
                requests = _sample(workload, table, n, seed, tokenizer)
                return WorkloadSample(workload.name, requests, f"dir:{path}", checksum, local.stand_in)
        looked = f"looked in {directory}" + ("" if directory.is_dir() else ", no such directory")
    else:
        looked = "no --dataset-dir given"

    try:
        table, revision, checksum = _open_hub(workload)
    except _HubFailure as exc:
        hub_reason = str(exc)
    else:
        requests = _sample(workload, table, n, seed, tokenizer)
        return WorkloadSample(workload.name, requests, f"hub:{workload.hub.path}@{revision}", checksum, None)

    files = " or ".join(local.filename for local in workload.local_files)
    if workload.synthetic is not None:
        log.warning(
            "%s: no %s (%s) and hub %s unavailable (%s); using the stand-in: %s",
            workload.name,
            files,
            looked,
            workload.hub.describe(),
            hub_reason,
            workload.synthetic_stand_in,
        )
        table, checksum = _synthetic_table(workload)
        requests = _sample(workload, table, n, seed, tokenizer)
        return WorkloadSample(workload.name, requests, "synthetic", checksum, workload.synthetic_stand_in)

    raise WorkloadUnavailable(
        f"{workload.name} ({workload.title}): no source available: put {files} in --dataset-dir "
        f"({looked}), or make the hub dataset {workload.hub.describe()} loadable "
        f"(network, or its cache with HF_DATASETS_OFFLINE=1); hub: {hub_reason}"
    )


def load(workload: str, n: int, seed: int, dataset_dir: str | Path | None, tokenizer: Any = None) -> WorkloadSample:
    """Draw ``n`` requests of ``workload`` deterministically from ``seed``.

    ``tokenizer`` (the target model's) is needed for ShareGPT only, whose filter
    counts tokens; other workloads ignore it.
    """
    try:
        spec = WORKLOADS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}") from None
    return spec.load(n, seed, dataset_dir, tokenizer)


def render_prompt(request: Request, tokenizer: Any) -> str:
    """The exact prompt string given to the engine.

    Chat requests go through the tokenizer's chat template as one user message
    with ``add_generation_prompt=True``; raw requests (AIME) are returned as they are.
    """
    if not request.chat:
        return request.text
    if tokenizer is None or not hasattr(tokenizer, "apply_chat_template"):
        raise ValueError(f"request {request.id!r} needs the target tokenizer's chat template (apply_chat_template)")
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": request.text}],
        tokenize=False,
        add_generation_prompt=True,
    )
    if not isinstance(prompt, str):
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(prompt).__name__}, expected str")
    return prompt


def overlap_bleu4(prompt: str, output: str) -> float:
    """Prompt/output overlap: sentence BLEU-4 of ``output`` against ``prompt`` as reference.

    Computed with sacrebleu (default 13a tokenisation, exponential smoothing,
    brevity penalty included) and returned on a 0..1 scale (sacrebleu's score / 100).
    Empty text on either side gives 0.0.
    """
    if not prompt.strip() or not output.strip():
        return 0.0
    import sacrebleu  # imported here so that the loaders do not need it

    score = sacrebleu.sentence_bleu(output, [prompt]).score / 100.0
    return min(1.0, max(0.0, score))
