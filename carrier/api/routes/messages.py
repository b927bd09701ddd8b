"""``POST /{agent_id}/message``: talk to a running agent, as JSON or as server-sent events."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.responses import Response

from carrier.api.auth import Principal, agent_access
from carrier.api.bodies import (
    form_file,
    form_text,
    media_type,
    read_form,
    read_text,
)
from carrier.api.errors import ApiError, error_responses
from carrier.api.routes.agents import AgentId
from carrier.api.schemas import (
    ErrorBody,
    MessageIn,
    MessageOut,
    ProblemOut,
    ReplyOut,
    UsageOut,
)
from carrier.api.state import ApiState, api_state
from carrier.api.uploads import upload_quota
from carrier.errors import ProviderError
from carrier.pipeline.generate import FailureNotice, failure_of
from carrier.runtime import AgentRuntime, TurnResult
from carrier.safety.redact import current_redactor
from carrier.types import Attachment, Author, Channel, Message, RoomKind

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["messages"], responses=error_responses(401, 429))

WHERE = "api"
"""Where the API's redactions are counted (``carrier_redactions_total{where="api"}``)."""

_MESSAGE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": MessageIn.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        **MessageIn.model_json_schema()["properties"],
                        "file": {"type": "string", "format": "binary"},
                    },
                }
            },
        },
    }
}
_STREAM_DOC = (
    "With `Accept: text/event-stream` the reply streams as server-sent events: `event: chunk` "
    "(data: a JSON string, the next piece of text), then `event: done` (data: the JSON body "
    "below), or `event: error` (data: an error body). When the model gives no usable answer "
    "(after retries, fallbacks or at the turn deadline) a JSON call gets 503 `model_unavailable` "
    "whose `message` is a short apology to show the person (`Retry-After` when the model said how "
    "long to wait); a stream gets `event: error` with that body, then `event: done` (status "
    "`failed`, the operator's `reason`)."
)
_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    429: {
        "model": ErrorBody,
        "description": "Rate limited (`rate_limited`), or the agent is overloaded (`overloaded`: "
        "a message sent now would wait longer than `CARRIER_OVERLOAD_WAIT`; nothing was "
        "stored); retry after the number of seconds in Retry-After.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds."}},
    },
    503: {
        "model": ErrorBody,
        "description": "The model gave no usable answer (`model_unavailable`): `message` is the "
        "apology to show; retry after `Retry-After` seconds when given.",
    },
}


@router.post(
    "/{agent_id}/message",
    response_model=MessageOut,
    summary="Send a message to a running agent",
    description=_STREAM_DOC,
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}},
        **error_responses(400, 403, 404, 409, 413, 415, 422, 502),
        **_UNAVAILABLE,
    },
    openapi_extra=_MESSAGE_BODY,
)
async def post_message(
    agent_id: AgentId,
    request: Request,
    state: Annotated[ApiState, Depends(api_state)],
    who: Annotated[Principal, Depends(agent_access)],
    include_thought: Annotated[
        bool, Query(description="Include the model's private thought (admin token only).")
    ] = False,
) -> Response | MessageOut:
    if include_thought and not who.admin:
        raise ApiError(403, "forbidden", "include_thought needs the admin token")
    await state.manager.get(agent_id)
    runtime = state.manager.runtime(agent_id)
    _refuse_if_overloaded(state, runtime)  # before anything is read or stored
    body, attachment = await _read_message(request, state, agent_id)
    user = body.user_id or who.name
    message = Message(
        platform="api",
        # Only the admin token makes the caller a room admin (for tools with trigger room_admins).
        author=Author(platform_id=user, name=body.user_name or user, is_admin=who.admin),
        channel=Channel(platform_id=body.room_id or f"api:{user}", kind=RoomKind.API),
        text=body.text,
        attachments=[attachment] if attachment is not None else [],
    )
    if "text/event-stream" in request.headers.get("accept", ""):
        return _stream(state, runtime, message, include_thought)
    try:
        result = await runtime.handle(message)
    except Exception:
        state.metrics.error("turn")
        raise
    failure = _failure(result)
    if failure is not None:  # the person reads the apology; the reason is the message's
        state.metrics.error("turn")
        raise ApiError(503, failure.code, failure.notice, headers=_retry_after(failure))
    out = _out(result, include_thought)
    # The response is produced: over HTTP that is the hand-over (nothing acknowledges reading
    # it), so the replies are sent; a caller that lost the connection finds them in the history.
    await runtime.outbox.deliver(result.replies)
    return out


def _refuse_if_overloaded(state: ApiState, runtime: AgentRuntime) -> None:
    """429 ``overloaded`` with ``Retry-After`` when a message sent now would queue longer than
    the agent's bound (``CARRIER_OVERLOAD_WAIT``): a caller told to come back is better off
    than one kept waiting, and nothing of the refused message is stored."""
    load = runtime.load()
    if not load.overloaded:
        return
    state.metrics.error("overloaded")
    wait = max(1, math.ceil(load.wait_s))
    raise ApiError(
        429,
        "overloaded",
        f"{runtime.character.name} has {load.waiting} message(s) waiting and would take about "
        f"{wait} s to start on this one (the bound is {load.limit_s:g} s); nothing was stored: "
        f"send it again after {wait} s",
        headers={"Retry-After": str(wait)},
    )


