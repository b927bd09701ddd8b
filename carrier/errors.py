"""Carrier's exception tree, split by who must act.

``ConfigError`` and ``CharacterError`` are the user's to fix (bad input); ``ProviderError``,
``StoreError`` and ``ClientError`` are runtime failures. Every message names the thing that is
wrong and, where possible, how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CarrierError",
    "CharacterError",
    "ClientError",
    "ConfigError",
    "Problem",
    "ProviderError",
    "ProviderUnavailable",
    "RuntimeFailure",
    "StoreError",
    "TurnRejected",
    "UserError",
]


class CarrierError(Exception):
    """Base class of every error Carrier raises on purpose."""


class UserError(CarrierError):
    """Something the user gave Carrier (a file, a setting, a flag) is wrong; the user fixes it."""


class ConfigError(UserError):
    """A setting or environment variable is missing or invalid."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem found in a file: where (field path) and what was expected."""

    path: str
    """Dotted field path inside the file, e.g. ``messageExamples.0.1.content.text``; ``""`` for the file."""
    message: str
    """What is wrong and what was expected."""

    def __str__(self) -> str:
        return f"{self.path or '<file>'}: {self.message}"


class CharacterError(UserError):
    """A character file could not be loaded. Carries every problem found, not just the first."""

    def __init__(self, file: str | Path | None, problems: Sequence[Problem]) -> None:
        self.file = str(file) if file is not None else None
        self.problems = list(problems)
        where = self.file or "<character>"
        lines = [f"{where}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class RuntimeFailure(CarrierError):
    """Something failed while running; not the user's input."""


class ProviderError(RuntimeFailure):
    """A model provider call failed (after retries and fallbacks)."""


class ProviderUnavailable(ProviderError):
    """The provider's circuit breaker is open; calls fail fast until it half-opens."""


class StoreError(RuntimeFailure):
    """The store failed to read or write."""


class ClientError(RuntimeFailure):
    """A platform client failed."""


class TurnRejected(CarrierError):
    """A hook or stage ended the turn on purpose (not an error to report as a failure)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)
