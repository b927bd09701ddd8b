"""``/health`` (public; details for the admin), ``/health/live`` and ``/health/ready`` (for
orchestrators), and ``/metrics`` (Prometheus, admin).

- ``/health``: ``ok``, or ``degraded`` when the store does not answer (then 503) or a configured
  client of a running agent is down (retrying or failed; still 200: restarting the process
  would not bring a platform back, the client retries by itself). With the admin token, each
  running agent's model and clients' states.
- ``/health/live``: 200 while the process and its event loop answer; it reads nothing.
- ``/health/ready``: 200 once start-up is over and the store answers, else 503 with the reason.
  Platform clients do not count: an outage at Discord must not take the API out of service.

None of them needs a token or shows more without one than the status and the store's state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from carrier.agents import AgentNotFound
from carrier.agents.reports import merge_elsewhere
from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.metrics import CONTENT_TYPE
from carrier.api.schemas import AgentHealth, ClientHealth, HealthOut, LiveOut, ReadyOut
from carrier.api.state import ApiState, api_state
from carrier.clients import ClientState, ClientStatus, states_of
from carrier.errors import CarrierError
from carrier.safety.redact import shown

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])

State = Annotated[ApiState, Depends(api_state)]

_PING_SECONDS = 3.0


async def _store_problem(state: ApiState) -> str | None:
    """None when the store answers within 3 s, else what happened (no details: a type name)."""
    try:
        await asyncio.wait_for(state.manager.store.get_setting("health:ping"), _PING_SECONDS)
    except Exception as exc:  # any failure means "not healthy", reported without details
        log.warning("health check: store failed: %s: %s", type(exc).__name__, exc)
        return f"unreachable ({type(exc).__name__})"
    return None


@router.get(
    "/health",
    response_model=HealthOut,
    summary="Is the service up",
    responses={503: {"model": HealthOut, "description": "The store is unreachable."}},
)
async def health(request: Request, state: State) -> JSONResponse:
    """Whether the store answers and the running agents' clients are connected. With the
    admin token, also each running agent's model (or that it is offline) and the state of each
    client its character lists. Never shows secrets."""
    problem = await _store_problem(state)
    agents = await _agents(state) if problem is None else None
    down = any(c.status in ("retrying", "failed") for a in agents or [] for c in a.clients.values())
    out = HealthOut(status="degraded" if problem or down else "ok", store=problem or "ok")
    if request.headers.get("authorization") or state.settings.admin_token is None:
        try:
            who = await request.app.state.auth.authenticate(request)
        except (ApiError, CarrierError):  # no details, but health itself answers
            who = None
        if who is not None and who.admin:
            out.agents = agents
    return JSONResponse(out.model_dump(mode="json"), status_code=503 if problem else 200)


@router.get("/health/live", response_model=LiveOut, summary="Does the process answer")
async def live() -> LiveOut:
    """200 while the process and its event loop answer (a liveness probe: restart it if not)."""
    return LiveOut(status="ok")


@router.get(
    "/health/ready",
    response_model=ReadyOut,
    summary="Can it serve",
    responses={503: {"model": ReadyOut, "description": "Starting, or the store is unreachable."}},
)
async def ready(state: State) -> JSONResponse:
    """200 once start-up is over and the store answers (a readiness probe: send traffic), else
    503 saying why. Platform clients do not count (see ``/health``)."""
    if not state.startup.done:
        out = ReadyOut(status="starting", reason=f"still starting: {state.startup.waiting_for}")
    elif (problem := await _store_problem(state)) is not None:
        out = ReadyOut(status="unavailable", reason=f"the store is {problem}")
    else:
        out = ReadyOut(status="ready")
    return JSONResponse(out.model_dump(mode="json"), status_code=200 if out.reason is None else 503)


async def _agents(state: ApiState) -> list[AgentHealth] | None:
    manager = state.manager
    agents = []
    for agent_id in manager.running_ids():
        try:
            status = await manager.status(agent_id)
        except AgentNotFound:  # deleted meanwhile
            continue
        except CarrierError:  # the store is down: the summary says so
            return None
        started = {
            name: client
            for name in status.clients
            if (client := manager.client(agent_id, name)) is not None
        }
        states = states_of(started, status.skipped, elsewhere=not manager.start_clients)
        if any(s.status is ClientStatus.ELSEWHERE for s in states.values()):
            # Run by a worker: as it reports them (carrier.agents.reports).
            states = merge_elsewhere(states, await manager.reports.elsewhere(agent_id))
        record = status.record
        agents.append(
            AgentHealth(
                id=agent_id,
                name=record.name,
                model=shown(status.model),  # an endpoint's credentials never show
                model_note=shown(status.model_note),
                offline=status.offline,
                clients={name: _client(s) for name, s in states.items()},
            )
        )
    return agents


def _client(state: ClientState) -> ClientHealth:
    return ClientHealth(
        status=state.status.value,
        since=state.since,
        last_error=shown(state.last_error),
        attempts=state.attempts,
        next_retry_at=state.next_retry_at,
        process=state.process,
    )


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
