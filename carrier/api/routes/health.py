"""``/health`` (public; details for the admin) and ``/metrics`` (Prometheus, admin)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from carrier.agents import AgentNotFound
from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.metrics import CONTENT_TYPE
from carrier.api.schemas import AgentHealth, HealthOut
from carrier.api.state import ApiState, api_state
from carrier.errors import CarrierError
from carrier.safety.redact import shown

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])

State = Annotated[ApiState, Depends(api_state)]


@router.get(
    "/health",
    response_model=HealthOut,
    summary="Is the service up",
    responses={503: {"model": HealthOut, "description": "The store is unreachable."}},
)
async def health(request: Request, state: State) -> JSONResponse:
    """Whether the store answers. With the admin token, also each running agent's model (or
    that it is offline). Never shows secrets."""
    try:
        await asyncio.wait_for(state.manager.store.get_setting("health:ping"), timeout=3)
        store = "ok"
    except Exception as exc:  # any failure means "not healthy", reported without details
        log.warning("health check: store failed: %s: %s", type(exc).__name__, exc)
        store = f"unreachable ({type(exc).__name__})"
    out = HealthOut(status="ok" if store == "ok" else "degraded", store=store)
    if request.headers.get("authorization") or state.settings.admin_token is None:
        try:
            who = await request.app.state.auth.authenticate(request)
        except (ApiError, CarrierError):  # no details, but health itself answers
            who = None
        if who is not None and who.admin:
            out.agents = await _agents(state)
    return JSONResponse(out.model_dump(mode="json"), status_code=200 if store == "ok" else 503)


async def _agents(state: ApiState) -> list[AgentHealth] | None:
    agents = []
    for agent_id in state.manager.running_ids():
        try:
            status = await state.manager.status(agent_id)
        except AgentNotFound:  # deleted meanwhile
            continue
        except CarrierError:  # the store is down: the summary says so
            return None
        record = status.record
        agents.append(
            AgentHealth(
                id=agent_id,
                name=record.name,
                model=shown(status.model),  # an endpoint's credentials never show
                model_note=shown(status.model_note),
                offline=status.offline,
            )
        )
    return agents


@router.get(
    "/metrics",
    response_model=None,
    summary="Prometheus metrics",
    responses={
        200: {
            "description": "Metrics in the Prometheus text format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **error_responses(401, 403, 429),
    },
)
async def metrics(state: State, _: Annotated[Principal, Depends(admin_only)]) -> PlainTextResponse:
    vectors = state.manager.store.vector_stats()
    return PlainTextResponse(state.metrics.render(vectors), media_type=CONTENT_TYPE)
