"""``POST /{agent_id}/media``: upload an image or video to post, with a caption and a time.

The file is kept under ``<data_dir>/media/<agent_id>/`` with a fresh name and recorded as a
``post`` memory with status ``received`` (its id is the media id), within the agent's upload
quota (:mod:`carrier.api.uploads`). A running client of the agent that has an
``accept_media(memory)`` coroutine (the Instagram publisher) takes it: 202 ``scheduled``. When
the character lists such a client that does not run here (it runs in a worker, or not yet), the
upload waits for it: the change log tells the process that runs it, which queues it at once, and
a client queues waiting uploads when it starts: 202 ``received``. When no client of the agent publishes
media, the answer is 409 and nothing is kept; so is every other refusal (bad type, too large,
over quota): a refused upload leaves no file behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

from carrier.api.auth import Principal, agent_access
from carrier.api.bodies import form_file, form_text, media_type, read_form
from carrier.api.errors import ApiError, error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.schemas import ErrorBody, IsoDatetime, MediaOut, ProblemOut
from carrier.api.state import ApiState, api_state
from carrier.api.uploads import discard, upload_quota
from carrier.fleet.model import ChangeKind
from carrier.types import Attachment, Content, Memory, MemoryKind, MemoryStatus, stable_id

__all__ = ["router"]

router = APIRouter(tags=["media"], responses=error_responses(401, 429))

PUBLISHERS = ("instagram",)
"""Clients that take uploaded media (they have an ``accept_media(memory)`` coroutine)."""

_DATETIME: TypeAdapter[datetime] = TypeAdapter(IsoDatetime)
_MEDIA_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "caption": {"type": "string", "maxLength": 2200},
                        "publish_at": {"type": "string", "format": "date-time"},
                    },
                    "required": ["file"],
                },
                "encoding": {"file": {"contentType": "image/png, image/jpeg, video/mp4"}},
            }
        },
    }
}


class MediaConflict(ErrorBody):
    publishers: list[str]
    """The clients that would take the media, one of which the character must list."""


@router.post(
    "/{agent_id}/media",
    status_code=202,
    response_model=MediaOut,
    summary="Upload media to post",
    responses={
        409: {
            "model": MediaConflict,
            "description": "No client of the agent publishes media; nothing was kept.",
        },
        **error_responses(400, 403, 404, 413, 415, 422),
    },
    openapi_extra=_MEDIA_BODY,
)
async def post_media(
    agent_id: AgentId,
    request: Request,
    state: Annotated[ApiState, Depends(api_state)],
    who: Annotated[Principal, Depends(agent_access)],
) -> Any:
    """``caption`` (at most 2200 characters) and ``publish_at`` (ISO 8601; without a time zone,
    UTC) are optional. The file must be an image or a video; the agent's uploads may keep at
    most ``CARRIER_UPLOAD_QUOTA_FILES`` files and ``CARRIER_UPLOAD_QUOTA_BYTES`` bytes (413
    ``upload_quota`` beyond)."""
    await state.manager.get(agent_id)
    if media_type(request) != "multipart/form-data":
        raise ApiError(415, "unsupported_media_type", "send multipart/form-data with a `file`")
    form = await read_form(request)
    caption = form_text(form, "caption", max_length=2200)
    publish_at = _publish_at(form_text(form, "publish_at", max_length=64))
    upload = form_file(form, "file")
    if upload is None:
        problem = ProblemOut(path="file", message="required file is missing")
        raise ApiError(422, "invalid_request", "the form has no `file`", problems=[problem])
    kind = (upload.content_type or "").lower()
    if not kind.startswith(("image/", "video/")):
        problem = ProblemOut(
            path="file", message=f"expected an image or a video, got {kind or 'no type'}"
        )
        raise ApiError(422, "invalid_media", problem.message, problems=[problem])
    publisher, waiting_for = await _taker(state, agent_id)
    if publisher is None and waiting_for is None:
        message = (
            "no client of this agent publishes media, so the upload was not kept: add "
            f"{' or '.join(PUBLISHERS)} to the character's clients (with its clientConfig) "
            "and upload again"
        )
        conflict = MediaConflict(error="no_publisher", message=message, publishers=list(PUBLISHERS))
        return JSONResponse(conflict.model_dump(mode="json"), status_code=409)
    saved = await upload_quota(state).save(upload, agent_id=agent_id, area="media")
    memory = Memory(
        id=saved.id,
        agent_id=agent_id,
        room_id=stable_id(agent_id, "api", "media"),
        entity_id=stable_id(agent_id, "api", who.name),
        kind=MemoryKind.POST,
        status=MemoryStatus.RECEIVED,
        content=Content(
            text=caption or "",
            source="api",
            attachments=[
                Attachment(
                    id=saved.id,
                    path=str(saved.path),
                    title=saved.file_name,
                    content_type=saved.content_type,
                    size=saved.size,
                )
            ],
            metadata={
                "media_id": saved.id,
                "publish_at": publish_at.isoformat() if publish_at else None,
                "uploaded_by": who.name,
            },
        ),
    )
    out = MediaOut(
        id=saved.id,
        agent_id=agent_id,
        file_name=saved.file_name,
        content_type=saved.content_type,
        size=saved.size,
        caption=caption,
        publish_at=publish_at,
        status="received",
        message=(
            f"stored; the process running the {waiting_for} client queues it (at once, or when "
            "it starts)"
            if waiting_for
            else ""
        ),
    )
    stored = False
    try:
        await state.manager.store.add_memory(memory)
        stored = True
        if publisher is not None:
            name, accept = publisher
            await accept(memory)
            out.status, out.message = "scheduled", f"handed to the {name} publisher"
        else:  # the process running the publisher (a worker) queues it, now or when it starts
            fleet = await state.manager.fleet()
            await fleet.append_change(ChangeKind.UPLOADS, agent_id, {"media_id": saved.id})
    except BaseException:  # nothing half-kept: the caller is told it failed
        if stored:
            await state.manager.store.delete_memory(memory.id)
        await discard(saved)
        raise
    return out


async def _taker(
    state: ApiState, agent_id: str
) -> tuple[tuple[str, Callable[[Memory], Awaitable[Any]]] | None, str | None]:
    """Who takes the upload: a running publisher (name, its ``accept_media``), or else the name
    of a publisher the character lists that is not running (the upload waits for it)."""
    for name in PUBLISHERS:
        accept = getattr(state.manager.client(agent_id, name), "accept_media", None)
        if accept is not None:
            return (name, accept), None
    listed = {str(c).lower() for c in (await state.manager.character(agent_id)).clients}
    waiting = [name for name in PUBLISHERS if name in listed]
    return None, (waiting[0] if waiting else None)


def _publish_at(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = _DATETIME.validate_python(value)
    except ValidationError:
        problem = ProblemOut(
            path="publish_at", message="expected an ISO 8601 date-time, e.g. 2026-05-01T09:30:00Z"
        )
        raise ApiError(422, "invalid_request", problem.message, problems=[problem]) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