async def _read_message(
    request: Request, state: ApiState, agent_id: str
) -> tuple[MessageIn, Attachment | None]:
    kind = media_type(request)
    if kind == "multipart/form-data":
        form = await read_form(request)
        fields = {
            name: form_text(form, name, max_length=20_000)
            for name in ("text", "user_id", "user_name", "room_id")
        }
        body = _validate({k: v for k, v in fields.items() if v is not None})
        upload = form_file(form, "file")
        if upload is None:
            return body, None
        saved = await upload_quota(state).save(upload, agent_id=agent_id, area="uploads")
        cap = state.api_settings.attachment_text_chars
        attachment = Attachment(
            id=saved.id,
            path=str(saved.path),
            title=saved.file_name,
            content_type=saved.content_type,
            size=saved.size,
            text=await asyncio.to_thread(read_text, saved, cap),
        )
        return body, attachment
    if kind == "application/json" or kind.endswith("+json"):
        raw = await request.body()
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(
                422,
                "invalid_json",
                f"the body is not valid JSON: {exc}",
                problems=[ProblemOut(path="body", message="invalid JSON")],
            ) from None
        return _validate(data), None
    raise ApiError(
        415,
        "unsupported_media_type",
        f"cannot read a message from {kind or 'a body without Content-Type'}; send "
        "application/json or multipart/form-data",
    )


def _validate(data: Any) -> MessageIn:
    try:
        return MessageIn.model_validate(data)
    except ValidationError as exc:
        problems = [
            ProblemOut(
                path=".".join(["body", *(str(p) for p in err["loc"])]),
                message=err["msg"],
            )
            for err in exc.errors(include_url=False, include_input=False)
        ]
        where = ", ".join(p.path for p in problems)
        raise ApiError(
            422, "invalid_request", f"invalid message at {where}", problems=problems
        ) from None


def _out(result: TurnResult, include_thought: bool) -> MessageOut:
    """The turn as the API answers it, through the redactor once more: the model's text was
    redacted at the model boundary, but hooks, actions and tools may have added some since."""
    redactor = current_redactor()
    done: dict[str, str] = {}

    def clean(text: str) -> str:  # once per text: ``reply`` repeats the replies' text
        if text not in done:
            done[text] = redactor.clean(text, where=WHERE)
        return done[text]

    return MessageOut(
        reply=clean(result.text),
        replies=[
            ReplyOut(
                id=m.id,
                text=clean(m.content.text),
                actions=m.content.actions,
                attachments=[
                    a.model_dump(mode="json", exclude={"path"}) for a in m.content.attachments
                ],
            )
            for m in result.replies
        ],
        actions=redactor.scrub(json.loads(json.dumps(result.actions, default=str)), where=WHERE),
        thought=clean(result.thought or "") or None if include_thought else None,
        status=result.status,
        reason=clean(result.reason) if result.reason else result.reason,
        offline=result.offline,
        usage=UsageOut(**result.usage.model_dump()),
        message_id=result.inbound_id,
    )


def _failure(result: TurnResult) -> FailureNotice | None:
    """What to show for a turn the model could not answer (None for any other turn)."""
    return failure_of(result)


def _retry_after(failure: FailureNotice) -> dict[str, str]:
    if failure.retry_after is None:
        return {}
    return {"Retry-After": str(max(1, math.ceil(failure.retry_after)))}


def _sse(event: str, data: str) -> str:
    return f"event: {event}\ndata: {data}\n\n"


STREAM_SETTLE_S = 60.0
"""How long a streamed turn's replies wait for their final event to be written before they count
as delivered to the history (a caller gone before the stream even began never closes it)."""


def _stream(
    state: ApiState, runtime: AgentRuntime, message: Message, include_thought: bool
) -> Response:
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    over = asyncio.Event()  # the final event was written, or the caller went away
    # A secret split across chunks is held back until it can be replaced whole.
    pieces = current_redactor().stream(where=WHERE)

    async def on_chunk(piece: str) -> None:
        safe = pieces.feed(piece)
        if safe:
            await queue.put(("chunk", json.dumps(safe)))

    async def run() -> None:
        try:
            result = await runtime.handle(message, on_chunk=on_chunk)
        except Exception as exc:
            state.metrics.error("turn")
            if isinstance(exc, ProviderError):
                detail = current_redactor().clean(str(exc), where=WHERE)
                error = {
                    "error": "provider_failed",
                    "message": f"the model provider failed: {detail}",
                }
            else:
                log.exception("turn failed while streaming")
                error = {
                    "error": "internal_error",
                    "message": "the turn failed; see the server log",
                }
            await queue.put(("error", json.dumps(error)))
            return
        failure = _failure(result)
        if failure is not None:  # the apology as an error event, then the turn as done
            state.metrics.error("turn")
            body = ErrorBody(error=failure.code, message=failure.notice)
            await queue.put(("notice", body.model_dump_json()))
        rest = pieces.finish()
        if rest:
            await queue.put(("chunk", json.dumps(rest)))
        await queue.put(("done", _out(result, include_thought).model_dump_json()))
        # Sent once the final event is written; if the caller left first, the replies are in the
        # conversation's history, where a caller that lost its stream reads them.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(over.wait(), STREAM_SETTLE_S)
        await runtime.outbox.deliver(result.replies)

    # The turn runs on its own: a client that goes away does not cancel it, so its reply is
    # still recorded once.
    state.keep(asyncio.create_task(run()))

    async def events() -> AsyncIterator[str]:
        try:
            while True:
                event, data = await queue.get()
                yield _sse("error" if event == "notice" else event, data)
                if event not in ("chunk", "notice"):
                    return
        finally:
            over.set()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
