"""Every state-changing API call in the audit log, allowed or refused.

:class:`AuditMiddleware` is plain ASGI and sits outermost, so it sees what the routes answer and
what the other middleware refuse (a body too large, a foreign Origin) alike. For each POST, PUT,
PATCH and DELETE it records an ``api.call`` event when the response starts, before the client
reads a byte of it: who (``admin``, or ``token:<name>`` for a per-agent token, from the
principal the auth dependency keeps on ``request.state``; ``anonymous`` when no valid token came),
the method and route template
(``POST /agents/{agent_id}/start``), the concrete path, the agent id, the status code and the
client's address. Never a body, a header or a query string. Around the call it says who acts
(:func:`carrier.audit.context.acting`), so the events recorded inside it (an agent's start, a
forget) name the same caller.

A caller without a valid token could otherwise write rows as fast as it can send requests, so
refusals of anonymous callers are recorded at most :data:`ANONYMOUS_BURST` at once and one every
``1 / ANONYMOUS_RATE`` seconds after that, per client address; the rest are counted
(:attr:`AuditMiddleware.dropped`) and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from carrier.api.ratelimit import RateLimiter
from carrier.audit.base import AuditLog
from carrier.audit.context import acting
from carrier.audit.model import AuditKind, AuditResult

__all__ = ["ANONYMOUS_BURST", "ANONYMOUS_RATE", "STATE_CHANGING", "AuditMiddleware"]

log = logging.getLogger(__name__)

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ANONYMOUS_BURST = 30
ANONYMOUS_RATE = 0.5
"""Anonymous refusals recorded per second and client address, after the burst."""


def _actor(who: Any) -> str | None:
    """``admin`` for the admin token, ``token:<name>`` for a per-agent token (a name of its own
    could be ``admin``), None before authentication."""
    if who is None:
        return None
    return str(who.name) if who.admin else f"token:{who.name}"


def _result(status: int) -> str:
    if status < 400:
        return AuditResult.OK
    return AuditResult.REFUSED if status < 500 else AuditResult.FAILED


class AuditMiddleware:
    """Records ``api.call`` events in the log ``audit()`` returns (looked up per request: the
    host may open its log after the app is built)."""

    def __init__(self, app: ASGIApp, *, audit: Callable[[], AuditLog]) -> None:
        self.app = app
        self.audit = audit
        self.dropped = 0
        """Anonymous refusals not recorded (over the per-address limit)."""
        self._anonymous = RateLimiter(rate=ANONYMOUS_RATE, burst=ANONYMOUS_BURST)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in STATE_CHANGING:
            await self.app(scope, receive, send)
            return
        recorded = False
        # The dict behind request.state, where the auth dependency leaves the principal.
        state: dict[str, Any] = scope.setdefault("state", {})

        def actor() -> str | None:
            return _actor(state.get("principal"))

        async def send_and_record(message: Message) -> None:
            nonlocal recorded
            if message["type"] == "http.response.start" and not recorded:
                recorded = True
                await self._record(scope, int(message["status"]))
            await send(message)

        try:
            with acting(actor):  # events recorded inside the call (agent.start, ...) name it
                await self.app(scope, receive, send_and_record)
        except Exception:
            if not recorded:  # the server answers 500 for it, outside this middleware
                recorded = True
                await self._record(scope, 500)
            raise

    async def _record(self, scope: Scope, status: int) -> None:
        state: dict[str, Any] = scope.get("state") or {}
        who = state.get("principal")
        client = scope.get("client")
        address = str(client[0]) if client else None
        if who is None and status >= 400 and self._anonymous.hit(f"anon:{address}") > 0:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning(
                    "audit: %d refused anonymous calls not recorded (over %d at once or %.1f/s "
                    "from one address; the latest from %s)",
                    self.dropped,
                    ANONYMOUS_BURST,
                    ANONYMOUS_RATE,
                    address,
                )
            return
        method = str(scope["method"])
        route = getattr(scope.get("route"), "path", None)
        params = scope.get("path_params") or {}
        agent_id = params.get("agent_id") or getattr(who, "agent_id", None)
        detail: dict[str, Any] = {"method": method, "route": route, "status": status}
        if address is not None:
            detail["client"] = address
        await self.audit().record(
            AuditKind.API_CALL,
            actor=_actor(who) or "anonymous",
            agent_id=str(agent_id) if agent_id is not None else None,
            action=f"{method} {route or '(no route)'}",
            target=str(scope.get("path", ""))[:300],
            result=_result(status),
            detail=detail,
        )
