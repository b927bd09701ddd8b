"""``/agents``: create, list, read, edit, delete, start and stop agents."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from carrier.agents import AgentStatus
from carrier.api._secrets import keep_secret_refs
from carrier.api.auth import Principal, admin_only, agent_access
from carrier.api.characters import CHARACTER_BODY, character_from_request
from carrier.api.errors import error_responses
from carrier.api.schemas import ID_PATTERN, AgentOut
from carrier.api.state import ApiState, agent_out, api_state
from carrier.character import character_data, parse_character
from carrier.fleet.base import placement_from
from carrier.fleet.model import RevisionSource
from carrier.safety.redact import shown

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(prefix="/agents", tags=["agents"], responses=error_responses(401, 429))

AgentId = Annotated[str, Path(pattern=ID_PATTERN, description="The agent's id.")]
State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]
AgentAccess = Annotated[Principal, Depends(agent_access)]


CLIENT_HEADER = "X-Carrier-Client"
"""Says which tool made a call: the web console sends ``console``, so its edits are revisions
of source ``console`` (a label for people reading the history; who acts is the token)."""


def revision_source(request: Request) -> RevisionSource:
    if request.headers.get(CLIENT_HEADER, "").strip().lower() == "console":
        return RevisionSource.CONSOLE
    return RevisionSource.API


@router.post(
    "",
    status_code=201,
    response_model=AgentOut,
    summary="Create an agent from a character",
    responses=error_responses(400, 403, 409, 413, 415, 422),
    openapi_extra=CHARACTER_BODY,
)
async def create_agent(request: Request, state: State, _: Admin) -> AgentOut:
    """The body is a character as JSON, YAML or an uploaded file. Every problem comes back at
    once with its field path (and the file name, for uploads); each ``clientConfig.<name>`` of
    an installed client is checked against that client's settings. The agent is created
    stopped."""
    character = await character_from_request(request)
    record = await state.manager.create(character, source=revision_source(request))
    return agent_out(await state.manager.status(record.id), state)


@router.get(
    "", response_model=list[AgentOut], summary="List agents", responses=error_responses(403)
)
async def list_agents(state: State, _: Admin) -> list[AgentOut]:
    return [
        agent_out(await state.manager.status(record.id), state)
        for record in await state.manager.list()
    ]


@router.get(
    "/{agent_id}",
    response_model=AgentOut,
    summary="Read an agent",
    responses=error_responses(403, 404, 422),
)
async def get_agent(agent_id: AgentId, state: State, _: AgentAccess) -> AgentOut:
    return agent_out(await state.manager.status(agent_id), state)


@router.put(
    "/{agent_id}",
    response_model=AgentOut,
    summary="Replace an agent's character",
    responses=error_responses(400, 403, 404, 409, 413, 415, 422),
    openapi_extra=CHARACTER_BODY,
)
async def put_agent(
    agent_id: AgentId,
    request: Request,
    state: State,
    _: Admin,
    revision: Annotated[
        int | None,
        Query(
            ge=1,
            le=2**31 - 1,
            description="The revision the edit was made on (``revision`` of ``GET "
            "/agents/{agent_id}``): refused with 409 ``revision_conflict`` if the character "
            "changed since. Leave it out to store the edit whatever the head is.",
        ),
    ] = None,
) -> AgentOut:
    """Stores the character as the agent's next revision (source ``api``, by the token's name);
    a running agent uses it from its next turn, in every process. Secret references are never
    shown; leave them out to keep the stored ones (set one to ``""`` to clear it). Client
    sections are checked as on create. With
    ``?revision=N``, an edit made on a stale read does not undo another: 409 names both
    revisions."""
    character = await character_from_request(request)
    old = await state.manager.get(agent_id)
    data = keep_secret_refs(character_data(character), old.character)
    character = parse_character(data, source=character.source)
    await state.manager.update(
        agent_id, character, source=revision_source(request), expected_revision=revision
    )
    return agent_out(await state.manager.status(agent_id), state)


@router.delete(
    "/{agent_id}",
    status_code=204,
    response_class=Response,
    summary="Delete an agent and all its data",
    responses=error_responses(403, 404, 422),
)
async def delete_agent(agent_id: AgentId, state: State, _: Admin) -> Response:
    """Stops the agent, then deletes it, its memories, uploads and tokens."""
    await state.manager.delete(agent_id)
    await state.tokens.delete_for_agent(agent_id)
    return Response(status_code=204)


@router.post(
    "/{agent_id}/start",
    response_model=AgentOut,
    summary="Start an agent and its clients",
    responses=error_responses(403, 404, 422),
)
async def start_agent(
    agent_id: AgentId,
    state: State,
    _: Admin,
    placement: Annotated[
        str | None,
        Query(
            pattern=ID_PATTERN,
            description="Run its clients only on workers of this group (`carrier run --group "
            "NAME`); `any` for every worker. Left out: as it was.",
        ),
    ] = None,
) -> AgentOut:
    """The agent should run: it runs here, and every process that runs its clients applies it
    (after a restart too). Clients that cannot start are listed in ``skipped_clients`` with the
    reason."""
    was_running = agent_id in state.manager.running_ids()
    status = await state.manager.start(agent_id, placement=placement_from(placement))
    if not was_running:  # the one record of the start in the server's log (the manager's is debug)
        log.info("started %s", _started(status))
    return agent_out(status, state)


def _started(status: AgentStatus) -> str:
    model = status.model or "?"
    if status.model_note:
        model += f" ({status.model_note})"
    parts = [f"{status.record.name} ({status.record.id}): {model}"]
    parts += [f"{name} started" for name in status.clients]
    parts += [f"{name} skipped: {why}" for name, why in status.skipped.items()]
    return shown("; ".join(parts), where="log") or ""


@router.post(
    "/{agent_id}/stop",
    response_model=AgentOut,
    summary="Stop an agent and its clients",
    responses=error_responses(403, 404, 422),
)
async def stop_agent(agent_id: AgentId, state: State, _: Admin) -> AgentOut:
    return agent_out(await state.manager.stop(agent_id), state)
