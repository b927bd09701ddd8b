"""``POST /{agent_id}/media``: upload an image or video to post, with a caption and a time.

The file is kept under ``<data_dir>/media/<agent_id>/`` with a fresh name and recorded as a
``post`` memory with status ``received`` (its id is the media id). A running client of the agent
that has an ``accept_media(memory)`` coroutine (the Instagram publisher, when it exists) takes it
and the answer is 202; without one the answer is 409, naming the stored media.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

from carrier.api.auth import Principal, agent_access
from carrier.api.bodies import form_file, form_text, media_type, read_form, save_upload
from carrier.api.errors import ApiError, error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.schemas import ErrorBody, IsoDatetime, MediaOut, ProblemOut
from carrier.api.state import ApiState, api_state
from carrier.types import Attachment, Content, Memory, MemoryKind, MemoryStatus, stable_id

__all__ = ["router"]

router = APIRouter(tags=["media"], responses=error_responses(401, 429))

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
    media: MediaOut
    """The stored upload, kept for when a publisher is configured."""


@router.post(
    "/{agent_id}/media",
    status_code=202,
    response_model=MediaOut,
    summary="Upload media to post",
    responses={
        409: {"model": MediaConflict, "description": "Stored, but no publisher takes it yet."},
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
    UTC) are optional. The file must be an image or a video."""
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
    saved = await save_upload(upload, state.settings.data_dir / "media" / agent_id)
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
    await state.manager.store.add_memory(memory)
    out = MediaOut(
        id=saved.id,
        agent_id=agent_id,
        file_name=saved.file_name,
        content_type=saved.content_type,
        size=saved.size,
        caption=caption,
        publish_at=publish_at,
        status="received",
        message="",
    )
    for name in ("instagram",):
        publisher = getattr(state.manager.client(agent_id, name), "accept_media", None)
        if publisher is not None:
            await publisher(memory)
            out.status, out.message = "scheduled", f"handed to the {name} publisher"
            return out
    out.message = (
        "no Instagram publisher is configured for this agent; the media is stored as "
        f"{saved.id} and will be used once one is"
    )
    conflict = MediaConflict(error="no_publisher", message=out.message, media=out)
    return JSONResponse(conflict.model_dump(mode="json"), status_code=409)


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
