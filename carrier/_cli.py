"""What the ``carrier`` sub-commands share: running their coroutine, and Carrier's errors as a
message on stderr and an exit code (1: the user's mistake, 2: a runtime failure)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import typer

from carrier.errors import CarrierError, UserError

__all__ = ["run_or_exit"]

T = TypeVar("T")


def run_or_exit(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``; a :class:`UserError` exits 1 and any other :class:`CarrierError`
    exits 2, each with its message (no traceback)."""
    try:
        return asyncio.run(main)
    except UserError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    except CarrierError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
