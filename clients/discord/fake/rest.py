"""The fake Discord's REST API: the routes the client uses, with every call recorded.

A call authorized with a bot's token acts as that bot (its user, its application, the author
of what it sends); interaction callbacks and webhooks, which carry no token, act as the default
bot.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from clients.discord.fake.payloads import Json

if TYPE_CHECKING:
    from clients.discord.fake.server import FakeDiscord
    from clients.discord.fake.world import Bot

__all__ = ["Rest", "Sent"]

Handler = Callable[[web.Request, re.Match[str]], Awaitable[web.StreamResponse]]


@dataclass
class Sent:
    """A message the bot sent: where, the request payload as sent, the resulting message."""

    channel_id: int
    payload: Json
    message: Json
    at: float = field(default_factory=time.perf_counter)
    """When the fake received it (``time.perf_counter``)."""

    @property
    def content(self) -> str:
        return str(self.payload.get("content") or "")

    @property
    def author_id(self) -> int:
        """The bot that sent it."""
        return int(self.message["author"]["id"])


def _json(data: Any, status: int = 200) -> web.Response:
    # Exactly "application/json" (no charset): discord.py only decodes JSON with that header.
    return web.Response(
        body=json.dumps(data).encode(), status=status, content_type="application/json"
    )


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"code": code, "message": message}, status)


class Rest:
    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.sent: list[Sent] = []
        self.sent_to: Counter[int] = Counter()
        """How many messages the bot sent, by channel id."""
        self.changed = asyncio.Condition()
        self.typing: list[int] = []
        self.interaction_responses: list[Json] = []
        self.followups: list[Json] = []
        self.synced: dict[str, list[Json]] = {}
        self.unknown: list[str] = []
        self._interactions_by_token: dict[str, Json] = {}
        self._nonces: dict[tuple[int, str], tuple[float, Json]] = {}
        """The bots' messages by (bot id, nonce), when created (``enforce_nonce``)."""
        self.nonce_window_s = 300.0
        """How long a nonce is enforced: Discord says "the past few minutes"."""
        self.nonce_hits = 0
        """Sends answered with the message an earlier send of the same nonce created."""
        self.refused: dict[int, tuple[int, int, str]] = {}
        """Channels the bot may not write in: channel id → (status, code, message) answered."""
        self._routes: list[tuple[str, re.Pattern[str], Handler, bool]] = []
        add = self._add
        add("GET", r"users/@me", self._me)
        add("GET", r"oauth2/applications/@me", self._application)
        add("GET", r"applications/@me", self._application)
        add("GET", r"gateway/bot", self._gateway_bot)
        add("GET", r"gateway", self._gateway)
        add("POST", r"channels/(?P<cid>\d+)/messages", self._create_message)
        add("POST", r"channels/(?P<cid>\d+)/typing", self._typing)
        add("GET", r"channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", self._get_message)
        add("GET", r"channels/(?P<cid>\d+)", self._get_channel)
        add("POST", r"users/@me/channels", self._open_dm)
        add("PUT", r"applications/\d+/commands", self._sync)
        add("PUT", r"applications/\d+/guilds/(?P<gid>\d+)/commands", self._sync)
        add(
            "POST",
            r"interactions/(?P<iid>\d+)/(?P<token>[^/]+)/callback",
            self._callback,
            auth=False,
        )
        add("POST", r"webhooks/\d+/(?P<token>[^/]+)", self._followup, auth=False)

    def _add(self, method: str, pattern: str, handler: Handler, *, auth: bool = True) -> None:
        self._routes.append((method, re.compile(pattern + r"/?"), handler, auth))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        tail = request.match_info["tail"]
        for method, pattern, handler, auth in self._routes:
            match = pattern.fullmatch(tail)
            if match is None or method != request.method:
                continue
            if auth and self._token_bot(request) is None:
                return _error(401, 0, "401: Unauthorized")
            return await handler(request, match)
        self.unknown.append(f"{request.method} {tail}")
        return _error(404, 0, "404: Not Found (fake Discord has no such route)")

    async def cdn(self, request: web.Request) -> web.StreamResponse:
        found = self.fake.files.get(request.match_info["name"])
        if found is None:
            return _error(404, 0, "404: Not Found")
        return web.Response(body=found[0], content_type=found[1].split(";")[0])

    @staticmethod
    async def _payload(request: web.Request) -> Any:
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            raw = form.get("payload_json")
            return json.loads(str(raw)) if raw is not None else {}
        if not request.can_read_body:
            return {}
        return await request.json()

    def _token_bot(self, request: web.Request) -> Bot | None:
        """The bot whose token authorizes the call, if any."""
        header = request.headers.get("Authorization") or ""
        if not header.startswith("Bot "):
            return None
        return self.fake.bot_with_token(header.removeprefix("Bot "))

    def _bot(self, request: web.Request) -> Bot:
        """The bot a call acts as: its token's (the default bot for calls without a token)."""
        return self._token_bot(request) or self.fake.default_bot

    # -- routes -----------------------------------------------------------------------------
    async def _me(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        user = self._bot(request).user
        return _json({**user, "verified": True, "mfa_enabled": False, "flags": 0})

    async def _application(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        bot = self._bot(request)
        return _json(
            {
                "id": str(bot.id),
                "name": bot.name,
                "icon": None,
                "description": "",
                "rpc_origins": [],
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": self.fake.owner,
                "summary": "",
                "verify_key": "0" * 64,
                "flags": self.fake.application_flags,
                "team": None,
            }
        )

    async def _gateway_bot(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 16}
        return _json(
            {
                "url": self.fake.gateway_url,
                "shards": self.fake.recommended_shards,
                "session_start_limit": limit,
            }
        )

    async def _gateway(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        return _json({"url": self.fake.gateway_url})

    async def _create_message(
        self, request: web.Request, match: re.Match[str]
    ) -> web.StreamResponse:
        channel_id = int(match["cid"])
        payload = await self._payload(request)
        if channel_id in self.refused:
            return _error(*self.refused[channel_id])
        # Like Discord: with enforce_nonce, a nonce the bot used in the past few minutes gets
        # back the message it created then, and nothing new is posted.
        bot = self._bot(request)
        nonce = (
            str(payload["nonce"]) if payload.get("enforce_nonce") and "nonce" in payload else None
        )
        if nonce is not None:
            seen = self._nonces.get((bot.id, nonce))
            if seen is not None and time.monotonic() - seen[0] < self.nonce_window_s:
                self.nonce_hits += 1
                return _json(seen[1])
        reply_to = None
        ref = payload.get("message_reference")
        if ref:
            if int(ref["message_id"]) in self.fake.messages:
                reply_to = int(ref["message_id"])
            elif ref.get("fail_if_not_exists", True):
                return _error(400, 50035, "Invalid Form Body: message_reference: Unknown message")
        message = self.fake.make_message(
            bot.user,
            payload.get("content") or "",
            channel=channel_id,
            reply_to=reply_to,
            flags=payload.get("flags") or 0,
        )
        if nonce is not None:
            message["nonce"] = nonce
            self._nonces[bot.id, nonce] = (time.monotonic(), message)
        self.sent.append(Sent(channel_id=channel_id, payload=payload, message=message))
        self.sent_to[channel_id] += 1
        async with self.changed:
            self.changed.notify_all()
        # Like Discord, the bot's own message comes back to it through the gateway.
        await self.fake.dispatch("MESSAGE_CREATE", message, guild_id=self.fake.guild_of(channel_id))
        return _json(message)

    async def _get_message(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        message = self.fake.messages.get(int(match["mid"]))
        if message is None or int(message["channel_id"]) != int(match["cid"]):
            return _error(404, 10008, "Unknown Message")
        return _json(message)

    async def _get_channel(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        from clients.discord.fake.payloads import dm_channel

        cid = int(match["cid"])
        for guild in self.fake.guilds.values():
            for data in (*guild.channel_payloads, *guild.thread_payloads):
                if int(data["id"]) == cid:
                    return _json(data)
        for uid, dm in self.fake.dm_channels.items():
            if dm == cid:
                return _json(dm_channel(cid, self.fake.users[uid]))
        return _error(404, 10003, "Unknown Channel")

    async def _typing(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        self.typing.append(int(match["cid"]))
        return web.Response(status=204)

    async def _open_dm(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        from clients.discord.fake.payloads import dm_channel

        payload = await self._payload(request)
        recipient = self.fake.users[int(payload["recipient_id"])]
        return _json(dm_channel(self.fake.dm_channel(recipient), recipient))

    async def _sync(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        commands = await self._payload(request)
        gid = match.groupdict().get("gid")
        self.synced[gid or "global"] = commands
        out = []
        for command in commands:
            data = {
                **command,
                "id": str(self.fake.ids()),
                "application_id": str(self._bot(request).id),
                "version": "1",
            }
            data.setdefault("type", 1)
            if gid:
                data["guild_id"] = gid
            out.append(data)
        return _json(out)

    async def _callback(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        body = await self._payload(request)
        self.interaction_responses.append(body)
        kind = int(body.get("type", 0))
        data = body.get("data") or {}
        ephemeral = bool(int(data.get("flags") or 0) & 64)
        interaction = {
            "id": match["iid"],
            "type": 2,
            "response_message_loading": kind == 5,
            "response_message_ephemeral": ephemeral,
        }
        resource: Json = {"type": kind}
        if kind == 4:
            channel = self._interaction_channel(match["token"])
            message = self.fake.make_message(
                self.fake.bot,
                data.get("content") or "",
                channel=channel,
                flags=data.get("flags") or 0,
            )
            interaction["response_message_id"] = message["id"]
            resource["message"] = message
        return _json({"interaction": interaction, "resource": resource})

    async def _followup(self, request: web.Request, match: re.Match[str]) -> web.StreamResponse:
        body = await self._payload(request)
        self.followups.append(body)
        channel = self._interaction_channel(match["token"])
        message = self.fake.make_message(
            self.fake.bot,
            body.get("content") or "",
            channel=channel,
            webhook_id=self.fake.application_id,
        )
        return _json(message)

    def _interaction_channel(self, token: str) -> int:
        return int(self._interactions_by_token[token]["channel_id"])

    def remember_interaction(self, data: Json) -> None:
        self._interactions_by_token[data["token"]] = data
