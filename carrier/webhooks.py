"""Platforms that call us: webhook receivers, and their discovery through ``carrier.webhooks``.

A platform adapter that is told about events by HTTP (Instagram's comments, mentions and
messages) registers a receiver factory under the group; the API serves it at
``/webhooks/{name}`` (:mod:`carrier.api.routes.webhooks`) and the core never imports the adapter::

    [project.entry-points."carrier.webhooks"]
    instagram = "clients.instagram.inbound.webhook:receiver"

The factory is called as ``factory(manager)`` (the host's :class:`~carrier.agents.AgentManager`)
and returns a :class:`WebhookReceiver`. No FastAPI here: a receiver sees query parameters,
headers and the raw body, so it can verify a signature over the exact bytes sent.

The platform cannot send a bearer token, so a receiver's signature check is the
authentication: :meth:`WebhookReceiver.accept` raises :class:`SignatureRejected` for a missing
or bad one (the route answers 403) before it stores anything, and stores what it accepted
durably (a job) before it returns, so the acknowledgement the platform gets means "kept".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from carrier.errors import CarrierError

__all__ = [
    "GROUP",
    "Accepted",
    "SignatureRejected",
    "WebhookError",
    "WebhookNotConfigured",
    "WebhookReceiver",
    "WebhookRejected",
    "discover_webhooks",
]

log = logging.getLogger(__name__)

GROUP = "carrier.webhooks"


class WebhookError(CarrierError):
    """A webhook delivery that was not accepted; the message says why (never a secret)."""


class SignatureRejected(WebhookError):
    """The delivery's signature is missing or does not match: it did not come from the
    platform (or was changed on the way). Nothing was stored."""


class WebhookRejected(WebhookError):
    """A signed delivery whose body is not what the platform sends (not JSON, another object).
    Nothing was stored."""


class WebhookNotConfigured(WebhookError):
    """The receiver lacks its secret (an app secret, a verify token): the message names the
    environment variable to set. Nothing was stored."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """What a receiver kept of one delivery."""

    stored: int
    """Events stored as new jobs."""
    duplicates: int = 0
    """Events already stored by an earlier delivery (the platform retried or duplicated it)."""
    ignored: int = 0
    """Events the receiver does not handle (another field), acknowledged and dropped."""


@runtime_checkable
class WebhookReceiver(Protocol):
    """One platform's webhook endpoint."""

    name: str

    def verify_subscription(self, params: Mapping[str, str]) -> str | None:
        """The subscription handshake (``hub.mode=subscribe``, ``hub.verify_token``,
        ``hub.challenge``): the challenge to echo when the token is the configured one, else
        ``None`` (refused). Raises :class:`WebhookNotConfigured` without a verify token."""
        ...

    async def accept(self, headers: Mapping[str, str], body: bytes) -> Accepted:
        """Verify ``body`` (the raw bytes) against the signature in ``headers`` (lower-case
        names) and store each event it carries durably, once per event however often it is
        delivered. Raises :class:`SignatureRejected`, :class:`WebhookRejected` or
        :class:`WebhookNotConfigured`, having stored nothing."""
        ...


ReceiverFactory = Callable[[Any], WebhookReceiver]


def discover_webhooks() -> dict[str, ReceiverFactory]:
    """Installed receiver factories by name. One that fails to load is logged and skipped."""
    found: dict[str, ReceiverFactory] = {}
    for ep in entry_points(group=GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # a broken adapter must not take the others down
            log.warning(
                "webhook receiver %r could not be loaded (%s: %s); skipped",
                ep.name,
                type(exc).__name__,
                exc,
            )
    return found
