"""The turn context passed through the five stages, and the hook types.

A turn is one inbound message being handled. Each stage receives the :class:`Turn`, may change it,
and either passes it on (returns normally) or ends it (calls :meth:`Turn.end`). Hooks run at named
points and return pass, modify or reject, so moderation and plugins plug in without touching the
stages.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from carrier.types import Content, Entity, Memory, MemoryStatus, Message, Room, Usage

if TYPE_CHECKING:
    from carrier.runtime import AgentRuntime

__all__ = [
    "ChunkCallback",
    "Hook",
    "HookPoint",
    "HookResult",
    "Stage",
    "Turn",
    "run_hooks",
]

log = logging.getLogger(__name__)

ChunkCallback = Callable[[str], Awaitable[None]]
"""Receives pieces of the reply text while the model streams."""


class HookPoint(StrEnum):
    BEFORE_INBOUND = "before_inbound"
    """After the message is stored, before anything else; modify changes the text the turn works on."""
    BEFORE_GENERATE = "before_generate"
    """State is composed; modify replaces the prompt's user text."""
    BEFORE_ACTION = "before_action"
    """Once per chosen action (``turn.current_action`` names it); reject skips that action."""
    BEFORE_OUTBOUND = "before_outbound"
    """Once per reply before it is stored and sent; modify replaces the reply text, reject drops it."""
    ON_TURN_END = "on_turn_end"
    """After the turn, whatever its outcome; the result is ignored."""


@dataclass(frozen=True, slots=True)
class HookResult:
    """What a hook decided. Use the constructors: ``HookResult.ok()``, ``.modify(text)``, ``.reject(why)``."""

    action: str = "pass"
    text: str | None = None
    reason: str | None = None

    @classmethod
    def ok(cls) -> HookResult:
        return cls("pass")

    @classmethod
    def modify(cls, text: str) -> HookResult:
        return cls("modify", text=text)

    @classmethod
    def reject(cls, reason: str) -> HookResult:
        return cls("reject", reason=reason)


class Hook(Protocol):
    """A hook: ``async def hook(point, turn) -> HookResult | None`` (None means pass)."""

    def __call__(self, point: HookPoint, turn: Turn, /) -> Awaitable[HookResult | None]: ...


@dataclass
class Turn:
    """Everything one turn knows. Stages read and fill it in order."""

    runtime: AgentRuntime
    message: Message
    on_chunk: ChunkCallback | None = None
    text: str = ""
    """The text the turn works on (the message text, possibly modified by a hook)."""
    room: Room | None = None
    entity: Entity | None = None
    inbound: Memory | None = None
    """The stored inbound message."""
    vector_unsaved: bool = False
    """The inbound's vector was made in this turn and is not stored yet: it is written with the
    message's status when the turn is recorded (:meth:`Store.record_turn`), one write for both."""
    should_respond: bool = False
    respond_reason: str = ""
    state: Any = None
    """The composed :class:`carrier.pipeline.state.State`."""
    prompt: list[Any] = field(default_factory=list)
    """Chat messages sent to the model."""
    response: Any = None
    """The parsed model response (thought, text, actions)."""
    raw_response: str = ""
    current_action: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """Tool calls the model asked for (``{"id", "name", "arguments"}``), not yet run."""
    current_tool_call: dict[str, Any] | None = None
    """The tool call the running tool action handles."""
    tool_messages: list[Any] = field(default_factory=list)
    """The tool-calling exchange so far (assistant calls and tool outputs), for follow-ups."""
    action_results: list[Any] = field(default_factory=list)
    current_reply: Content | None = None
    """The reply the before_outbound hooks are looking at."""
    outbound: list[Content] = field(default_factory=list)
    """Replies decided by the actions, not yet stored."""
    replies: list[Memory] = field(default_factory=list)
    """Replies as stored (what the client sends)."""
    usage: Usage = field(default_factory=Usage)
    offline: bool = False
    ended: str | None = None
    """Why the turn ended early (ignored, rejected, muted, ...); None while it runs."""
    final_status: MemoryStatus = MemoryStatus.PROCESSED
    trace: dict[str, Any] = field(default_factory=dict)
    """What each stage produced, keyed by stage name (for tests, logs and the API)."""
    memo: dict[str, Any] = field(default_factory=dict)
    """What a plugin read in one stage and reads again in a later one of the same turn (the
    summarizer's provider and evaluator share the room's latest summaries), so it is read once.
    Keys are prefixed with the plugin's name."""

    def end(self, reason: str, *, status: MemoryStatus = MemoryStatus.IGNORED) -> None:
        """End the turn: the remaining stages are skipped (the evaluator still closes it)."""
        self.ended = reason
        self.final_status = status


class Stage(Protocol):
    """One link of the chain. ``name`` keys the trace."""

    name: str

    async def process(self, turn: Turn) -> None: ...


async def run_hooks(hooks: list[Hook], point: HookPoint, turn: Turn) -> HookResult:
    """Run the hooks registered for a point in order. The first reject wins; modifies chain (each
    hook sees the text the previous one produced, through the returned result)."""
    final = HookResult.ok()
    for hook in hooks:
        result = await hook(point, turn)
        if result is None or result.action == "pass":
            continue
        if result.action == "reject":
            log.info(
                "hook %r rejected at %s: %s", getattr(hook, "__name__", hook), point, result.reason
            )
            return result
        if result.action == "modify":
            final = result
            if point is HookPoint.BEFORE_INBOUND and result.text is not None:
                turn.text = result.text
        else:
            raise ValueError(
                f"hook returned unknown action {result.action!r}; use HookResult.ok/modify/reject"
            )
    return final
