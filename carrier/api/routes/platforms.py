"""What platform adapters offer the console (:mod:`carrier.console`): an agent's publishing
quotas, and a draft's media converted exactly as it will be uploaded.

``GET /agents/{agent_id}/quotas`` lists, for each installed adapter the agent uses, how much of
the platform's limit its account has used (Instagram: the Graph API's
``content_publishing_limit`` where the publisher is ``graph``, else the posts Carrier recorded).
The admin token, or the agent's own token, may read them.

``GET /jobs/{job_id}/preview/{index}`` serves the ``index``-th file of the job's
``payload.draft`` as the adapter will upload it (Instagram: a JPEG padded or cropped into 4:5 …
1.91:1, resized, re-encoded), with what the conversion did in ``X-Carrier-Media-Changes`` (a
JSON list of sentences) and its size in ``X-Carrier-Media-Size`` (``1440x754``). The job is
read within the token's agent, as ``GET /jobs/{id}`` reads it; a server without a job store
answers 409 ``jobs_unavailable``.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response
from pydantic import BaseModel

from carrier.api.auth import Principal, agent_access, principal
from carrier.api.errors import ApiError, error_responses
from carrier.api.routes.jobs import _UNAVAILABLE, JobId, _job, _store
from carrier.api.schemas import ID_PATTERN
from carrier.api.state import ApiState, api_state
from carrier.console import (
    ConsoleProvider,
    NoPreview,
    PreviewRefused,
    discover_console_providers,
)

__all__ = ["QuotaOut", "router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["platforms"], responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Who = Annotated[Principal, Depends(principal)]
Reader = Annotated[Principal, Depends(agent_access)]
AgentId = Annotated[str, Path(pattern=ID_PATTERN)]


class QuotaOut(BaseModel):
    """How much of a platform's limit the agent's account has used."""

    client: str
    what: str
    """What is counted (``posts``)."""
    used: int
    limit: int | None
    window_s: int
    """The rolling window, in seconds (86400: the last 24 h)."""
    source: str
    """``platform``: the platform's own figure; ``carrier``: the posts Carrier recorded."""
    carrier_used: int | None
    carrier_limit: int | None
    """Carrier's own limit (``clientConfig.instagram.dailyLimit``)."""
    next_free_at: datetime | None
    note: str | None
    """Why the platform's figure is not shown, and what to do; or null."""


def _providers(request: Request, state: ApiState) -> dict[str, ConsoleProvider]:
    """The app's providers, built from their factories once per app."""
    providers: dict[str, ConsoleProvider] | None = getattr(
        request.app.state, "console_providers", None
    )
    if providers is None:
        providers = {}
        for name, factory in discover_console_providers().items():
            try:
                providers[name] = factory(state.manager)
            except Exception as exc:  # one broken adapter leaves the others served
                log.warning(
                    "console provider %r not served (%s: %s)", name, type(exc).__name__, exc
                )
        request.app.state.console_providers = providers
    return providers


@router.get(
    "/agents/{agent_id}/quotas",
    response_model=list[QuotaOut],
    summary="An agent's use of its platforms' limits (Instagram's posts in 24 h)",
    responses=error_responses(404, 422),
)
async def read_quotas(
    agent_id: AgentId, request: Request, state: State, _: Reader
) -> list[QuotaOut]:
    """One entry per installed adapter the agent uses; empty when it uses none that counts."""
    await state.manager.get(agent_id)  # 404 for an agent that does not exist
    out = []
    for provider in _providers(request, state).values():
        quota = await provider.quota(agent_id)
        if quota is not None:
            out.append(
                QuotaOut(
                    client=quota.client,
                    what=quota.what,
                    used=quota.used,
                    limit=quota.limit,
                    window_s=quota.window_s,
                    source=quota.source,
                    carrier_used=quota.carrier_used,
                    carrier_limit=quota.carrier_limit,
                    next_free_at=quota.next_free_at,
                    note=quota.note,
                )
            )
    return out


@router.get(
    "/jobs/{job_id}/preview/{index}",
    summary="A draft's image converted as it will be uploaded",
    response_class=Response,
    responses={
        200: {"content": {"image/jpeg": {}}},
        409: _UNAVAILABLE[409],
        **error_responses(404, 422),
    },
)
async def preview_media(
    job_id: JobId,
    index: Annotated[int, Path(ge=0, le=19, description="Which file of the draft (from 0).")],
    request: Request,
    state: State,
    who: Who,
) -> Response:
    """404 ``no_media`` when the draft has no image there (a video, a file gone) and 404
    ``no_preview`` when no installed adapter converts this job's media; 422 ``media_refused``
    when the platform would refuse the file (the message says why and what to do)."""
    job = await _job(_store(state), job_id, who)
    provider = next(
        (p for p in _providers(request, state).values() if job.kind in p.job_kinds), None
    )
    if provider is None:
        raise ApiError(
            404,
            "no_preview",
            f"no installed adapter converts the media of {job.kind} jobs; "
            f"GET /jobs/{job_id}/media/{index} serves the file as it is",
        )
    try:
        shown = await provider.preview(job.agent_id or "", job.payload, index)
    except NoPreview as exc:
        raise ApiError(404, "no_media", str(exc)) from None
    except PreviewRefused as exc:
        raise ApiError(422, "media_refused", str(exc)) from None
    headers = {
        "Cache-Control": "no-store",
        "X-Carrier-Media-Changes": json.dumps(list(shown.changes)),  # ASCII: escaped
        "X-Carrier-Media-Size": f"{shown.width}x{shown.height}",
        "X-Carrier-Media-Name": json.dumps(shown.name),
    }
    return Response(shown.data, media_type=shown.media_type, headers=headers)
