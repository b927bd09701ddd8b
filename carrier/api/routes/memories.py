"""An agent's memories: search and list them, and forget a person."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from carrier.api.auth import Principal, admin_only, agent_access
from carrier.api.errors import error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.schemas import ID_PATTERN, ForgetOut, IsoDatetime, MemoryOut, MemoryPage
from carrier.api.state import ApiState, api_state
from carrier.memory.hybrid import query_terms, relevant
from carrier.memory.rights import entity_id_for
from carrier.types import Memory, MemoryKind

__all__ = ["memory_out", "router"]

router = APIRouter(prefix="/agents", tags=["memories"], responses=error_responses(401, 429))

State = Annotated[ApiState, Depends(api_state)]


def memory_out(memory: Memory, score: float | None = None) -> MemoryOut:
    """A memory as the API shows it (no vector, no thought)."""
    content = memory.content
    return MemoryOut(
        id=memory.id,
        room_id=memory.room_id,
        entity_id=memory.entity_id,
        kind=memory.kind,
        status=memory.status,
        text=content.text,
        actions=content.actions,
        source=content.source,
        in_reply_to=content.in_reply_to,
        metadata=content.metadata,
        created_at=memory.created_at,
        score=score,
    )


@router.get(
    "/{agent_id}/memories",
    response_model=MemoryPage,
    summary="Search or list an agent's memories",
    responses=error_responses(403, 404, 422),
)
async def list_memories(
    agent_id: AgentId,
    state: State,
    _: Annotated[Principal, Depends(agent_access)],
    q: Annotated[
        str | None, Query(max_length=2000, description="Search (best first); see `mode`.")
    ] = None,
    mode: Annotated[
        Literal["meaning", "words"],
        Query(
            description="With `q`: `meaning` ranks by the closeness of meaning (cosine); "
            "`words` keeps the memories holding one of its words (full text), ranked by text "
            "relevance and meaning fused."
        ),
    ] = "meaning",
    room_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    kind: MemoryKind | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        IsoDatetime | None, Query(description="Only memories created before this (a cursor).")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
) -> MemoryPage:
    """Without ``q``: newest first; page with ``next_before`` (or ``offset``). With ``q``: the
    closest by meaning (``mode=meaning``, the score a cosine) or the memories holding its words
    (``mode=words``, the score fused ranks); page with ``next_offset``."""
    await state.manager.get(agent_id)
    store = state.manager.store
    kinds = [kind] if kind is not None else None
    if q and mode == "words":
        return await _by_words(state, agent_id, q, room_id, kinds, limit, offset)
    if q:
        embedder = state.manager.embedder
        hits = await store.search_memories(
            agent_id=agent_id,
            embedding=(await embedder.embed_one(q)).tolist(),
            embedding_model=embedder.model_id,
            k=offset + limit + 1,
            room_id=room_id,
            kinds=kinds,
            embeddings=False,
        )
        page = hits[offset : offset + limit]
        more = len(hits) > offset + limit
        return MemoryPage(
            items=[memory_out(h.memory, h.score) for h in page],
            next_offset=offset + limit if more else None,
        )
    found = await store.get_memories(
        agent_id=agent_id,
        room_id=room_id,
        kinds=kinds,
        before=before,
        limit=offset + limit + 1,
        embeddings=False,
    )
    page_memories = found[offset : offset + limit]
    more = len(found) > offset + limit
    return MemoryPage(
        items=[memory_out(m) for m in page_memories],
        next_before=page_memories[-1].created_at if more and page_memories else None,
        next_offset=offset + limit if more else None,
    )


async def _by_words(
    state: ApiState,
    agent_id: str,
    q: str,
    room_id: str | None,
    kinds: list[MemoryKind] | None,
    limit: int,
    offset: int,
) -> MemoryPage:
    """Full text: the store's hybrid search (its text index and vectors, fused), keeping only
    the memories that hold one of the words of ``q``."""
    terms = query_terms(q)
    if not terms:
        return MemoryPage(items=[])
    embedder = state.manager.embedder
    vector = (await embedder.embed_one(q)).tolist()
    hits = await state.manager.store.search_hybrid(
        agent_id=agent_id,
        text=q,
        embedding=vector,
        embedding_model=embedder.model_id,
        # Candidates to spare: those without one of the words are left out below.
        k=min(3 * (offset + limit + 1), 600),
        room_id=room_id,
        kinds=kinds,
        embeddings=False,
    )
    # Only the words decide (no cosine passes 2).
    kept = [h for h in hits if relevant(h, terms, min_cosine=2.0)]
    page = kept[offset : offset + limit]
    return MemoryPage(
        items=[memory_out(h.memory, h.score) for h in page],
        next_offset=offset + limit if len(kept) > offset + limit else None,
    )


@router.delete(
    "/{agent_id}/entities/{entity_id}/memories",
    response_model=ForgetOut,
    summary="Forget a person",
    responses=error_responses(403, 404, 422),
)
async def forget_entity(
    agent_id: AgentId,
    entity_id: Annotated[str, Path(pattern=ID_PATTERN)],
    state: State,
    _: Annotated[Principal, Depends(admin_only)],
    platform: Annotated[
        str | None,
        Query(
            pattern=r"^[a-z][a-z0-9_-]{0,31}$",
            description="Given, `entity_id` is the person's id on this platform "
            "(e.g. a Discord user id with `discord`) instead of a Carrier entity id.",
        ),
    ] = None,
) -> ForgetOut:
    """Delete the messages the person sent, the facts about them, the agent's replies to them,
    the summaries that retell them and their entity record (names, platform id). Returns how many
    memories of each kind went."""
    if platform is not None:
        entity_id = entity_id_for(agent_id, platform, entity_id)
    report = await state.manager.forget(agent_id, entity_id)
    return ForgetOut(
        entity_id=entity_id,
        deleted=report.total,
        messages=report.messages,
        facts=report.facts,
        replies=report.replies,
        summaries=report.summaries,
        other=report.other,
        entity_record=report.entity,
    )
