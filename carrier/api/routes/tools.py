"""``/tools``: HTTP tools the models can call (admin only). Header values are references to
environment variables, so a registered tool never stores or returns a secret."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.state import ApiState, api_state
from carrier.tool_registry import ToolExists
from carrier.tools import ToolSpec

__all__ = ["router"]

router = APIRouter(prefix="/tools", tags=["tools"], responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]
TOOL_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"


@router.post(
    "",
    status_code=201,
    response_model=ToolSpec,
    summary="Register an HTTP tool",
    responses=error_responses(400, 409, 413, 422),
)
async def add_tool(spec: ToolSpec, state: State, _: Admin) -> ToolSpec:
    """The tool becomes an action that running agents (all, or those in ``agent_ids``) can call
    through tool calling; its output enters the prompt marked as untrusted data."""
    try:
        await state.manager.tools.add(spec)
    except ToolExists as exc:
        raise ApiError(409, "tool_exists", str(exc)) from None
    await state.manager.refresh_tools()
    return spec


@router.get("", response_model=list[ToolSpec], summary="List registered tools")
async def list_tools(state: State, _: Admin) -> list[ToolSpec]:
    return sorted((await state.manager.tools.all()).values(), key=lambda s: s.name)


@router.delete(
    "/{name}",
    status_code=204,
    response_class=Response,
    summary="Remove a tool",
    responses=error_responses(404, 422),
)
async def delete_tool(
    name: Annotated[str, Path(pattern=TOOL_NAME)], state: State, _: Admin
) -> Response:
    if not await state.manager.tools.remove(name):
        raise ApiError(404, "tool_not_found", f"no tool named {name!r}")
    await state.manager.refresh_tools()
    return Response(status_code=204)
