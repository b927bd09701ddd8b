"""Who may set a tool off, and how often: the person behind a call, the tool's ``trigger``, and
a per-person count of calls per hour.

The person is the sender of the message the turn answers, as the client described them
(:class:`~carrier.types.Author`): their platform id, and ``is_admin``, which only a client sets
(Discord, from the member's permissions in that channel; the API, for the admin token), never
anything a person wrote. A call a model makes for a message is a call that person made.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from carrier.tools.spec import ToolSpec
from carrier.types import Message

__all__ = ["WINDOW_S", "CallLimiter", "Sender", "refusal_for"]

WINDOW_S = 3600.0
"""The limit counts the calls of the last hour."""


@dataclass(frozen=True, slots=True)
class Sender:
    """The person a tool call is made for."""

    platform: str
    platform_id: str
    name: str
    is_admin: bool = False

    @classmethod
    def of(cls, message: Message) -> Sender:
        author = message.author
        return cls(
            platform=message.platform,
            platform_id=author.platform_id,
            name=author.name,
            is_admin=bool(getattr(author, "is_admin", False)),
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sender:
        return cls(
            platform=str(data.get("platform") or ""),
            platform_id=str(data.get("platform_id") or ""),
            name=str(data.get("name") or ""),
            is_admin=bool(data.get("is_admin")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "platform_id": self.platform_id,
            "name": self.name,
            "is_admin": self.is_admin,
        }

    @property
    def key(self) -> str:
        """``platform:id``, as a tool's ``users`` lists people."""
        return f"{self.platform}:{self.platform_id}"

    @property
    def actor(self) -> str:
        """How the audit log names the person: ``discord:ana (80351110224678912)``."""
        return f"{self.platform}:{self.name} ({self.platform_id})"


def refusal_for(spec: ToolSpec, sender: Sender) -> str | None:
    """Why ``sender`` may not set ``spec`` off ("not allowed for this person: ..."), or None."""
    if spec.trigger == "everyone":
        return None
    if spec.trigger == "room_admins":
        if sender.is_admin:
            return None
        who = "the room's admins"
    else:
        if sender.key in spec.users:
            return None
        who = "the people the operator listed"
    return (
        f"tool {spec.name}: not allowed for this person: only {who} may use it; say so, and do "
        "not try again for them"
    )


class CallLimiter:
    """Calls per person and tool in the last hour, in this process (a restart starts afresh;
    the audit log keeps every call). Thread-unsafe by design: one event loop uses it."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._calls: dict[tuple[str, str, str], deque[float]] = {}
        self._seen = 0

    def take(self, agent_id: str, tool: str, person: str, *, limit: int) -> float | None:
        """Count one call if ``person`` has made fewer than ``limit`` calls of ``tool`` in the
        last hour and return None; else count nothing and return the seconds until one is free."""
        now = self._clock()
        self._seen += 1
        if self._seen % 1000 == 0:
            self._prune(now)
        calls = self._calls.setdefault((agent_id, tool, person), deque())
        while calls and now - calls[0] >= WINDOW_S:
            calls.popleft()
        if len(calls) >= limit:
            return WINDOW_S - (now - calls[0])
        calls.append(now)
        return None

    def _prune(self, now: float) -> None:
        for key in [k for k, v in self._calls.items() if not v or now - v[-1] >= WINDOW_S]:
            del self._calls[key]
