"""Failures in one line: every error the suite reports names its cause on a single line."""

from __future__ import annotations


def one_line(err: BaseException, limit: int | None = None) -> str:
    """The root cause of an exception chain as 'Type: message', white space folded, cut at `limit`."""
    while err.__cause__ is not None or (err.__context__ is not None and not err.__suppress_context__):
        err = err.__cause__ or err.__context__
    text = f"{type(err).__name__}: {' '.join(str(err).split()) or repr(err)}"
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."
