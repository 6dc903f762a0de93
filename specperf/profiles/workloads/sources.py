"""Where a workload's records come from: a local JSONL file, the Hugging Face hub, or the
synthetic GPQA stand-in. Each source gives a table of record ids and parses a row on request."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .prompts import FieldError, Item, describe, id_field

if TYPE_CHECKING:
    from .catalog import Workload


class WorkloadError(Exception):
    """A workload source exists but is malformed (names the file and line)."""


class HubFailure(Exception):
    """The hub dataset cannot be loaded; the message says why."""


# --------------------------------------------------------------------------
# Record tables: a local JSONL file or a hub dataset, read row by row.
# --------------------------------------------------------------------------


class ListTable:
    """Parsed records held in memory (local files, synthetic items)."""

    def __init__(self, ids: list[str], items: list[Item | None]):
        self.ids = ids
        self._items = items

    def item(self, row: int) -> Item | None:
        return self._items[row]


class HubTable:
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

    def item(self, row: int) -> Item | None:
        try:
            return self._workload.parse(self._ds[row])
        except FieldError as exc:
            raise WorkloadError(f"hub:{self._workload.hub.path} row {row}: {exc}") from None


def read_jsonl(workload: Workload, path: Path) -> tuple[ListTable, str]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    checksum = hashlib.sha256(data).hexdigest()
    ids: list[str] = []
    items: list[Item | None] = []
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
            raise WorkloadError(f"{path}:{lineno}: expected a JSON object, got {describe(rec)}")
        try:
            item = workload.parse(rec)
        except FieldError as exc:
            raise WorkloadError(f"{path}:{lineno}: {exc}") from None
        rid = (item.id if item is not None else None) or id_field(rec, "id") or f"{path.stem}:{lineno}"
        if rid in first_line:
            raise WorkloadError(f"{path}:{lineno}: duplicate id {rid!r} (first on line {first_line[rid]})")
        first_line[rid] = lineno
        ids.append(rid)
        items.append(item)
    if not ids:
        raise WorkloadError(f"{path}: no records")
    return ListTable(ids, items), checksum


def synthetic_table(workload: Workload) -> tuple[ListTable, str]:
    assert workload.synthetic is not None
    records = workload.synthetic()
    blob = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    items = [workload.parse(r) for r in records]
    ids = [r["id"] for r in records]
    return ListTable(ids, items), hashlib.sha256(blob.encode("utf-8")).hexdigest()


_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def open_hub(workload: Workload) -> tuple[HubTable, str, str]:
    """Load the hub dataset; returns (table, revision, checksum). Raises HubFailure with the reason."""
    spec = workload.hub
    try:
        import datasets  # optional: only the hub fallback needs it
    except ImportError as exc:
        raise HubFailure(f"the 'datasets' package is not importable ({_one_line(exc)})") from None
    kwargs: dict[str, Any] = {"split": spec.split}
    if spec.config is not None:
        kwargs["name"] = spec.config
    if spec.data_files is not None:
        kwargs["data_files"] = spec.data_files
    if spec.revision is not None:
        kwargs["revision"] = spec.revision
    try:
        ds = datasets.load_dataset(spec.path, **kwargs)
        table = HubTable(workload, ds)
    except Exception as exc:  # any hub failure means "unavailable", with its reason
        raise HubFailure(_one_line(exc)) from None
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
