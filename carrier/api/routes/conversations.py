"""Every conversation of an agent, for an operator: its rooms and a room's turns, traced.

``GET /agents/{agent_id}/rooms`` lists the rooms the agent talked in lately (any platform), with
their people; ``GET /agents/{agent_id}/rooms/{room_id}/history`` reads one room, both sides, with
what each turn's first reply keeps of it (the evaluator stage stores it): the model's thought,
the actions and their outcomes, the time each stage took, the model and its usage and cost. A
turn that sent nothing shows as its message's status and error. The web console's
Conversations view reads both; ``GET /agents/{agent_id}/messages`` (rooms.py) stays the
conversation as an API caller sees it, without the private parts of a turn.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from carrier.api.auth import Principal, agent_access
from carrier.api.errors import ApiError, error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.schemas import ID_PATTERN, IsoDatetime
from carrier.api.state import ApiState, api_state
from carrier.memory.activity import recent_rooms
from carrier.memory.base import Store
from carrier.types import Entity, Memory, MemoryKind, MemoryStatus, RoomKind, stable_id

__all__ = ["HistoryItem", "HistoryPage", "RoomOut", "RoomPage", "router"]

router = APIRouter(prefix="/agents", tags=["conversations"], responses=error_responses(401, 429))

State = Annotated[ApiState, Depends(api_state)]
Access = Annotated[Principal, Depends(agent_access)]
RoomId = Annotated[str, Path(pattern=ID_PATTERN, description="The Carrier room id.")]


class PersonRef(BaseModel):
    """Someone who took part in a room."""

    entity_id: str
    name: str
    """Their first known name, else their platform id, else the entity id."""
    platform: str | None = None
    platform_id: str | None = None


class RoomOut(BaseModel):
    room_id: str
    platform: str | None = None
    """Where the room is (``discord``, ``instagram``, ``api``, ...); None if its record is gone."""
    platform_id: str | None = None
    name: str | None = None
    kind: RoomKind | None = None
    last_at: datetime
    """When its newest message was written."""
    messages: int
    """Messages read in it while listing (its recent ones; not a total)."""
    people: list[PersonRef]
    """Who took part (the agent itself left out), latest speaker first."""


class RoomPage(BaseModel):
    items: list[RoomOut]
    """Most recently active first."""
    next_before: datetime | None = None
    """Pass as ``before`` for rooms silent since then; null when every room was listed. A room
    active on both sides of that time can appear on both pages."""


class ActionOut(BaseModel):
    action: str
    ok: bool
    error: str | None = None


class HistoryItem(BaseModel):
    """One message of the room, with its turn's trace when it is the turn's first reply."""

    id: str
    role: Literal["user", "agent"]
    entity_id: str
    speaker: str
    text: str
    status: MemoryStatus
    error: str | None = None
    """Why a message failed (or a note on its delivery)."""
    in_reply_to: str | None = None
    created_at: datetime
    thought: str | None = None
    """The model's private reasoning (a turn's first reply; never sent to the platform)."""
    model: str | None = None
    usage: dict[str, Any] | None = None
    """Tokens and cost in USD of the turn's model calls: prompt_tokens, completion_tokens,
    cost_usd, calls."""
    actions: list[ActionOut] = Field(default_factory=list)
    """The actions the turn ran, with their outcomes."""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Milliseconds each stage took before the reply was stored (receive, message, state,
    generate, actions)."""


class HistoryPage(BaseModel):
    room: RoomOut | None = None
    """The room (null on a later page)."""
    items: list[HistoryItem]
    """Oldest first: the latest ``limit`` messages (before ``before``)."""
    next_before: datetime | None = None


async def _people(store: Store, entity_ids: list[str], agent_entity: str) -> list[PersonRef]:
    people = []
    for entity_id in entity_ids:
        if entity_id == agent_entity:
            continue
        entity: Entity | None = await store.get_entity(entity_id)
        if entity is None:
            people.append(PersonRef(entity_id=entity_id, name=entity_id))
            continue
        people.append(
            PersonRef(
                entity_id=entity_id,
                name=entity.names[0] if entity.names else entity.platform_id or entity_id,
                platform=entity.platform,
                platform_id=entity.platform_id,
            )
        )
    return people


