"""What an editor asks before it saves: the clients installed here (``GET /clients``), and what
``carrier validate`` says of a character (``POST /characters/validate``: its problems as a save
would refuse them, or its warnings; each at its field path, nothing stored)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, PydanticUserError

from carrier.api._secrets import keep_secret_refs
from carrier.api.auth import Principal, admin_only
from carrier.api.characters import (
    CHARACTER_BODY,
    character_from_request,
    source_warnings,
)
from carrier.api.errors import error_responses
from carrier.api.schemas import ID_PATTERN, CharacterCheckOut, ClientKindOut, WarningOut
from carrier.api.state import ApiState, api_state
from carrier.character import Character, character_data, parse_character
from carrier.character.lint import lint_character
from carrier.client_checks import character_config_problems
from carrier.clients import ClientFactory
from carrier.errors import CharacterError, Problem

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]


@router.get(
    "/clients",
    tags=["clients"],
    response_model=list[ClientKindOut],
    summary="List the platform clients installed here",
)
async def list_clients(state: State, _: Admin) -> list[ClientKindOut]:
    """The names a character may list under ``clients`` and key ``clientConfig`` by, each with
    the JSON schema its options are checked against when it declares one."""
    factories = state.manager.factories
    return [
        ClientKindOut(name=name, config_schema=_schema(factories[name]))
        for name in sorted(factories)
    ]


def _schema(factory: ClientFactory) -> dict[str, Any] | None:
    model = getattr(factory, "config_model", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    try:
        return model.model_json_schema(by_alias=True)
    except PydanticUserError as exc:  # a type JSON schema cannot describe: checked all the same
        log.warning("client settings model %s has no JSON schema: %s", model.__name__, exc)
        return None


@router.post(
    "/characters/validate",
    tags=["agents"],
    response_model=CharacterCheckOut,
    summary="Check a character without saving it",
    responses=error_responses(400, 404, 413, 415, 422),
    openapi_extra=CHARACTER_BODY,
)
async def validate_character(
    request: Request,
    state: State,
    _: Admin,
    agent_id: Annotated[
        str | None,
        Query(
            pattern=ID_PATTERN,
            description="Check it as an edit of this agent (``PUT /agents/{agent_id}``): the "
            "secret references it leaves out are the stored ones, as a save keeps them.",
        ),
    ] = None,
) -> CharacterCheckOut:
    """The body as ``POST /agents`` takes it; nothing is stored. What a save would refuse is
    refused the same way (422 ``invalid_character``, every problem at its field path); a
    character a save would take answers 200 with its warnings: what loads but will not act as
    written (a client not installed here, an unknown ``modelProvider``, a missing knowledge
    path, a setting Carrier ignores, a YAML value cut short by a ``#``), as ``carrier
    validate`` prints them."""
    old = await state.manager.get(agent_id) if agent_id is not None else None
    warnings = await source_warnings(request)
    character = await character_from_request(request)
    if old is not None:
        data = keep_secret_refs(character_data(character), old.character)
        character = parse_character(data, source=character.source)
    factories = state.manager.factories
    problems = character_config_problems(character, factories)
    if old is not None and character.id is not None and character.id != old.id:
        problems.insert(0, Problem("id", _id_mismatch(character, old.id)))
    if problems:
        raise CharacterError(character.source, problems)
    linted = await asyncio.to_thread(lint_character, character, clients=list(factories))
    return CharacterCheckOut(
        warnings=[
            WarningOut(path=w.path, message=w.message, kind=w.kind) for w in linted + warnings
        ]
    )


def _id_mismatch(character: Character, agent_id: str) -> str:
    return (
        f"the character's id {character.id!r} does not match the agent {agent_id!r}; "
        "remove `id` or make it equal"
    )
