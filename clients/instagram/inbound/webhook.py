"""``/webhooks/instagram``: Meta's deliveries verified, each event stored as a durable job.

Served by the API of any process (the web process of a web + worker deployment too): it only
verifies and enqueues. ``X-Hub-Signature-256`` must be ``sha256=`` + HMAC-SHA256 of the raw body
under the app secret (``INSTAGRAM_APP_SECRET``), compared in constant time; a missing or wrong
one is refused before anything is read or stored. Each event (a comment, a mention, a DM)
becomes one ``instagram.inbound`` job keyed by its platform id (:attr:`InboundEvent.key`), so the
duplicates Meta sends are stored once, and the job store holds the event before the delivery is
acknowledged: a crash after the 200 loses nothing. The worker that runs the agent's Instagram
client runs the job (:mod:`clients.instagram.inbound.handler`).

The subscription handshake answers ``hub.challenge`` when ``hub.verify_token`` is
``INSTAGRAM_WEBHOOK_VERIFY_TOKEN``. Both secrets come from the environment and are never stored
or logged.

The account a delivery is for (``entry.id``) is matched to the agent whose Instagram account
it is (``clientConfig.instagram.igUserId``, or its ``INSTAGRAM_BUSINESS_ACCOUNT_ID`` secret); a
job whose account no agent has here yet is stored without one and matched by the worker.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Mapping
from typing import Any

from carrier.character import parse_character
from carrier.errors import CarrierError
from carrier.jobs.base import JobStore
from carrier.webhooks import (
    Accepted,
    SignatureRejected,
    WebhookNotConfigured,
    WebhookRejected,
)
from clients.instagram.inbound.events import InboundEvent, parse_delivery

__all__ = [
    "APP_SECRET_ENV",
    "INBOUND_JOB_KIND",
    "VERIFY_TOKEN_ENV",
    "AccountIndex",
    "InstagramWebhooks",
    "receiver",
]

log = logging.getLogger(__name__)

APP_SECRET_ENV = "INSTAGRAM_APP_SECRET"
VERIFY_TOKEN_ENV = "INSTAGRAM_WEBHOOK_VERIFY_TOKEN"
INBOUND_JOB_KIND = "instagram.inbound"
ACCOUNT_ID_SECRET = "INSTAGRAM_BUSINESS_ACCOUNT_ID"
_INDEX_TTL_S = 30.0
_UNKNOWN_RETRY_S = 5.0


class AccountIndex:
    """Which agent an Instagram account belongs to, read from the stored agents (refreshed
    every 30 s, and at once for an account it does not know)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._agents: dict[str, str] = {}
        self._read_at = float("-inf")

    async def agent_for(self, account_id: str) -> str | None:
        age = time.monotonic() - self._read_at
        # An account not known yet (a new agent) is looked for again, at most every few seconds.
        if age >= _INDEX_TTL_S or (account_id not in self._agents and age >= _UNKNOWN_RETRY_S):
            await self._read()
        return self._agents.get(account_id)

    async def _read(self) -> None:
        found: dict[str, str] = {}
        environ = getattr(self.manager, "environ", {})
        for record in await self.manager.list():
            try:
                character = parse_character(record.character)
            except CarrierError:
                continue
            config = character.client_config.get("instagram") or {}
            if "instagram" not in [c.lower() for c in character.clients] and not config:
                continue
            account = config.get("igUserId") or config.get("ig_user_id")
            account = account or character.resolve_secret(ACCOUNT_ID_SECRET, environ)
            if account:
                found.setdefault(str(account), record.id)
        self._agents, self._read_at = found, time.monotonic()


class InstagramWebhooks:
    """The :class:`carrier.webhooks.WebhookReceiver` of Instagram."""

    name = "instagram"

    def __init__(self, *, manager: Any, environ: Mapping[str, str]) -> None:
        self.manager = manager
        self._environ = environ
        self.accounts = AccountIndex(manager)

    # -- the handshake -----------------------------------------------------------------------
    def verify_subscription(self, params: Mapping[str, str]) -> str | None:
        expected = self._environ.get(VERIFY_TOKEN_ENV)
        if not expected:
            raise WebhookNotConfigured(
                f"{VERIFY_TOKEN_ENV} is not set: set it to the verify token entered in the Meta "
                "app's webhook settings"
            )
        given = params.get("hub.verify_token", "")
        if params.get("hub.mode") != "subscribe" or not hmac.compare_digest(
            given.encode(), expected.encode()
        ):
            return None
        return params.get("hub.challenge") or None

    # -- deliveries --------------------------------------------------------------------------
    async def accept(self, headers: Mapping[str, str], body: bytes) -> Accepted:
        self._verify(headers, body)
        try:
            events, ignored = parse_delivery(body)
        except ValueError as exc:
            raise WebhookRejected(f"signed, but {exc}") from None
        jobs = self._jobs()
        await jobs.open()
        stored = duplicates = 0
        for event in events:
            if event.own:  # the account's own comment or DM (our replies): nothing to answer
                ignored += 1
                continue
            now = jobs.clock()
            job = await jobs.enqueue(
                INBOUND_JOB_KIND,
                agent_id=await self.accounts.agent_for(event.account_id),
                payload=event.model_dump(mode="json"),
                idempotency_key=event.key,
                max_attempts=5,
                now=now,
            )
            if job.created_at == now and job.payload.get("id") == event.id:
                stored += 1
            else:
                duplicates += 1
        if duplicates:
            log.info("instagram webhook: %d event(s) delivered again, stored once", duplicates)
        return Accepted(stored=stored, duplicates=duplicates, ignored=ignored)

    def _verify(self, headers: Mapping[str, str], body: bytes) -> None:
        secret = self._environ.get(APP_SECRET_ENV)
        if not secret:
            raise WebhookNotConfigured(
                f"{APP_SECRET_ENV} is not set: set it to the Meta app's secret (App settings → "
                "Basic) so deliveries can be verified"
            )
        given = headers.get("x-hub-signature-256", "")
        if not given.startswith("sha256="):
            raise SignatureRejected("the delivery has no X-Hub-Signature-256 header")
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given[len("sha256=") :].lower().encode(), expected.encode()):
            raise SignatureRejected(
                f"X-Hub-Signature-256 does not match the body under {APP_SECRET_ENV}"
            )

    def _jobs(self) -> JobStore:
        store = getattr(self.manager, "services", {}).get("jobs")
        if not isinstance(store, JobStore):
            raise WebhookNotConfigured(
                "this process keeps no job store, so Instagram deliveries cannot be kept; "
                "serve webhooks from `carrier run` or `carrier serve`"
            )
        return store


def receiver(manager: Any) -> InstagramWebhooks:
    """The ``carrier.webhooks`` entry point: the receiver for ``manager``'s process, reading its
    secrets from the manager's environment."""
    return InstagramWebhooks(manager=manager, environ=getattr(manager, "environ", {}))


def event_of(payload: Mapping[str, Any]) -> InboundEvent:
    """A job's payload back as its event."""
    return InboundEvent.model_validate(dict(payload))
