"""Failures in one line: every error the suite reports names its cause on a single line."""

from __future__ import annotations

import re

SECRET_WORDS = ("password", "secret", "token", "key")  # query parameters that carry one (sslpassword, ...)


def one_line(err: BaseException, limit: int | None = None) -> str:
    """The root cause of an exception chain as 'Type: message', white space folded, cut at `limit`."""
    while err.__cause__ is not None or (err.__context__ is not None and not err.__suppress_context__):
        err = err.__cause__ or err.__context__
    text = f"{type(err).__name__}: {' '.join(str(err).split()) or repr(err)}"
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


# Parts of a pydantic error location that name no field: the mark of an invalid dict key, and the
# member of a union type that was tried ("float" in metrics.x.value.float).
NOT_FIELDS = frozenset({"[key]", "float", "int", "str", "bool", "none", "list[float]", "list[int]"})


def field_path(loc: tuple[str | int, ...]) -> str:
    """A pydantic error location as a field path: ``("cells", 0, "batch_sizes", 1)`` -> ``cells[0].batch_sizes[1]``."""
    path = ""
    for part in loc:
        if part in NOT_FIELDS:
            continue
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


# Control characters but the line feed and tab: C0, DEL and C1 (ESC starts every terminal escape);
# and what reorders or breaks a line without a control character: the bidirectional marks,
# embeddings, overrides and isolates, and the Unicode line and paragraph separators.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text for a terminal with its control characters escaped (\\x1b, \\u202e: not an escape
    sequence, not text drawn right to left): ids, prompts and errors come from files and must not
    drive the terminal."""
    return CONTROL.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )


def on_one_line(text: str) -> str:
    """Text about a file on one line, even where the file's name holds a line feed."""
    return text.replace("\n", "\\n")


class PrintableStream:
    """A text stream that writes printable(text) to `stream` (the CLI's stdout and stderr)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(printable(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def shown_url(url: str) -> str:
    """A URL as the suite prints it, without its secrets: the password of user:password@, and the
    values of query parameters named for one (?sslpassword=, ?token=).  Every URL in a message, on
    the terminal or in a report goes through here (history databases, servers); the rest of the
    text is kept as written."""
    head, mark, query = url.partition("?")
    if (found := re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)(.*)@", head)) and ":" in found[2]:  # to the last @
        head = f"{found[1]}{found[2].partition(':')[0]}:***@{head[found.end() :]}"
    words = "|".join(SECRET_WORDS)
    query = re.sub(rf"((?:^|&)[^=&#]*(?:{words})[^=&#]*=)[^&#]*", r"\1***", query, flags=re.IGNORECASE)
    return head + mark + query
