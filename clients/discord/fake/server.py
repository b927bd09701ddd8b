"""``FakeDiscord``: Discord's REST API and gateway on loopback, for tests and benchmarks.

discord.py runs unchanged against it (real HTTP, real websocket, real event parsing); only the
base URLs are pointed at 127.0.0.1 while the fake is open::

    async with FakeDiscord() as fake:
        guild = fake.add_guild("Jam", ["general"])
        ana = fake.add_member(guild, "ana")
        client = create_client(runtime, {}, {"DISCORD_API_TOKEN": fake.token})
        await client.start()
        await fake.post(ana, "hi <@%d>" % fake.bot_id, channel=guild.channels["general"])

Everything the bot does is recorded: ``sent`` (message payloads, with ``allowed_mentions`` and
``message_reference`` as sent), ``typing``, ``interaction_responses``, ``followups``, ``synced``.

Several bots: ``bot = fake.add_bot("Pilot", guilds=[guild])`` is another application with its
own token (``bot.token``, ``bot.id``). REST calls with its token act as it (what it sends has it
as author: ``Sent.author_id``); a gateway identify with its token gets its READY user and only
its guilds; an event in a guild reaches the session of every bot in that guild.

An outage: ``fake.refuse()`` answers every request 503 (``rest=False``: the gateway only) and
counts them in ``refused``; ``await fake.gateway.drop_all()`` cuts the open sessions;
``fake.accept()`` ends it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, Self

import discord
import discord.gateway
import discord.http
import yarl
from aiohttp import web

from clients.discord.fake import payloads as p
from clients.discord.fake.gateway import MEMBERS, MESSAGE_CONTENT, Gateway, Session
from clients.discord.fake.payloads import Json
from clients.discord.fake.rest import Rest, Sent
from clients.discord.fake.world import Guild, World

__all__ = ["FakeDiscord", "Guild", "Sent"]

log = logging.getLogger(__name__)

_APP_GUILD_MEMBERS = 1 << 14
_APP_MESSAGE_CONTENT = 1 << 18


class FakeDiscord(World):
    """A loopback Discord. ``message_content_enabled=False`` makes the gateway refuse the
    Message Content intent with close code 4014; ``shards`` is what /gateway/bot recommends."""

    def __init__(
        self,
        *,
        token: str = "fake-bot-token",
        bot_name: str = "Harbor",
        message_content_enabled: bool = True,
        members_enabled: bool = True,
        shards: int = 1,
    ) -> None:
        super().__init__(bot_name=bot_name, token=token)
        self.token = token
        self.enabled_intents = (MESSAGE_CONTENT if message_content_enabled else 0) | (
            MEMBERS if members_enabled else 0
        )
        self.recommended_shards = shards
        self.dispatched: Counter[str] = Counter()
        self.gateway = Gateway(
            url=lambda: self.gateway_url,
            ready_payload=self._ready,
            guilds_for=lambda session: self._guilds_for(session.shard, bot_id=session.bot_id),
            enabled_intents=lambda: self.enabled_intents,
            bot_of=self._bot_of,
        )
        self.rest = Rest(self)
        self.refusing: set[str] = set()
        """What answers 503 now: ``"gateway"`` (the websocket upgrade), ``"rest"`` (the API)."""
        self.refused: Counter[str] = Counter()
        """Requests refused so far, by ``"gateway"`` and ``"rest"``."""
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._saved: tuple[str, yarl.URL] | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    async def start(self) -> None:
        app = web.Application(client_max_size=32 * 1024 * 1024, middlewares=[self._outage])
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_get("/cdn/{name}", self.rest.cdn)
        app.router.add_route("*", "/api/v10/{tail:.*}", self.rest.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        self._saved = (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
        discord.http.Route.BASE = f"{self.base_url}/api/v10"
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)

    @web.middleware
    async def _outage(self, request: web.Request, handler: Any) -> web.StreamResponse:
        kind = "gateway" if request.path == "/gateway" else "rest"
        if kind in self.refusing:
            self.refused[kind] += 1
            body = {"code": 0, "message": "503: Service Unavailable (fake outage)"}
            return web.Response(
                body=json.dumps(body).encode(), status=503, content_type="application/json"
            )
        response: web.StreamResponse = await handler(request)
        return response

    def refuse(self, *, gateway: bool = True, rest: bool = True) -> None:
        """Start an outage: the gateway's websocket upgrade and (``rest``) the REST API answer
        503 until :meth:`accept`. Open sessions stay up: ``gateway.drop_all()`` cuts them."""
        self.refusing = {k for k, on in (("gateway", gateway), ("rest", rest)) if on}

    def accept(self) -> None:
        """End the outage."""
        self.refusing = set()

    async def close(self) -> None:
        if self._saved is not None:
            discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self._saved
            self._saved = None
        await self.gateway.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def application_flags(self) -> int:
        """The application's flags as the REST API shows them: the privileged intents enabled
        (``GATEWAY_MESSAGE_CONTENT``, ``GATEWAY_GUILD_MEMBERS``), as the gateway enforces them."""
        flags = _APP_MESSAGE_CONTENT if self.enabled_intents & MESSAGE_CONTENT else 0
        return flags | (_APP_GUILD_MEMBERS if self.enabled_intents & MEMBERS else 0)

    # -- gateway ------------------------------------------------------------------------------
    def _bot_of(self, token: str) -> int:
        """The bot a gateway identify acts as: the token's (the default bot's when unknown)."""
        return (self.bot_with_token(token) or self.default_bot).id

    def _ready(self, session: Session) -> Json:
        bot = next((b for b in self.bots.values() if b.id == session.bot_id), self.default_bot)
        return {
            "v": 10,
            "user": {**bot.user, "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [
                {"id": str(g.id), "unavailable": True}
                for g in self._guilds_for(session.shard, raw=True, bot_id=bot.id)
            ],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway_url,
            "shard": list(session.shard),
            "application": {"id": str(bot.id), "flags": self.application_flags},
            "private_channels": [],
            "relationships": [],
            "presences": [],
        }

    def _guilds_for(
        self, shard: tuple[int, int], raw: bool = False, bot_id: int | None = None
    ) -> list[Any]:
        """The guilds of a shard (those ``bot_id`` is a member of, when given)."""
        shard_id, count = shard
        guilds = [
            g
            for g in self.guilds.values()
            if (g.id >> 22) % count == shard_id and (bot_id is None or bot_id in g.members)
        ]
        return guilds if raw else [g.payload() for g in guilds]

    async def dispatch(self, event: str, data: Json, *, guild_id: int | None = None) -> None:
        """Send one gateway event to the session that owns the guild (shard 0 for DMs), of each
        bot in the guild that has one."""
        bots = [bot.id for bot in self.bots_in(guild_id)]
        for _ in range(200):  # a session may be reconnecting; wait for it up to ~2 s
            if await self.gateway.dispatch(event, data, guild_id=guild_id, bots=bots):
                self.dispatched[event] += 1
                return
            await asyncio.sleep(0.01)
        raise RuntimeError(
            f"fake Discord: no connected session for guild {guild_id} to send {event} to"
        )

    # -- what the bot did ------------------------------------------------------------------------
    @property
    def sent(self) -> list[Sent]:
        return self.rest.sent

    @property
    def typing(self) -> list[int]:
        return self.rest.typing

    @property
    def interaction_responses(self) -> list[Json]:
        return self.rest.interaction_responses

    @property
    def followups(self) -> list[Json]:
        return self.rest.followups

    @property
    def synced(self) -> dict[str, list[Json]]:
        return self.rest.synced

    async def wait_until(self, predicate: Callable[[], bool], within: float = 5.0) -> None:
        """Wait for ``predicate()`` to hold (it is polled); TimeoutError after ``within`` s."""
        async with asyncio.timeout(within):
            while not predicate():  # noqa: ASYNC110 - the state lives in the client under test
                await asyncio.sleep(0.005)

    async def wait_sent(self, channel_id: int, count: int, within: float = 5.0) -> None:
        """Wait until the bot has sent ``count`` messages to ``channel_id`` (no polling)."""
        async with asyncio.timeout(within), self.rest.changed:
            await self.rest.changed.wait_for(lambda: self.rest.sent_to[channel_id] >= count)

    async def request_reconnect(self) -> None:
        await self.gateway.reconnect_all()

    # -- what people do -------------------------------------------------------------------------
    async def post(
        self,
        author: Json,
        content: str,
        *,
        channel: int | None = None,
        mentions: list[Json] = (),  # type: ignore[assignment]
        mention_roles: list[int] = (),  # type: ignore[assignment]
        reply_to: int | None = None,
        attachments: list[Json] = (),  # type: ignore[assignment]
    ) -> Json:
        """``author`` sends a message: in ``channel``, or in a DM with the bot when it is None."""
        data = self.make_message(
            author, content, channel=channel, mentions=mentions, mention_roles=mention_roles,
            reply_to=reply_to, attachments=attachments,
        )  # fmt: skip
        await self.dispatch("MESSAGE_CREATE", data, guild_id=self.guild_of(int(data["channel_id"])))
        return data

    async def react(self, user_data: Json, message_id: int, emoji: str = "👍") -> None:
        stored = self.messages[message_id]
        channel_id = int(stored["channel_id"])
        guild_id = self.guild_of(channel_id)
        data: Json = {
            "user_id": user_data["id"],
            "channel_id": str(channel_id),
            "message_id": str(message_id),
            "message_author_id": stored["author"]["id"],
            "emoji": {"id": None, "name": emoji},
            "burst": False,
            "type": 0,
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
            data["member"] = self.guilds[guild_id].members[int(user_data["id"])]
        await self.dispatch("MESSAGE_REACTION_ADD", data, guild_id=guild_id)

    async def slash(
        self,
        user_data: Json,
        name: str,
        *,
        channel: int,
        options: dict[str, Any] | None = None,
        permissions: str = p.MEMBER_PERMISSIONS,
    ) -> Json:
        """``user_data`` runs ``/name`` in ``channel`` with the given permissions there."""
        data = self.make_interaction(
            user_data, name, channel=channel, options=options, permissions=permissions
        )
        self.rest.remember_interaction(data)
        await self.dispatch("INTERACTION_CREATE", data, guild_id=self.guild_of(channel))
        return data
