"""``POST /tools/{name}/test``: call a registered tool once with given arguments (admin only).

An operator checks a tool before a model relies on it: the call goes out under the same rules
as a model's (arguments checked against the tool's schema, allowed hosts only, headers from the
allowed environment, size and time limits), but with no person, no rate limit and no approval,
and its output comes back here rather than into a prompt. A refused or failed call is still a
200 whose ``ok`` is false and whose ``error`` says why, so the console can show it beside the
tool; only an unknown tool is a 404.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel

from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.state import ApiState, api_state
from carrier.safety.redact import redact_text
from carrier.tools.call import ToolCallError, call_tool

__all__ = ["ToolTestOut", "router"]

router = APIRouter(prefix="/tools", tags=["tools"], responses=error_responses(401, 403, 429))

OUTPUT_SHOWN = 4000
"""Characters of the output shown back; the model would get at most the call's own cap."""


class ToolTestOut(BaseModel):
    """What one test call did."""

    ok: bool
    output: str | None = None
    """The output as the model would get it (cut at 4000 characters here)."""
    error: str | None = None
    elapsed_ms: int


@router.post(
    "/{name:tool_name}/test",
    response_model=ToolTestOut,
    summary="Call a tool once to check it",
    responses=error_responses(400, 404, 413, 422),
)
async def test_tool(
    name: str,
    state: Annotated[ApiState, Depends(api_state)],
    _: Annotated[Principal, Depends(admin_only)],
    arguments: Annotated[
        dict[str, Any], Body(description="The arguments, as the model would give them.")
    ],
) -> ToolTestOut:
    registry = state.manager.tools
    spec = (await registry.all()).get(name)
    if spec is None:
        raise ApiError(404, "tool_not_found", f"no tool named {name!r}: register it first")
    started = time.monotonic()
    try:
        output = await call_tool(spec, arguments, environ=registry.environ, policy=registry.policy)
    except ToolCallError as exc:
        return ToolTestOut(
            ok=False,
            error=redact_text(str(exc), where="api"),
            elapsed_ms=round((time.monotonic() - started) * 1000),
        )
    return ToolTestOut(
        ok=True,
        output=redact_text(output[:OUTPUT_SHOWN], where="api"),
        elapsed_ms=round((time.monotonic() - started) * 1000),
    )
