"""The fake gateway: a websocket speaking Discord's gateway protocol (v10, JSON, uncompressed).

HELLO → IDENTIFY → READY + one GUILD_CREATE per guild of the shard, heartbeats acknowledged,
RESUME answered with RESUMED, and close code 4014 when the identify asks for a privileged intent
the "application" has not enabled, exactly as Discord does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
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
    """One websocket endpoint; ``ready_payload(shard)`` and ``guilds_for(shard)`` come from the
    server, which owns the world."""

    def __init__(
        self,
        *,
        url: Callable[[], str],
        ready_payload: Callable[[Session], Json],
        guilds_for: Callable[[tuple[int, int]], list[Json]],
        enabled_intents: Callable[[], int],
    ) -> None:
        self._url = url
        self._ready_payload = ready_payload
        self._guilds_for = guilds_for
        self._enabled = enabled_intents
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
        await session.send(0, self._ready_payload(session), "READY")
        for guild in self._guilds_for(session.shard):
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
        self._by_id[session.session_id] = session
        session.ready = True
        self.sessions.append(session)
        await session.send(0, {}, "RESUMED")

    def session_for(self, guild_id: int | None) -> Session | None:
        for session in self.sessions:
            shard_id, count = session.shard
            wanted = 0 if guild_id is None else (guild_id >> 22) % count
            if session.ready and shard_id == wanted:
                return session
        return None

    async def dispatch(self, event: str, data: Json, *, guild_id: int | None = None) -> bool:
        session = self.session_for(guild_id)
        if session is None:
            return False
        await session.send(0, data, event)
        return True

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
