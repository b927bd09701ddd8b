"""Which platforms' turns a process settles: the scope of a recovery (:mod:`carrier.outbox`).

A process settles what it serves, and only that: every platform (one process), the API's (the
web process), a platform whose connection it took over (a worker, from that moment on), or one
part of an account (the shards of a Discord bot it took over: ``where`` admits the messages that
came through them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from carrier.types import Memory

__all__ = ["EVERY", "Platforms"]


@dataclass(frozen=True)
class Platforms:
    """Which platforms' messages a recovery settles: those in ``only`` (None: every one), less
    those in ``exclude``; and, of those, only the inbound messages ``where`` admits, when given
    (one part of an account: the shards of a Discord bot a process took over). A process
    settles what it serves, and only that."""

    only: frozenset[str] | None = None
    exclude: frozenset[str] = field(default_factory=frozenset)
    where: Callable[[Memory], bool] | None = None

    @classmethod
    def of(cls, *names: str, where: Callable[[Memory], bool] | None = None) -> Platforms:
        return cls(only=frozenset(names), where=where)

    def __contains__(self, platform: object) -> bool:
        return (self.only is None or platform in self.only) and platform not in self.exclude

    def admits(self, inbound: Memory) -> bool:
        """Whether an inbound message is one of these platforms' (and of the part, if any)."""
        return inbound.content.source in self and (self.where is None or self.where(inbound))

    @property
    def empty(self) -> bool:
        return self.only is not None and not (self.only - self.exclude)


EVERY = Platforms()
"""Every platform: what a process that serves them all (``carrier run``, ``carrier chat``)
settles."""
