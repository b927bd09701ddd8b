"""``GET /agents/{agent_id}/messages``: the history of one conversation held through the API.

``POST /{agent_id}/message`` names its conversation in platform terms (``room_id``, else
``api:<user_id>``, else ``api:<caller>``); the store keeps it under a Carrier room id derived from
that name. This route takes the same names, so a client (the web console after a reload, a script)
can show what was said before without knowing how ids are derived. Other rooms (Discord channels,
Instagram threads) are read through ``GET /agents/{agent_id}/memories?room_id=...&kind=message``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from carrier.api.auth import Principal, agent_access
from carrier.api.errors import error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.schemas import IsoDatetime
from carrier.api.state import ApiState, api_state
from carrier.types import Memory, MemoryKind, MemoryStatus, stable_id

__all__ = ["ConversationMessage", "ConversationPage", "router"]

router = APIRouter(prefix="/agents", tags=["messages"], responses=error_responses(401, 429))


class ConversationMessage(BaseModel):
    """One message of the conversation: the person's or the agent's."""

    id: str
    role: Literal["user", "agent"]
    """``user`` for what was sent to the agent, ``agent`` for its replies."""
    speaker: str
    """The name shown for the message (the sender's ``user_name``, or the persona's name)."""
    text: str
    status: MemoryStatus
    """A person's message: ``processed``, ``ignored`` (not answered), ``failed``, ``received``
    (its turn is still running), ``pending`` (answered, the reply on its way) or
    ``superseded``; a reply: ``sent``, ``pending``/``sending`` (on its way), ``failed`` (not
    delivered) or ``stored`` (written before replies had a delivery state)."""
    in_reply_to: str | None = None
    """For a reply: the id of the message it answers."""
    created_at: datetime


class ConversationPage(BaseModel):
    room_id: str
    """The conversation's Carrier room id (as in ``GET /agents/{agent_id}/memories``)."""
    items: list[ConversationMessage]
    """Oldest first: the latest ``limit`` messages (before ``before``, when given)."""
    next_before: datetime | None = None
    """Pass as ``before`` to read the messages that came earlier; null when there are none."""


def _out(memory: Memory, agent_entity: str) -> ConversationMessage:
    role: Literal["user", "agent"] = "agent" if memory.entity_id == agent_entity else "user"
    speaker = memory.content.metadata.get("speaker")
    return ConversationMessage(
        id=memory.id,
        role=role,
        speaker=speaker if isinstance(speaker, str) and speaker else role,
        text=memory.content.text,
        status=memory.status,
        in_reply_to=memory.content.in_reply_to,
        created_at=memory.created_at,
    )


@router.get(
    "/{agent_id}/messages",
    response_model=ConversationPage,
    summary="Read a conversation held through POST /{agent_id}/message",
    responses=error_responses(403, 404, 422),
)
async def conversation(
    agent_id: AgentId,
    state: Annotated[ApiState, Depends(api_state)],
    who: Annotated[Principal, Depends(agent_access)],
    room_id: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            description="The `room_id` the messages were sent with.",
        ),
    ] = None,
    user_id: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            description="Without `room_id`: the `user_id` they were sent with (the room is then "
            "`api:<user_id>`; without either, the caller's own `api:<token name>`).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        IsoDatetime | None, Query(description="Only messages sent before this (a cursor).")
    ] = None,
) -> ConversationPage:
    """The latest messages of the conversation, both sides, oldest first. The agent need not be
    running. Same access as the memories: the admin, or a token scoped to this agent."""
    await state.manager.get(agent_id)
    # The same room the message route files the conversation under (see messages.py).
    name = room_id or f"api:{user_id or who.name}"
    room = stable_id(agent_id, "api", "room", name)
    found = await state.manager.store.get_memories(
        agent_id=agent_id,
        room_id=room,
        kinds=[MemoryKind.MESSAGE],
        before=before,
        limit=limit + 1,
        embeddings=False,
    )
    page = found[:limit]
    agent_entity = stable_id(agent_id, "agent")
    return ConversationPage(
        room_id=room,
        items=[_out(m, agent_entity) for m in reversed(page)],
        next_before=page[-1].created_at if len(found) > limit else None,
    )
