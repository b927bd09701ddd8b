"""What the ``carrier`` sub-commands share: running their coroutine, Carrier's errors as a message
on stderr and an exit code (1: the user's mistake, 2: a runtime failure), logging, and loading a
character file. Imports nothing heavy: every command module imports it."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

if TYPE_CHECKING:
    from carrier.character import Character
    from carrier.settings import Settings

__all__ = ["err", "explain_failure", "load_or_exit", "quiet_ml", "run_or_exit", "setup_logging"]

T = TypeVar("T")


def err(message: str) -> None:
    typer.echo(message, err=True)


def run_or_exit(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``; a :class:`UserError` exits 1 and any other :class:`CarrierError`
    exits 2, each with its message (no traceback)."""
    from carrier.errors import CarrierError, UserError

    try:
        return asyncio.run(main)
    except UserError as exc:
        err(str(exc))
        raise typer.Exit(1) from None
    except CarrierError as exc:
        err(str(exc))
        raise typer.Exit(2) from None


class _CurrentStderr:
    """``sys.stderr`` as it is when a record is written, not when logging was set up: while a
    spinner runs (:mod:`carrier.cli._progress`) rich redirects it, so a log line prints above
    the spinner instead of running into its line."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def setup_logging(level: str, *, settings: Settings | None = None) -> None:
    """Logging for a command, with secrets kept out of it: the process-wide redactor is
    configured from the environment (and ``settings``, which may hold values from ``.env``) and
    a redacting filter goes on the root logger and its handlers, so no record (tracebacks and
    chained exceptions included) writes a key. Nothing is printed while configuring."""
    from carrier.safety.known import configure_redactor
    from carrier.safety.logs import install_log_redaction

    numeric = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(
        level=numeric,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=_CurrentStderr(),
    )
    configure_redactor(environ=os.environ, settings=settings)
    install_log_redaction()
    # Libraries' warnings (deprecations, pydantic's notes on their types) are for their authors:
    # logged, shown only with CARRIER_LOG_LEVEL=DEBUG, never printed among a persona's replies.
    # Carrier's own code reports through logging, not warnings.
    logging.captureWarnings(True)
    logging.getLogger("py.warnings").setLevel(
        logging.DEBUG if numeric <= logging.DEBUG else logging.ERROR
    )
    for noisy in (
        "httpx",
        "LiteLLM",
        "litellm",
        "sentence_transformers",
        "transformers",
        "aiosqlite",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def quiet_ml() -> None:
    """Nothing downloads at run time: the embedding model is a package, litellm's price map is
    the bundled one."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def load_or_exit(path: Path) -> Character:
    from carrier.character import load_character
    from carrier.errors import CharacterError

    try:
        return load_character(path)
    except CharacterError as exc:
        err(str(exc))
        raise typer.Exit(2) from None


def explain_failure(exc: BaseException) -> str | None:
    """What to print, instead of a traceback, for a failure any command may meet before it gets
    going: one of Carrier's own errors, or an invalid ``CARRIER_*`` setting. None for anything
    else (a bug, which keeps its traceback)."""
    from carrier.errors import CarrierError

    if isinstance(exc, CarrierError):
        return str(exc)
    from pydantic import ValidationError

    from carrier import settings

    if isinstance(exc, ValidationError):
        model = getattr(settings, exc.title, None)  # the model it was raised for
        if isinstance(model, type) and issubclass(model, settings.Settings):
            return str(settings.explain_settings(exc))
    return None
