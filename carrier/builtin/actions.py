"""Built-in actions, after ElizaOS's bootstrap plugin: REPLY, NONE, IGNORE, CONTINUE,
MUTE_ROOM/UNMUTE_ROOM and FOLLOW_ROOM/UNFOLLOW_ROOM.

The model's own text is sent by the action manager (once); these handlers do the side effects.
"""

from __future__ import annotations

from typing import Any

from carrier.errors import ProviderError
from carrier.pipeline.base import Turn
from carrier.plugins import Action, ActionResult
from carrier.types import RoomKind, RoomState

__all__ = ["MAX_CONTINUES", "builtin_actions"]

MAX_CONTINUES = 2
"""How many extra messages CONTINUE may add in one turn (ElizaOS bounds it too)."""


async def _noop(turn: Turn) -> ActionResult:
    return ActionResult(action=turn.current_action or "REPLY")


async def _ignore(turn: Turn) -> ActionResult:
    return ActionResult(action="IGNORE", data={"reason": "the agent chose not to answer"})


async def _continue(turn: Turn) -> ActionResult:
    replies: list[str] = []
    previous = turn.response.text
    stopped: str | None = None
    for _ in range(MAX_CONTINUES):
        try:
            followup = await turn.runtime.generate_continuation(turn, [previous, *replies])
        except ProviderError as exc:
            # The turn's answer is already written: a continuation the model cannot give ends
            # the turn with what it has, rather than failing what was said.
            stopped = str(exc)
            break
        if not followup.text.strip() or followup.text.strip() in (previous, *replies):
            break
        replies.append(followup.text)
        if "CONTINUE" not in [a.upper() for a in followup.actions]:
            break
    data: dict[str, Any] = {"continued": len(replies)}
    if stopped is not None:
        data["stopped"] = stopped
    return ActionResult(action="CONTINUE", replies=replies, data=data)


def _in_group_room(turn: Turn) -> bool:
    return turn.room is not None and turn.room.kind in (RoomKind.GROUP, RoomKind.THREAD)


def _room_state_action(
    name: str,
    target: RoomState | None,
    when: RoomState | None,
    description: str,
    similes: tuple[str, ...],
) -> Action:
    async def validate(turn: Turn) -> bool:
        if not _in_group_room(turn):
            return False
        assert turn.room is not None
        current = await turn.runtime.store.get_room_state(turn.runtime.agent_id, turn.room.id)
        if target is None:
            return current is when
        return current is not target

    async def handler(turn: Turn) -> ActionResult:
        assert turn.room is not None
        await turn.runtime.store.set_room_state(turn.runtime.agent_id, turn.room.id, target)
        return ActionResult(
            action=name, data={"room_id": turn.room.id, "state": target.value if target else None}
        )

    return Action(
        name=name, description=description, handler=handler, validate=validate, similes=similes
    )


def builtin_actions() -> list[Action]:
    return [
        Action(
            name="REPLY",
            description="Send your text as a reply. The default when you are answering.",
            handler=_noop,
            similes=("RESPOND", "ANSWER", "SEND_MESSAGE"),
        ),
        Action(
            name="NONE",
            description="Answer with your text and do nothing else.",
            handler=_noop,
            similes=("NO_ACTION", "NO_RESPONSE_ACTION"),
        ),
        Action(
            name="IGNORE",
            description="Send nothing: the conversation is over, or the message is not for you or is abusive.",
            handler=_ignore,
            similes=("STOP_TALKING", "END_CONVERSATION"),
            examples=("user: ok bye / agent: (IGNORE)",),
        ),
        Action(
            name="CONTINUE",
            description="Send your text, then keep talking with one more message (only when you have more to say).",
            handler=_continue,
            similes=("ELABORATE", "KEEP_TALKING"),
        ),
        _room_state_action(
            "MUTE_ROOM",
            RoomState.MUTED,
            None,
            "Stop answering in this room unless mentioned by name (when asked to be quiet).",
            ("SHUT_UP", "STOP_RESPONDING"),
        ),
        _room_state_action(
            "UNMUTE_ROOM",
            None,
            RoomState.MUTED,
            "Start answering in this muted room again (when asked to come back).",
            ("UNSHUT_UP",),
        ),
        _room_state_action(
            "FOLLOW_ROOM",
            RoomState.FOLLOWED,
            None,
            "Take part in everything said in this room, not only when addressed (when asked to join in).",
            ("FOLLOW_CHAT", "JOIN_CONVERSATION"),
        ),
        _room_state_action(
            "UNFOLLOW_ROOM",
            None,
            RoomState.FOLLOWED,
            "Go back to answering only when addressed in this room.",
            ("UNFOLLOW_CHAT", "LEAVE_CONVERSATION"),
        ),
    ]
