"""Where a workload's records come from: a local JSONL file, the Hugging Face hub, or a
synthetic stand-in. Each source gives a table of record ids and parses a row on request."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...messages import one_line
from .prompts import FieldError, Item, describe, id_field

if TYPE_CHECKING:
    from .catalog import Workload

Parse = Callable[[Mapping[str, Any]], Item | None]


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

    def __init__(self, workload: Workload, ds: Any, parse: Parse | None = None):
        self._workload = workload
        self._parse = parse or workload.parse
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
            return self._parse(self._ds[row])
        except FieldError as exc:
            raise WorkloadError(f"hub:{self._workload.hub.path} row {row}: {exc}") from None


def read_jsonl(workload: Workload, path: Path, parse: Parse | None = None) -> tuple[ListTable, str]:
    """The file's records, each read by ``parse`` (default: the workload's parser)."""
    parse = parse or workload.parse
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
        except RecursionError:
            raise WorkloadError(f"{path}:{lineno}: invalid JSON: nested too deeply") from None
        if not isinstance(rec, dict):
            raise WorkloadError(f"{path}:{lineno}: expected a JSON object, got {describe(rec)}")
        try:
            item = parse(rec)
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


def _datasets() -> Any:
    try:
        import datasets  # optional: only the hub fallback needs it
    except ImportError as exc:
        raise HubFailure(f"the 'datasets' package is not importable ({one_line(exc, limit=300)})") from None
    return datasets


def _hub_kwargs(spec: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"split": spec.split}
    if spec.config is not None:
        kwargs["name"] = spec.config
    if spec.data_files is not None:
        kwargs["data_files"] = spec.data_files
    if spec.revision is not None:
        kwargs["revision"] = spec.revision
    return kwargs


def open_hub(workload: Workload, parse: Parse | None = None) -> tuple[HubTable, str, str]:
    """Load the hub dataset, its rows read by ``parse`` (default: the workload's parser); returns
    (table, revision, checksum). Raises HubFailure with the reason."""
    spec = workload.hub
    datasets = _datasets()
    kwargs = _hub_kwargs(spec)
    try:
        ds = datasets.load_dataset(spec.path, **kwargs)
        table = HubTable(workload, ds, parse)
    except Exception as exc:  # any hub failure means "unavailable", with its reason
        raise HubFailure(one_line(exc, limit=300)) from None
    revision = spec.revision or _cached_revision(ds) or "unpinned"
    fingerprint = getattr(ds, "_fingerprint", None)
    checksum = f"fingerprint:{fingerprint}" if fingerprint else f"revision:{revision}"
    return table, revision, checksum


def open_hub_stream(
    workload: Workload, seed: int, buffer_size: int
) -> tuple[Iterator[tuple[str, Item | None]], str, str]:
    """The hub dataset as the study read it: streamed, the stream shuffled with ``seed``; returns
    ((id, item) in that order, revision, checksum).  Raises HubFailure with the reason."""
    spec = workload.hub
    datasets = _datasets()
    try:
        stream = datasets.load_dataset(spec.path, streaming=True, **_hub_kwargs(spec))
        shuffled = stream.shuffle(seed=seed, buffer_size=buffer_size)
        first = next(iter(shuffled))  # fails here, not mid-sample, when the hub is out of reach
    except Exception as exc:  # any hub failure means "unavailable", with its reason
        raise HubFailure(one_line(exc, limit=300)) from None

    def rows() -> Iterator[tuple[str, Item | None]]:
        for position, record in enumerate(shuffled):
            try:
                item = workload.parse(record)
            except FieldError as exc:
                raise WorkloadError(f"hub:{spec.path} streamed record {position}: {exc}") from None
            key = record.get(spec.id_column) if spec.id_column else None
            yield (str(key) if key is not None else f"{spec.id_prefix}stream-{position}"), item

    del first
    revision = spec.revision or "unpinned"
    return rows(), revision, f"stream:{spec.path}@{revision}:seed{seed}"


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
