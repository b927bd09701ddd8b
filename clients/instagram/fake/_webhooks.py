"""Webhook delivery of :class:`~clients.instagram.fake.graph.FakeGraphAPI`: Meta-shaped
notifications for comments, mentions and messages, POSTed to a subscriber's URL and signed as
Meta signs them (``X-Hub-Signature-256: sha256=`` + HMAC-SHA256 of the raw body with the app
secret), with retries of refused deliveries and deliberate duplicates on demand.

The shapes are those of the Instagram webhooks for apps with Facebook Login: ``comments`` and
``mentions`` as ``entry[].changes[]`` (``{"field": ..., "value": ...}``), messages as
``entry[].messaging[]`` (``sender``, ``recipient``, ``timestamp`` in ms, ``message.mid``,
``message.text``)::

    fake.webhooks.url = f"{api}/webhooks/instagram"
    comment = fake.conversations.person_comments(media_id, "what film is this?", ...)
    statuses = await fake.webhooks.deliver(fake.webhooks.comment(comment), times=3)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from clients.instagram.fake._conversations import FakeComment, FakeMessage

__all__ = ["WebhookSender", "sign"]


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value of ``body`` under ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookSender:
    """Delivers notifications for one account (``ig_user_id``) to :attr:`url`."""

    def __init__(self, *, ig_user_id: str, app_secret: str) -> None:
        self.ig_user_id = ig_user_id
        self.app_secret = app_secret
        self.url: str | None = None
        """The subscriber's callback URL (``https://host/webhooks/instagram``)."""
        self.verify_token: str | None = None
        self.retries = 3
        """How many times a delivery the subscriber did not acknowledge (not 200) is retried."""
        self.delivered: list[tuple[int, bytes]] = []
        """(status, body) of every POST made, retries and duplicates included."""

    # -- payloads ----------------------------------------------------------------------------
    def _entry(self, **content: Any) -> dict[str, Any]:
        return {
            "object": "instagram",
            "entry": [{"id": self.ig_user_id, "time": int(time.time()), **content}],
        }

    def comment(self, comment: FakeComment, *, field: str = "comments") -> dict[str, Any]:
        value: dict[str, Any] = {
            "id": comment.id,
            "from": {"id": comment.user_id, "username": comment.username},
            "text": comment.text,
            "media": {"id": comment.media_id, "media_product_type": "FEED"},
        }
        if comment.parent_id:
            value["parent_id"] = comment.parent_id
        return self._entry(changes=[{"field": field, "value": value}])

    def mention(self, comment: FakeComment) -> dict[str, Any]:
        value = {"comment_id": comment.id, "media_id": comment.media_id}
        return self._entry(changes=[{"field": "mentions", "value": value}])

    def message(self, message: FakeMessage) -> dict[str, Any]:
        event: dict[str, Any] = {
            "sender": {"id": message.sender},
            "recipient": {"id": message.recipient},
            "timestamp": int(message.at.timestamp() * 1000),
            "message": {"mid": message.id, "text": message.text},
        }
        if message.sender == self.ig_user_id:
            event["message"]["is_echo"] = True
        return self._entry(messaging=[event])

    def batch(self, payloads: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Several notifications in one delivery (Meta batches up to 1000 updates)."""
        return {"object": "instagram", "entry": [e for p in payloads for e in p["entry"]]}

    # -- delivery ----------------------------------------------------------------------------
    async def deliver(
        self,
        payload: dict[str, Any],
        *,
        times: int = 1,
        signature: str | None = None,
        signed: bool = True,
        http: httpx.AsyncClient | None = None,
    ) -> list[int]:
        """POST ``payload`` ``times`` times (duplicates, as Meta sends some), each retried up to
        :attr:`retries` times until acknowledged with 200. ``signature`` replaces the right one
        (a forged delivery); ``signed=False`` sends none. Returns every status seen."""
        if self.url is None:
            raise RuntimeError("set fake.webhooks.url to the subscriber's callback URL first")
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if signed:
            headers["X-Hub-Signature-256"] = signature or sign(self.app_secret, body)
        statuses: list[int] = []
        own = http is None
        client = http or httpx.AsyncClient(timeout=30)
        try:
            for _ in range(times):
                for _attempt in range(1 + self.retries):
                    response = await client.post(self.url, content=body, headers=headers)
                    statuses.append(response.status_code)
                    self.delivered.append((response.status_code, body))
                    if response.status_code == 200:
                        break
        finally:
            if own:
                await client.aclose()
        return statuses

    async def verify(
        self, *, token: str | None = None, challenge: str = "1158201444", http: httpx.AsyncClient
    ) -> httpx.Response:
        """The subscription handshake Meta makes when the callback URL is saved."""
        if self.url is None:
            raise RuntimeError("set fake.webhooks.url to the subscriber's callback URL first")
        params = {
            "hub.mode": "subscribe",
            "hub.verify_token": token if token is not None else (self.verify_token or ""),
            "hub.challenge": challenge,
        }
        return await http.get(self.url, params=params)
