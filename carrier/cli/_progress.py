"""A sign of life on stderr while something slow runs (loading the embedding model, starting
agents): a spinner on a terminal, one line otherwise (logs, pipes, CI)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["working"]


@contextmanager
def working(message: str) -> Iterator[None]:
    """Shows ``message`` while the block runs. On a terminal a spinner, cleared at the end;
    elsewhere ``message...`` once, then ``done (N s)`` when it took a second or more."""
    started = time.monotonic()
    if sys.stderr.isatty():
        from rich.console import Console

        with Console(stderr=True).status(message):
            yield
        return
    print(f"{message}...", file=sys.stderr, flush=True)
    yield
    took = time.monotonic() - started
    if took >= 1:
        print(f"{message}: done ({took:.0f} s)", file=sys.stderr, flush=True)
