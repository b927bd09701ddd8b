"""``/agents/{agent_id}/logs``: an agent's recent log lines, and a live tail of them over SSE.

The lines come from the host's :class:`carrier.logtail.LogTail` (``manager.services["logs"]``,
installed by ``carrier run`` and ``carrier serve``); a server without one answers 409
``logs_unavailable``. Every line was redacted before it was kept. The admin token, or the
agent's own token, may read them; ``level`` keeps lines at that level or above.

The stream sends the kept lines first (after ``after``, a line's ``seq``, so a client that
reconnects misses nothing still kept), then each new line as ``event: line``, and a comment
every 15 s so proxies keep the connection open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from carrier.api.auth import Principal, agent_access
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ID_PATTERN, ErrorBody
from carrier.api.state import ApiState, api_state
from carrier.logtail import LogLine, LogTail, level_number

__all__ = ["LogLineOut", "router"]

router = APIRouter(tags=["logs"], responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Reader = Annotated[Principal, Depends(agent_access)]
AgentId = Annotated[str, Path(pattern=ID_PATTERN)]
Level = Annotated[
    Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
    Query(description="Lines at this level or above."),
]
After = Annotated[int, Query(ge=0, description="Only lines with a larger `seq`.")]
KEEPALIVE_S = 15.0
_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "This server keeps no log tail."}
}


class LogLineOut(BaseModel):
    """One log line, redacted."""

    seq: int
    at: str
    level: str
    logger: str
    agent_id: str | None
    message: str

    @classmethod
    def of(cls, line: LogLine) -> LogLineOut:
        return cls(
            seq=line.seq,
            at=line.at,
            level=line.level,
            logger=line.logger,
            agent_id=line.agent_id,
            message=line.message,
        )


async def _tail(state: ApiState, agent_id: str) -> LogTail:
    await state.manager.get(agent_id)  # 404 for an agent that does not exist
    tail = state.manager.services.get("logs")
    if not isinstance(tail, LogTail):
        raise ApiError(
            409,
            "logs_unavailable",
            "this server keeps no log tail; `carrier run` and `carrier serve` keep one",
        )
    return tail


@router.get(
    "/agents/{agent_id}/logs",
    response_model=list[LogLineOut],
    summary="Read an agent's recent log lines",
    responses={**_UNAVAILABLE, **error_responses(404, 422)},
)
async def read_logs(
    agent_id: AgentId, state: State, _: Reader, level: Level = "INFO", after: After = 0
) -> list[LogLineOut]:
    """The lines kept for the agent (the last few hundred), oldest first."""
    tail = await _tail(state, agent_id)
    return [LogLineOut.of(x) for x in tail.recent(agent_id, level=level_number(level), after=after)]


@router.get(
    "/agents/{agent_id}/logs/stream",
    summary="Follow an agent's log lines (server-sent events)",
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}},
        **_UNAVAILABLE,
        **error_responses(404, 422),
    },
)
async def stream_logs(
    agent_id: AgentId, state: State, _: Reader, level: Level = "INFO", after: After = 0
) -> StreamingResponse:
    """The kept lines, then each new one as it is logged, until the client goes away."""
    tail = await _tail(state, agent_id)
    least = level_number(level)

    def event(line: LogLine) -> str:
        return f"event: line\ndata: {json.dumps(LogLineOut.of(line).model_dump())}\n\n"

    async def events() -> AsyncIterator[str]:
        async with tail.follow(agent_id) as queue:
            seen = after
            for line in tail.recent(agent_id, level=least, after=after):
                seen = line.seq
                yield event(line)
            yield ": following\n\n"  # the client knows the backlog is over
            while True:
                try:
                    line = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if line.seq > seen and line.levelno >= least:
                    seen = line.seq
                    yield event(line)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
