"""``/agents/{agent_id}/revisions``: an agent's character versions, the diff of two, a revert.

Every change to a character (``POST``/``PUT /agents``, a file imported by ``carrier run``, a
revert) is kept as a numbered revision (:mod:`carrier.fleet`); the newest, the *head*, is what
the agent runs. Reading needs the admin token or the agent's own token, like ``GET
/agents/{agent_id}``; a revert needs the admin token. Secret references are never shown: a
revision's character leaves them out, a diff names a changed one without its values.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from carrier.agents.diff import diff_characters
from carrier.api.auth import Principal, admin_only, agent_access
from carrier.api.errors import error_responses
from carrier.api.revision_schemas import DiffOut, RevisionOut, RevisionPage, RevisionSummary
from carrier.api.schemas import ID_PATTERN, AgentOut
from carrier.api.state import ApiState, agent_out, api_state
from carrier.fleet.model import RevisionSource

__all__ = ["MAX_REVISION", "router"]

router = APIRouter(
    prefix="/agents/{agent_id}/revisions", tags=["revisions"], responses=error_responses(401, 429)
)

AgentId = Annotated[str, Path(pattern=ID_PATTERN, description="The agent's id.")]
MAX_REVISION = 2**31 - 1
"""Revision numbers count edits: far below this, which keeps a query within the store's integers."""
Number = Annotated[int, Path(ge=1, le=MAX_REVISION, description="A revision number (from 1).")]
State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]
AgentAccess = Annotated[Principal, Depends(agent_access)]


@router.get(
    "",
    response_model=RevisionPage,
    summary="List an agent's revisions, newest first",
    responses=error_responses(403, 404, 422),
)
async def list_revisions(
    agent_id: AgentId,
    state: State,
    _: AgentAccess,
    before: Annotated[
        int | None,
        Query(ge=1, le=MAX_REVISION, description="Only revisions numbered below this (paging)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> RevisionPage:
    """Each revision's number, source (``file``, ``api``, ``console``, ``cli``, ``revert``,
    ``store``), who made it, its note and time, without the character (``GET
    .../revisions/{number}`` has it). ``head`` is the revision the agent runs."""
    revisions = await state.manager.revisions(agent_id, limit=limit, before=before)
    head = await state.manager.head(agent_id)
    last = revisions[-1].number if revisions else None
    more = last is not None and len(revisions) == limit and last > 1
    return RevisionPage(
        items=[RevisionSummary.of(r) for r in revisions],
        head=head.number,
        next_before=last if more else None,
    )


@router.get(
    "/{number}",
    response_model=RevisionOut,
    summary="Read one revision of an agent's character",
    responses=error_responses(403, 404, 422),
)
async def get_revision(
    agent_id: AgentId, number: Number, state: State, _: AgentAccess
) -> RevisionOut:
    """The character as it was at that revision, secret references left out."""
    return RevisionOut.of(await state.manager.revision(agent_id, number))


@router.get(
    "/{number}/diff",
    response_model=DiffOut,
    summary="What a revision changed",
    responses=error_responses(403, 404, 422),
)
async def diff_revision(
    agent_id: AgentId,
    number: Number,
    state: State,
    _: AgentAccess,
    against: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_REVISION,
            description="The revision to compare with; default: the one before.",
        ),
    ] = None,
) -> DiffOut:
    """The changes from ``against`` (default: revision ``number - 1``; for revision 1, from
    nothing) to ``number``: each changed field's path with its old and new value, and a unified
    diff of the two characters as YAML. A changed secret reference is named, never shown."""
    newer = await state.manager.revision(agent_id, number)
    older_number = against if against is not None else (number - 1 if number > 1 else None)
    older = (
        await state.manager.revision(agent_id, older_number) if older_number is not None else None
    )
    diff = diff_characters(
        older.character if older is not None else {},
        newer.character,
        old_label=f"revision {older_number}" if older_number is not None else "(none)",
        new_label=f"revision {number}",
    )
    return DiffOut.of(agent_id, older_number, number, diff)


@router.post(
    "/{number}/revert",
    response_model=AgentOut,
    summary="Bring a revision's character back",
    responses=error_responses(403, 404, 422),
)
async def revert_revision(agent_id: AgentId, number: Number, state: State, _: Admin) -> AgentOut:
    """Stores revision ``number``'s character as a new revision (source ``revert``, the note
    ``revert to revision N``; the history is kept) and answers the agent as ``GET
    /agents/{agent_id}`` does, its ``revision`` the new head. A running agent uses it from its
    next turn, here and in every other process. When the head already holds that character,
    nothing is stored."""
    target = await state.manager.revision(agent_id, number)
    head = await state.manager.head(agent_id)
    if target.digest != head.digest:
        await state.manager.revert(agent_id, number, source=RevisionSource.REVERT)
    return agent_out(await state.manager.status(agent_id), state)