@router.get(
    "/{agent_id}/rooms",
    response_model=RoomPage,
    summary="List an agent's rooms, most recently active first",
    responses=error_responses(403, 404, 422),
)
async def list_rooms(
    agent_id: AgentId,
    state: State,
    _: Access,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        IsoDatetime | None, Query(description="Only rooms with messages before this (a cursor).")
    ] = None,
) -> RoomPage:
    """Every platform's rooms (Discord channels and DMs, Instagram threads, API and console
    conversations) by their last message, with the people in them."""
    await state.manager.get(agent_id)
    store = state.manager.store
    scan = await recent_rooms(store, agent_id=agent_id, limit=limit, before=before)
    records = await store.get_rooms([r.room_id for r in scan.rooms])
    agent_entity = stable_id(agent_id, "agent")
    items = []
    for activity in scan.rooms:
        room = records.get(activity.room_id)
        members = list(activity.speakers)
        for entity_id in await store.list_participants(activity.room_id):
            if entity_id not in activity.speakers:
                members.append(entity_id)
        items.append(
            RoomOut(
                room_id=activity.room_id,
                platform=room.platform if room else None,
                platform_id=room.platform_id if room else None,
                name=room.name if room else None,
                kind=room.kind if room else None,
                last_at=activity.last_at,
                messages=activity.messages,
                people=await _people(store, members, agent_entity),
            )
        )
    return RoomPage(items=items, next_before=scan.next_before)


def _dict(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else empty (metadata is whatever was stored)."""
    return value if isinstance(value, dict) else {}


def _item(memory: Memory, agent_entity: str, *, thought: bool) -> HistoryItem:
    content = memory.content
    meta = content.metadata
    role: Literal["user", "agent"] = "agent" if memory.entity_id == agent_entity else "user"
    speaker = meta.get("speaker")
    trace = _dict(meta.get("trace"))
    actions = [
        ActionOut(action=str(a.get("action")), ok=bool(a.get("ok")), error=a.get("error"))
        for a in trace.get("actions") or []
        if isinstance(a, dict)
    ]
    timings = _dict(trace.get("timings_ms"))
    usage = _dict(meta.get("usage")) or None
    model = meta.get("model")
    return HistoryItem(
        id=memory.id,
        role=role,
        entity_id=memory.entity_id,
        speaker=speaker if isinstance(speaker, str) and speaker else role,
        text=content.text,
        status=memory.status,
        error=memory.error,
        in_reply_to=content.in_reply_to,
        created_at=memory.created_at,
        thought=content.thought if thought else None,
        model=model if isinstance(model, str) else None,
        usage=usage,
        actions=actions,
        timings_ms={str(k): float(v) for k, v in timings.items() if isinstance(v, int | float)},
    )


@router.get(
    "/{agent_id}/rooms/{room_id}/history",
    response_model=HistoryPage,
    summary="Read a room's messages with each turn's trace",
    responses=error_responses(403, 404, 422),
)
async def room_history(
    agent_id: AgentId,
    room_id: RoomId,
    state: State,
    who: Access,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        IsoDatetime | None, Query(description="Only messages sent before this (a cursor).")
    ] = None,
) -> HistoryPage:
    """Both sides of the room, oldest first, each turn's first reply with the turn's thought
    (to the admin token only, as ``include_thought`` on messages), actions, stage timings,
    model, tokens and cost."""
    await state.manager.get(agent_id)
    store = state.manager.store
    room = await store.get_room(room_id)
    if room is not None and room.agent_id != agent_id:
        room = None  # another agent's room is not this one's
    found = await store.get_memories(
        agent_id=agent_id,
        room_id=room_id,
        kinds=[MemoryKind.MESSAGE],
        before=before,
        limit=limit + 1,
        embeddings=False,
    )
    if room is None and not found and before is None:
        raise ApiError(
            404,
            "not_found",
            f"agent {agent_id!r} has no room {room_id!r}; GET /agents/{agent_id}/rooms lists them",
        )
    page = found[:limit]
    agent_entity = stable_id(agent_id, "agent")
    head = None
    if before is None:
        speakers = list(dict.fromkeys(m.entity_id for m in page))
        members = speakers + [
            e for e in await store.list_participants(room_id) if e not in speakers
        ]
        head = RoomOut(
            room_id=room_id,
            platform=room.platform if room else None,
            platform_id=room.platform_id if room else None,
            name=room.name if room else None,
            kind=room.kind if room else None,
            last_at=page[0].created_at if page else datetime.min.replace(tzinfo=UTC),
            messages=len(page),
            people=await _people(store, members, agent_entity),
        )
    return HistoryPage(
        room=head,
        items=[_item(m, agent_entity, thought=who.admin) for m in reversed(page)],
        next_before=page[-1].created_at if len(found) > limit else None,
    )
