"""``/webhooks/{name}``: platforms that call us (Instagram's comments, mentions and messages).

``GET`` is the subscription handshake: ``hub.mode=subscribe`` with the configured
``hub.verify_token`` is answered with ``hub.challenge`` as text; anything else is 403. ``POST``
is a delivery: its raw body is verified against the platform's signature by the adapter's
receiver (:mod:`carrier.webhooks`), stored as durable jobs, and acknowledged with 200 at once;
the work is done by the worker that runs the platform's client. A missing or bad signature is
403 and nothing is stored.

No bearer token here: the platform cannot send one, so the signature is the authentication.
The API's body-size limit applies as to every route. An unknown name is 404.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ErrorBody
from carrier.api.state import ApiState, api_state
from carrier.webhooks import (
    SignatureRejected,
    WebhookNotConfigured,
    WebhookReceiver,
    WebhookRejected,
    discover_webhooks,
)

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

Name = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$", description="`instagram`.")]
State = Annotated[ApiState, Depends(api_state)]
_NOT_CONFIGURED: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorBody,
        "description": "The receiver lacks its secret (the message names it).",
    }
}


def _receiver(request: Request, state: ApiState, name: str) -> WebhookReceiver:
    """The app's receiver for ``name``, built from its factory once per app."""
    receivers: dict[str, WebhookReceiver] | None = getattr(request.app.state, "webhooks", None)
    if receivers is None:
        receivers = {}
        for found, factory in discover_webhooks().items():
            try:
                receivers[found] = factory(state.manager)
            except Exception as exc:  # one broken adapter leaves the others served
                log.warning(
                    "webhook receiver %r not served (%s: %s)", found, type(exc).__name__, exc
                )
        request.app.state.webhooks = receivers
    receiver = receivers.get(name)
    if receiver is None:
        raise ApiError(404, "not_found", f"no webhook receiver named {name!r} is installed")
    return receiver


@router.get(
    "/{name}",
    response_model=None,
    summary="Webhook subscription handshake",
    responses={
        200: {
            "description": "The challenge, echoed.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **error_responses(403, 404, 422),
        **_NOT_CONFIGURED,
    },
)
async def verify_subscription(name: Name, request: Request, state: State) -> PlainTextResponse:
    receiver = _receiver(request, state, name)
    try:
        challenge = receiver.verify_subscription(dict(request.query_params))
    except WebhookNotConfigured as exc:
        raise ApiError(503, "not_configured", str(exc)) from None
    if challenge is None:
        raise ApiError(
            403,
            "forbidden",
            "not a subscription request with the configured verify token (hub.mode=subscribe, "
            "hub.verify_token, hub.challenge)",
        )
    return PlainTextResponse(challenge)


@router.post(
    "/{name}",
    summary="Receive a webhook delivery",
    responses={**error_responses(400, 403, 404, 413, 422), **_NOT_CONFIGURED},
)
async def deliver(name: Name, request: Request, state: State) -> JSONResponse:
    receiver = _receiver(request, state, name)
    body = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        accepted = await receiver.accept(headers, body)
    except SignatureRejected as exc:
        raise ApiError(403, "bad_signature", str(exc)) from None
    except WebhookRejected as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    except WebhookNotConfigured as exc:
        raise ApiError(503, "not_configured", str(exc)) from None
    return JSONResponse(
        {
            "stored": accepted.stored,
            "duplicates": accepted.duplicates,
            "ignored": accepted.ignored,
        }
    )
