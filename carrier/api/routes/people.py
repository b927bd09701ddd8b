"""The people an agent knows: who they are, what it keeps about them, and their data.

``GET /agents/{agent_id}/people`` lists them (or finds them by a name, username, platform id or
entity id: :func:`carrier.memory.people.find_people`) with how much is kept about each;
``GET /agents/{agent_id}/people/{entity_id}`` shows one with the facts about them and the
summaries that retell them; ``GET /agents/{agent_id}/memories/export`` downloads the agent's memories, or
one person's, as JSON Lines (:mod:`carrier.memory.rights`: a person's data on request, a
backup). Forgetting a person is ``DELETE /agents/{agent_id}/entities/{entity_id}/memories``
(memories.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from carrier.api.auth import Principal, agent_access
from carrier.api.errors import ApiError, error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.routes.memories import memory_out
from carrier.api.schemas import ID_PATTERN, MemoryOut
from carrier.api.state import ApiState, api_state
from carrier.memory.people import Person, find_people, list_people
from carrier.memory.rights import iter_memories
from carrier.types import MemoryKind

__all__ = ["PersonDetail", "PersonOut", "router"]

router = APIRouter(prefix="/agents", tags=["memories"], responses=error_responses(401, 429))

State = Annotated[ApiState, Depends(api_state)]
Access = Annotated[Principal, Depends(agent_access)]
EntityId = Annotated[str, Path(pattern=ID_PATTERN, description="The person's entity id.")]

SUMMARY_SCAN = 500
"""How many of the agent's newest summaries are read for the ones that retell a person."""


class PersonOut(BaseModel):
    entity_id: str
    name: str
    """What to call them: their first name, else their platform id, else the entity id."""
    names: list[str]
    """Every display name and username they were seen with."""
    platform: str | None = None
    """Where they were seen; null when only memories are left (no record)."""
    platform_id: str | None = None
    messages: int
    """Messages they wrote."""
    memories: int
    """Every memory under their entity id: their messages, facts and notes about them."""


class PersonDetail(PersonOut):
    facts: list[MemoryOut]
    """Facts and notes about them, newest first."""
    summaries: list[MemoryOut]
    """Conversation summaries that retell them (their words are in it), newest first."""


def _out(person: Person) -> PersonOut:
    return PersonOut(
        entity_id=person.entity_id,
        name=person.name,
        names=person.names,
        platform=person.platform,
        platform_id=person.platform_id,
        messages=person.messages,
        memories=person.memories,
    )


@router.get(
    "/{agent_id}/people",
    response_model=list[PersonOut],
    summary="List (or find) the people an agent knows",
    responses=error_responses(403, 404, 422),
)
async def people(
    agent_id: AgentId,
    state: State,
    _: Access,
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="A name, username, platform id or entity id: only those it names.",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> list[PersonOut]:
    """By name, each with how many messages and memories are kept about them."""
    await state.manager.get(agent_id)
    store = state.manager.store
    if q and q.strip():
        found = await find_people(store, agent_id=agent_id, who=q)
    else:
        found = await list_people(store, agent_id=agent_id)
    return [_out(p) for p in found[:limit]]


@router.get(
    "/{agent_id}/people/{entity_id}",
    response_model=PersonDetail,
    summary="One person: what is kept about them, facts and summaries",
    responses=error_responses(403, 404, 422),
)
async def person(
    agent_id: AgentId,
    entity_id: EntityId,
    state: State,
    _: Access,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> PersonDetail:
    """Their record and counts, the latest ``limit`` facts about them and the summaries that
    retell them (from the agent's newest summaries)."""
    await state.manager.get(agent_id)
    store = state.manager.store
    entity = await store.get_entity(entity_id)
    if entity is not None and entity.agent_id != agent_id:
        entity = None
    matches = [
        p
        for p in await find_people(store, agent_id=agent_id, who=entity_id)
        if p.entity_id == entity_id
    ]
    if not matches:
        raise ApiError(
            404,
            "not_found",
            f"agent {agent_id!r} keeps nothing about {entity_id!r}; "
            f"GET /agents/{agent_id}/people lists the people it knows",
        )
    facts = await store.get_memories(
        agent_id=agent_id,
        entity_id=entity_id,
        kinds=[MemoryKind.FACT],
        limit=limit,
        embeddings=False,
    )
    summaries = [
        m
        for m in await store.get_memories(
            agent_id=agent_id, kinds=[MemoryKind.SUMMARY], limit=SUMMARY_SCAN, embeddings=False
        )
        if entity_id in (m.content.metadata.get("entities") or ())
    ][:limit]
    base = _out(matches[0])
    return PersonDetail(
        **base.model_dump(),
        facts=[memory_out(m) for m in facts],
        summaries=[memory_out(m) for m in summaries],
    )


@router.get(
    "/{agent_id}/memories/export",
    summary="Download an agent's memories (or one person's) as JSON Lines",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/x-ndjson": {}}, "description": "One memory per line."},
        **error_responses(403, 404, 422),
    },
)
async def export(
    agent_id: AgentId,
    state: State,
    _: Access,
    entity_id: Annotated[
        str | None,
        Query(pattern=ID_PATTERN, description="Only the memories under this person's entity id."),
    ] = None,
) -> StreamingResponse:
    """Every memory, newest first, without vectors (``carrier memory import`` embeds them
    again), read a page at a time: an agent with a million memories streams in constant
    memory. With ``entity_id``: the messages they wrote and the facts and notes about them (a
    person's data, on their request)."""
    await state.manager.get(agent_id)
    store = state.manager.store

    async def lines() -> AsyncIterator[str]:
        async for memory in iter_memories(store, agent_id=agent_id, entity_id=entity_id):
            yield memory.model_dump_json(exclude={"embedding", "embedding_model"}) + "\n"

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    who = f"-{entity_id}" if entity_id else ""
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="{agent_id}{who}-memories-{stamp}.jsonl"'
        },
    )
