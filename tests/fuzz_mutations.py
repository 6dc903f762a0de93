"""The fuzz pass's mutations (tests/fuzz_files.py): one file damaged as disks, tools and hands damage
files: a value replaced by one of another type or moved near (two fields that disagree), a key
deleted, bytes cut, changed or made invalid UTF-8; a profile's line replaced, deleted or doubled; a
history row's column set to a value of any type (SQLite keeps any type in any column)."""

from __future__ import annotations

import contextlib
import copy
import json
import random
import sqlite3
from pathlib import Path

HOSTILE = (
    None, "", "text", "a\nb: pass", "\u202e\u2028", -1, 0, 1.5, 2**63, 1e308, -1e-300, True,
    [], {}, [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], "x" * 5000, {"a": [1, None]},
)  # fmt: skip


def leaves(value, path=()):
    """Every path into nested dicts and lists (two items of a list), the containers' too."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:2]):
            yield from leaves(item, path + (index,))
    if path:
        yield path


def _set(data, path, value, delete=False):
    target = data
    for part in path[:-1]:
        target = target[part]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value


def mutate_data(data, rng: random.Random, under: tuple = ()):
    """A copy of parsed `data` with one to three values (at or below `under`) changed: replaced by a
    value of another type, moved near (a number negated, scaled or stepped; a list cut or grown; a
    string lengthened), or deleted; and what was done."""
    data = copy.deepcopy(data)
    done = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        paths = [p for p in leaves(data) if p[: len(under)] == under and len(p) > len(under)]
        path = rng.choice(paths)
        where = ".".join(map(str, path))
        old = _get(data, path)
        if isinstance(path[-1], str) and rng.random() < 0.15:
            _set(data, path, None, delete=True)
            done.append(f"{where} deleted")
            continue
        value = near(old, rng) if rng.random() < 0.5 else None
        if value is None:
            value = copy.deepcopy(rng.choice(HOSTILE))
        _set(data, path, value)
        done.append(f"{where} = {json.dumps(value)[:40]}")
    return data, "; ".join(done)


def near(value, rng: random.Random):
    """A value of the same type near `value` (None where there is none): what a plausible file
    holds where two fields disagree."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return rng.choice((-value, value * 1000, value + 1, value - 1, value / 1000 if value else 1e-9))
    if isinstance(value, list) and value:
        return rng.choice((value[:-1], value + value[-1:], value[::-1]))
    if isinstance(value, str):
        return rng.choice((value + "x", value.upper(), value[: len(value) // 2]))
    return None


def _get(data, path):
    for part in path:
        data = data[part]
    return data


def mutate_bytes(raw: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Damage to the bytes themselves: cut short, a byte changed, invalid UTF-8, or emptied."""
    how = rng.choice(("truncated", "byte", "utf8", "empty"))
    at = rng.randrange(max(1, len(raw)))
    if how == "truncated":
        return raw[:at], f"cut at byte {at}"
    if how == "byte":
        return raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1 :], f"byte {at} changed"
    if how == "utf8":
        return raw[:at] + b"\xff\xfe" + raw[at:], f"invalid UTF-8 at byte {at}"
    return b"", "emptied"


def mutate_json_file(path: Path, rng: random.Random, under: tuple = ()) -> str:
    raw = path.read_bytes()
    if not under and rng.random() < 0.25:
        mutated, how = mutate_bytes(raw, rng)
        path.write_bytes(mutated)
        return how
    data, how = mutate_data(json.loads(raw), rng, under)
    path.write_text(json.dumps(data))
    return how


def mutate_jsonl_file(path: Path, rng: random.Random) -> str:
    lines = path.read_text().splitlines()
    number = rng.randrange(len(lines))
    if rng.random() < 0.25:
        mutated, how = mutate_bytes(lines[number].encode(), rng)
        lines[number] = mutated.decode("utf-8", "surrogateescape")
        path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
        return f"line {number + 1}: {how}"
    data, how = mutate_data(json.loads(lines[number]), rng)
    lines[number] = json.dumps(data)
    path.write_text("\n".join(lines) + "\n")
    return f"line {number + 1}: {how}"


def toml_value(value) -> str:
    return json.dumps(value) if value is not None and not isinstance(value, dict) else "{}"


def mutate_toml_file(path: Path, rng: random.Random) -> str:
    """A line of the profile replaced: a value by a hostile one, or the line deleted or doubled."""
    lines = path.read_text().splitlines()
    candidates = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    number = rng.choice(candidates)
    line = lines[number]
    how = rng.choice(("value", "value", "deleted", "doubled", "bytes"))
    if how == "value" and "=" in line:
        key = line.split("=", 1)[0]
        value = rng.choice([v for v in HOSTILE if v is not None])
        lines[number] = f"{key}= {toml_value(value)}"
        how = f"{key.strip()} = {toml_value(value)[:40]}"
    elif how == "deleted":
        del lines[number]
    elif how == "doubled":
        lines.insert(number, line)
    else:
        mutated, how = mutate_bytes(line.encode(), rng)
        lines[number] = mutated.decode("utf-8", "surrogateescape")
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    return f"line {number + 1} ({line.strip()[:30]}): {how}"


SQL_HOSTILE = (None, b"\x00\xff", "text", "a\nb", "\u202e", -1, 0, 2**63 - 1, 1e308, float("nan"), "2026-13-45")


def mutate_history(path: Path, rng: random.Random) -> str:
    """One column of one row of the history set to a value of any type (SQLite keeps any type in any
    column), or the value a column of another type would hold."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        table = rng.choice([t for t in tables if t != "alembic_version"])
        columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
        rows = [r for (r,) in db.execute(f"SELECT rowid FROM {table}")]
        column, row = rng.choice(columns), rng.choice(rows)
        for value in rng.sample(SQL_HOSTILE, len(SQL_HOSTILE)):
            try:
                db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, row))  # noqa: S608 - schema's names
                return f"{table}.{column} of row {row} = {value!r:.40}"
            except sqlite3.IntegrityError:  # NOT NULL or UNIQUE: SQLite keeps these
                continue
    return f"{table}.{column} of row {row}: no value taken"
