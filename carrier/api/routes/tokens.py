"""``/tokens``: per-agent API tokens (admin only). A token is shown once and stored hashed."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response

from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import NAME_PATTERN, TokenCreated, TokenIn, TokenOut
from carrier.api.state import ApiState, api_state

__all__ = ["router"]

router = APIRouter(prefix="/tokens", tags=["tokens"], responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]


def _out(name: str, record: dict[str, Any]) -> TokenOut:
    return TokenOut(
        name=name,
        agent_id=str(record.get("agent_id")),
        created_at=datetime.fromisoformat(str(record.get("created_at"))),
    )


@router.post(
    "",
    status_code=201,
    response_model=TokenCreated,
    summary="Create a token for one agent",
    responses=error_responses(400, 404, 409, 413, 422),
)
async def create_token(body: TokenIn, state: State, _: Admin) -> TokenCreated:
    """The token may message the agent, upload its media, read it and its memories."""
    await state.manager.get(body.agent_id)
    record, raw = await state.tokens.create(body.name, body.agent_id)
    return TokenCreated(**_out(body.name, record).model_dump(), token=raw)


@router.get("", response_model=list[TokenOut], summary="List tokens (names and scopes)")
async def list_tokens(state: State, _: Admin) -> list[TokenOut]:
    return [_out(name, record) for name, record in sorted((await state.tokens.all()).items())]


@router.delete(
    "/{name}",
    status_code=204,
    response_class=Response,
    summary="Delete a token",
    responses=error_responses(404, 422),
)
async def delete_token(
    name: Annotated[str, Path(pattern=NAME_PATTERN)], state: State, _: Admin
) -> Response:
    if not await state.tokens.delete(name):
        raise ApiError(404, "token_not_found", f"no token named {name!r}")
    return Response(status_code=204)
