"""The fake gateway: a websocket speaking Discord's gateway protocol (v10, JSON, uncompressed).

HELLO → IDENTIFY → READY + one GUILD_CREATE per guild of the shard, heartbeats acknowledged,
RESUME answered with RESUMED, and close code 4014 when the identify asks for a privileged intent
the "application" has not enabled, exactly as Discord does. A session belongs to the bot whose
token identified it (``bot_of``): it gets that bot's READY, guilds and events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from clients.discord.fake.payloads import Json

__all__ = ["Gateway", "Session"]

log = logging.getLogger(__name__)

MESSAGE_CONTENT = 1 << 15
MEMBERS = 1 << 1
PRESENCES = 1 << 8


@dataclass
class Session:
    ws: web.WebSocketResponse
    shard: tuple[int, int] = (0, 1)
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    seq: int = 0
    ready: bool = False
    bot_id: int = 0
    """The bot whose token identified the session."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, op: int, data: Any = None, event: str | None = None) -> None:
        async with self.lock:
            payload: Json = {"op": op, "d": data}
            if op == 0:
                self.seq += 1
                payload.update(s=self.seq, t=event)
            if not self.ws.closed:
                await self.ws.send_str(json.dumps(payload))


class Gateway:
    """One websocket endpoint; ``ready_payload(session)``, ``guilds_for(session)`` and
    ``bot_of(token)`` (the bot id a token identifies as) come from the server, which owns the
    world."""

    def __init__(
        self,
        *,
        url: Callable[[], str],
        ready_payload: Callable[[Session], Json],
        guilds_for: Callable[[Session], list[Json]],
        enabled_intents: Callable[[], int],
        bot_of: Callable[[str], int] = lambda token: 0,
    ) -> None:
        self._url = url
        self._ready_payload = ready_payload
        self._guilds_for = guilds_for
        self._enabled = enabled_intents
        self._bot_of = bot_of
        self.sessions: list[Session] = []
        self.identifies: list[Json] = []
        self.resumes: list[Json] = []
        self._by_id: dict[str, Session] = {}

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        session = Session(ws=ws)
        await session.send(10, {"heartbeat_interval": 41250})
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                await self._on_payload(session, json.loads(msg.data))
        finally:
            if session in self.sessions:
                self.sessions.remove(session)
        return ws

    async def _on_payload(self, session: Session, payload: Json) -> None:
        op, data = payload.get("op"), payload.get("d") or {}
        if op == 1:
            await session.send(11)
        elif op == 2:
            await self._identify(session, data)
        elif op == 6:
            await self._resume(session, data)
        else:
            log.debug("fake gateway: ignoring op %s", op)

    async def _identify(self, session: Session, data: Json) -> None:
        self.identifies.append(data)
        privileged = data.get("intents", 0) & (MESSAGE_CONTENT | MEMBERS | PRESENCES)
        if privileged & ~self._enabled():
            await session.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        shard = data.get("shard") or [0, 1]
        session.shard = (int(shard[0]), int(shard[1]))
        session.bot_id = self._bot_of(str(data.get("token") or ""))
        await session.send(0, self._ready_payload(session), "READY")
        for guild in self._guilds_for(session):
            await session.send(0, guild, "GUILD_CREATE")
        session.ready = True
        self._by_id[session.session_id] = session
        self.sessions.append(session)

    async def _resume(self, session: Session, data: Json) -> None:
        self.resumes.append(data)
        old = self._by_id.get(data.get("session_id", ""))
        if old is None:
            await session.send(9, False)  # invalid session: the client identifies again
            return
        session.session_id, session.shard, session.seq = old.session_id, old.shard, old.seq
        session.bot_id = old.bot_id
        self._by_id[session.session_id] = session
        session.ready = True
        self.sessions.append(session)
        await session.send(0, {}, "RESUMED")

    def session_for(self, guild_id: int | None, bot_id: int | None = None) -> Session | None:
        """The ready session of the guild's shard (of ``bot_id``'s sessions, when given)."""
        for session in self.sessions:
            shard_id, count = session.shard
            wanted = 0 if guild_id is None else (guild_id >> 22) % count
            mine = bot_id is None or session.bot_id == bot_id
            if session.ready and shard_id == wanted and mine:
                return session
        return None

    async def dispatch(
        self,
        event: str,
        data: Json,
        *,
        guild_id: int | None = None,
        bots: Collection[int] | None = None,
    ) -> bool:
        """Send an event to the session of the guild's shard — of each of ``bots`` that has
        one, when given; whether any session got it."""
        wanted: list[int | None] = [None] if bots is None else list(bots)
        targets = [self.session_for(guild_id, bot_id) for bot_id in wanted]
        sessions = [session for session in targets if session is not None]
        for session in sessions:
            await session.send(0, data, event)
        return bool(sessions)

    async def reconnect_all(self) -> None:
        """Ask every session to reconnect (op 7), as Discord does before maintenance."""
        for session in list(self.sessions):
            session.ready = False
            await session.send(7)
            self.sessions.remove(session)

    async def drop_all(self) -> None:
        """Cut every session as a network failure would (close code 4000, which a client resumes
        from), without a reconnect request first."""
        for session in list(self.sessions):
            session.ready = False
            self.sessions.remove(session)
            await session.ws.close(code=4000, message=b"fake outage")

    async def close_all(self) -> None:
        for session in list(self.sessions):
            await session.ws.close(code=1001)
        self.sessions.clear()
