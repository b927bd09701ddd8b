"""``/clients/{client_id}/config``: platform client configuration, validated and applied live.

``client_id`` is a client name (``discord``: every agent's Discord client) or
``<agent_id>:<name>`` (one agent's). An agent's client runs with its character's
``clientConfig.<name>``, overlaid key by key with the first, then the second. When the client
declares a schema (a pydantic ``config_model`` on its factory) the configuration is checked
against it; otherwise any JSON object is accepted. Running clients with ``update_config`` take
the new configuration at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path

from carrier.agents import split_client_id
from carrier.api._secrets import mask_config
from carrier.api.auth import Principal, admin_only
from carrier.api.errors import error_responses
from carrier.api.schemas import ClientConfigOut
from carrier.api.state import ApiState, api_state

__all__ = ["router"]

router = APIRouter(prefix="/clients", tags=["clients"], responses=error_responses(401, 403, 429))

CLIENT_ID = r"^([A-Za-z0-9][A-Za-z0-9_.\-]{0,127}:)?[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$"
ClientId = Annotated[
    str, Path(pattern=CLIENT_ID, description="`discord` (all agents) or `<agent_id>:discord`.")
]
State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]


async def _out(state: ApiState, client_id: str, applied: list[str]) -> ClientConfigOut:
    agent_id, name = split_client_id(client_id)
    if agent_id is not None:
        await state.manager.get(agent_id)
    config = await state.manager.get_client_config(client_id)
    factory = state.manager.factories.get(name)
    return ClientConfigOut(
        client_id=client_id,
        config=mask_config(config),
        validated=getattr(factory, "config_model", None) is not None,
        applied_to=applied,
    )


@router.get(
    "/{client_id}/config",
    response_model=ClientConfigOut,
    summary="Read a client's stored configuration",
    responses=error_responses(404, 422),
)
async def get_config(client_id: ClientId, state: State, _: Admin) -> ClientConfigOut:
    return await _out(state, client_id, [])


@router.post(
    "/{client_id}/config",
    response_model=ClientConfigOut,
    summary="Set a client's configuration",
    responses=error_responses(400, 404, 413, 422),
)
async def set_config(
    client_id: ClientId,
    config: Annotated[dict[str, Any], Body(description="The configuration (a JSON object).")],
    state: State,
    _: Admin,
) -> ClientConfigOut:
    """Replaces the stored configuration under ``client_id``. Literal secrets are refused: name
    environment variables (``"$DISCORD_API_TOKEN"``) instead."""
    applied = await state.manager.set_client_config(client_id, config)
    return await _out(state, client_id, applied)
