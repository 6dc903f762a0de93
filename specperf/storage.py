"""Result records on disk: one versioned JSON file per finished scenario, written the moment it exists.

Layout: reports/<run-id>/results/<scenario-id>.json.  Writes are atomic (temp file, then rename),
so a run killed midway keeps every finished scenario intact.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pydantic import ValidationError

from . import __version__, paths
from .messages import field_path
from .records import SCHEMA_VERSION, Record, RunFile, ScenarioResult

R = TypeVar("R", bound=Record)


class ResultFileError(Exception):
    """A result, baseline, run or noise file that cannot be used; the message names the file and the problem."""


def atomic_write_text(path: Path, text: str) -> None:
    """Temp file and rename, so a reader never sees half a file; readable like any new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# A list of numbers only, as json.dumps(indent=2) spreads it over one line per number.
NUMBER_LIST = re.compile(r"\[\s+([-+0-9.eE]+(?:,\s+[-+0-9.eE]+)*)\s+\]")


def atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Indented JSON, with lists of numbers (samples, traces) kept on one line each."""
    text = json.dumps(data, indent=2, sort_keys=True)
    text = NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    atomic_write_text(path, text + "\n")


MAX_FILE_BYTES = 16 * 2**20  # the largest stored file read: a GPU result with traces is well under 1 MiB
MAX_DEPTH = 32  # the deepest nesting of a stored file (a result's is 6)


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    duplicate = next((key for key in keys if keys.count(key) > 1), None)
    if duplicate is not None:
        raise ValueError(f"duplicate key {duplicate!r}")
    return dict(pairs)


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and objects nest in `value` (a number: 0, [] or {}: 1, [[1]]: 2), level by
    level without recursion; counting stops past `limit`."""
    level, deepest = [value], 0
    while deepest <= limit:
        containers = [item for item in level if isinstance(item, (dict, list))]
        if not containers:
            return deepest
        deepest += 1
        level = [child for item in containers for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


def read_bounded_bytes(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (never a FIFO or a device, which would
    hang or never end); anything else is ResultFileError naming the file."""
    import stat

    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ResultFileError(f"{path}: cannot read {what}: not a regular file")
        if info.st_size > limit:
            raise ResultFileError(
                f"{path}: cannot read {what}: {info.st_size} bytes, more than the {limit} this suite reads"
            )
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as err:
        raise ResultFileError(f"{path}: cannot read {what}: {err.strerror}") from None
    if len(data) > limit:
        raise ResultFileError(f"{path}: cannot read {what}: more than the {limit} bytes this suite reads")
    return data


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object of this schema version from a regular file of bounded size and nesting; NaN and
    Infinity (they defeat every comparison) and duplicate keys (which would win?) are refused."""
    data = read_bounded_bytes(path, what)
    try:
        data = json.loads(data.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise ResultFileError(f"{path}: corrupt {what} (not valid JSON: {err})") from None
    except RecursionError:
        raise ResultFileError(f"{path}: corrupt {what} (nested more than {MAX_DEPTH} deep)") from None
    if depth(data) > MAX_DEPTH:
        raise ResultFileError(f"{path}: corrupt {what} (nested more than {MAX_DEPTH} deep)")
    if not isinstance(data, dict):
        raise ResultFileError(f"{path}: corrupt {what} (expected a JSON object)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultFileError(
            f"{path}: {what} has schema version {version!r}; this suite reads version {SCHEMA_VERSION}"
        )
    return data


def validation_problem(err: ValidationError) -> str:
    """pydantic's first complaint as 'field.path: problem'."""
    first = err.errors()[0]
    where = field_path(tuple(first["loc"]))
    return f"{where or 'file'}: {first['msg']}"


def read_record(path: Path, model: type[R], what: str) -> R:
    """A stored file as its typed record; any problem is one ResultFileError line naming file and field."""
    data = read_json(path, what)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ResultFileError(f"{path}: corrupt {what} ({validation_problem(err)})") from None


def write_record(path: Path, record: Record) -> Path:
    atomic_write_json(path, record.to_json())
    return path


def new_run_id(profile: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{profile}"


def inside(folder: Path, *parts: str) -> Path:
    """folder/parts..., refused when the parts would lead out of folder (ids and keys come from files)
    or pass through a symbolic link (a link inside the folder may point anywhere)."""
    path = Path(folder).joinpath(*parts)
    for count in range(1, len(parts) + 1):
        step = Path(folder).joinpath(*parts[:count])
        if step.is_symlink():
            raise ResultFileError(f"{step}: refusing to read or write through a symbolic link")
    if any(
        part in ("", ".", "..") or "/" in part or "\\" in part for part in parts
    ) or not path.resolve().is_relative_to(Path(folder).resolve()):
        raise ResultFileError(f"{path}: refusing a path outside {folder}")
    return path


def result_path(run_dir: Path, scenario_id: str) -> Path:
    return inside(Path(run_dir), "results", f"{scenario_id}.json")


def write_result(run_dir: Path, result: ScenarioResult) -> Path:
    return write_record(result_path(run_dir, result.id), result)


def read_result(path: Path) -> ScenarioResult:
    """A result file, which the suite names after its scenario: one under another name (a copy) would
    put a second result of that scenario beside the first, and one of the two would be shown."""
    result = read_record(path, ScenarioResult, "result")
    if path.name != f"{result.id}.json":
        raise ResultFileError(f"{path}: holds scenario {result.id}, whose result is {path.with_name(result.id)}.json")
    return result


def load_results(run_dir: Path) -> list[ScenarioResult]:
    """Every result of a run directory, in scenario-id order; the first unusable file raises."""
    folder = Path(run_dir) / "results"
    if not folder.is_dir():
        raise ResultFileError(f"{run_dir}: not a run directory (no results/ folder)")
    return [read_result(path) for path in sorted(folder.glob("*.json"))]


@dataclass
class RunDir:
    """What one run directory holds that can be used, and a line for each file that cannot."""

    path: Path
    run: RunFile | None = None
    results: list[ScenarioResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_run_dir(run_dir: Path) -> RunDir:
    """run.json and every readable result of a run directory; unusable files are skipped and named.

    A folder with neither results/ nor run.json is not a run directory: ResultFileError."""
    run_dir = Path(run_dir)
    found = RunDir(run_dir)
    run_file, folder = run_dir / "run.json", run_dir / "results"
    if not run_file.exists() and not folder.is_dir():
        raise ResultFileError(f"{run_dir}: not a run directory (no results/ folder)")
    if run_file.exists():
        try:
            found.run = read_record(run_file, RunFile, "run file")
        except ResultFileError as err:
            found.problems.append(str(err))
    if not folder.is_dir():
        found.problems.append(f"{run_dir}: no results/ folder (the run stored no result)")
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            found.results.append(read_result(path))
        except ResultFileError as err:
            found.problems.append(str(err))
    return found


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=paths.suite_root(), capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=paths.suite_root(),
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def suite_provenance() -> dict[str, Any]:
    return {
        "suite_version": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def parse_time(text: str | None) -> datetime.datetime | None:
    """An ISO timestamp (naive ones taken as UTC), or None when absent or unreadable."""
    if text is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
