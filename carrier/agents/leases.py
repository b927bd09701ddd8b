"""Connection leases: one live platform connection per bot token across all processes.

A client factory may declare ``connection_key(character, config, environ) -> str | None``: a
name for the account it connects as (Discord: a digest prefix of the bot token, never the token),
so two agents sharing one token share one lease; and ``connection_parts`` when the account is
made of several connections (Discord: shards), each then leased on its own as
``conn:<platform>:<key>#<part>``. In a process that starts clients, such a client
starts only while the process holds the fleet lease ``conn:<platform>:<key>`` (its owner is the
process's id, :func:`carrier.fleet.presence.process_id`):

- one heartbeat task per process renews every lease it holds every :data:`BEAT_S` seconds, for
  :data:`TTL_S`; a renew that says no (another process took it) or that cannot be confirmed in
  time (the store does not answer) loses the lease, and the clients using it stop at once;
- the same task tries every :data:`RETRY_S` seconds to take the leases this process wants and
  another holds: when the holder stops gracefully it releases them (taken on the next try), and
  when it dies (kill -9) they expire after :data:`TTL_S` — a takeover within ~20 s either way;
- the last user of a lease gives it up (:meth:`ConnectionLeases.drop`, at an agent's halt), so a
  graceful stop hands every connection over at once.

Spreading: a process that holds its fair share (``ceil(connections wanted / live workers)``,
the workers being the live ``worker:`` presence leases plus this process) leaves a free lease
to a live worker holding fewer, for up to :data:`DEFER_S` seconds; then takes it anyway, so a
connection never stays down because the others cannot take it (another token, another
placement). Nothing is moved once held: no active rebalancing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from carrier.clients import NOT_HERE, ConnectionPart
from carrier.errors import CarrierError
from carrier.fleet.base import FleetStore
from carrier.fleet.presence import WORKER_PREFIX

__all__ = [
    "BEAT_S",
    "CONN_PREFIX",
    "DEFER_S",
    "RETRY_S",
    "TTL_S",
    "ConnectionKey",
    "ConnectionLeases",
    "ConnectionParts",
    "Holding",
    "User",
    "connection_key_of",
    "connection_parts_of",
    "describe_elsewhere",
    "lease_name",
    "lease_timings",
]

log = logging.getLogger(__name__)

CONN_PREFIX = "conn:"
TTL_S = 15.0
"""How long a connection lease lasts unless renewed: how long a dead holder blocks a takeover."""
BEAT_S = 5.0
"""How often held leases are renewed."""
RETRY_S = 2.5
"""How often a lease held elsewhere is tried again."""
DEFER_S = 10.0
"""How long a process at its fair share leaves a free lease to a worker holding fewer."""


def lease_timings(ttl_s: float) -> dict[str, float]:
    """The timings of :class:`ConnectionLeases` for a lease of ``ttl_s`` seconds
    (``CARRIER_CONNECTION_LEASE_SECONDS``), in the proportions of the defaults: renewed every
    third of it, tried again every sixth, a free lease left to a worker holding fewer for two
    thirds of it."""
    return {"ttl_s": ttl_s, "beat_s": ttl_s / 3, "retry_s": ttl_s / 6, "defer_s": ttl_s * 2 / 3}


User = tuple[str, str]
"""Who uses a connection in this process: ``(agent id, client name)``."""


class ConnectionKey(Protocol):
    """A client factory's ``connection_key``: the account a client of ``character`` would
    connect as, as a short digest (never a credential); None when it would not connect
    (no credentials), and then no lease is taken."""

    def __call__(
        self, character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
    ) -> str | None: ...


class ConnectionParts(Protocol):
    """A client factory's ``connection_parts``: the connections the account of a client of
    ``character`` is made of, each leased on its own (Discord: the shards of a bot given a shard
    count); None when it is one connection."""

    def __call__(
        self, character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
    ) -> Sequence[ConnectionPart] | None: ...


def connection_parts_of(factory: object) -> ConnectionParts | None:
    """The factory's ``connection_parts`` when it declares one."""
    parts = getattr(factory, "connection_parts", None)
    return parts if callable(parts) else None


def connection_key_of(factory: object) -> ConnectionKey | None:
    """The factory's ``connection_key`` when it declares one."""
    key = getattr(factory, "connection_key", None)
    return key if callable(key) else None


def lease_name(platform: str, key: str) -> str:
    return f"{CONN_PREFIX}{platform}:{key}"


@dataclass(frozen=True)
class Holding:
    """What :meth:`ConnectionLeases.want` found: held here since ``since``, or not (held by
    ``owner``; None when free but left to another worker, or the store did not answer)."""

    held: bool
    since: datetime | None = None
    """When this process took the lease: what the previous holder left before it is settled
    here (:meth:`carrier.runtime.AgentRuntime.recover`)."""
    owner: str | None = None


Acquired = Callable[[str, list[User], datetime], Awaitable[None]]
"""``(lease name, users, since)``: the watcher took a lease; start the users' clients."""
Lost = Callable[[str, list[User], str | None], Awaitable[None]]
"""``(lease name, users, new owner or None)``: the lease is lost; stop the users' clients."""


@dataclass(eq=False)
class _Conn:
    name: str
    users: set[User] = field(default_factory=set)
    since: datetime | None = None
    """When this process took it; None while not held here."""
    confirmed: float = 0.0
    """The event loop's time of the last successful acquire or renew."""
    owner: str | None = None
    """The other holder last seen."""
    deferred_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ConnectionLeases:
    """The connection leases of one process. ``want`` before starting a keyed client, ``drop``
    after stopping it, ``close`` at the end. ``on_acquired``/``on_lost`` run in tasks of their
    own, never inside the heartbeat (a client that takes seconds to start or stop must not
    delay the renewal of the others)."""

    def __init__(
        self,
        fleet: FleetStore,
        owner: str,
        *,
        on_acquired: Acquired,
        on_lost: Lost,
        ttl_s: float = TTL_S,
        beat_s: float = BEAT_S,
        retry_s: float = RETRY_S,
        defer_s: float = DEFER_S,
    ) -> None:
        self.fleet, self.owner = fleet, owner
        self._on_acquired, self._on_lost = on_acquired, on_lost
        self.ttl_s, self.beat_s, self.retry_s, self.defer_s = ttl_s, beat_s, retry_s, defer_s
        self._conns: dict[str, _Conn] = {}
        self._task: asyncio.Task[None] | None = None
        self._callbacks: set[asyncio.Task[None]] = set()
        self._takeovers: set[asyncio.Task[None]] = set()
        self._closing = False

    # -- what the manager calls ------------------------------------------------------------
    def holds(self, name: str) -> bool:
        conn = self._conns.get(name)
        return conn is not None and conn.since is not None

    def held(self) -> list[str]:
        return sorted(n for n, c in self._conns.items() if c.since is not None)

    async def want(self, name: str, user: User) -> Holding:
        """Count ``user`` as wanting the connection ``name``, and take the lease if it is free
        (and fair: see the module's docstring). Not held: the watcher keeps trying and calls
        ``on_acquired`` once it is."""
        if self._closing:
            return Holding(held=False)
        conn = self._conns.setdefault(name, _Conn(name))
        conn.users.add(user)
        self._ensure_task()
        async with conn.lock:
            if conn.since is None and self._conns.get(name) is conn:
                await self._try(conn)
            return Holding(held=conn.since is not None, since=conn.since, owner=conn.owner)

    async def drop(self, user: User, name: str | None = None) -> None:
        """``user`` no longer uses a connection (its client stopped, or never started): a lease
        left with no user is released at once, for another process to take."""
        for conn in [self._conns[name]] if name in self._conns else list(self._conns.values()):
            if user not in conn.users:
                continue
            async with conn.lock:
                conn.users.discard(user)
                if conn.users:
                    continue
                if self._conns.get(conn.name) is conn:
                    del self._conns[conn.name]
                await self._release(conn)

    async def quiesce(self) -> None:
        """Take nothing more (the process is stopping): takeovers under way are cancelled, a
        loss being handled finishes; held leases are still renewed until :meth:`close`, so the
        clients stopping meanwhile keep their connection to themselves."""
        self._closing = True
        for task in list(self._takeovers):
            task.cancel()
        pending = list(self._callbacks)
        if pending:
            await asyncio.wait(pending)

    async def close(self) -> None:
        """Stop the heartbeat and release every lease still held (a graceful stop)."""
        await self.quiesce()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for conn in list(self._conns.values()):
            async with conn.lock:
                await self._release(conn)
        self._conns.clear()

    # -- the heartbeat ---------------------------------------------------------------------
    def _ensure_task(self) -> None:
        if self._task is None and not self._closing:
            self._task = asyncio.get_running_loop().create_task(
                self._beat(), name=f"carrier-connection-leases-{self.owner}"
            )

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.retry_s)
            for conn in list(self._conns.values()):
                try:
                    await self._tend(conn)
                except asyncio.CancelledError:
                    raise
                except Exception:  # one bad round must not end the heartbeat
                    log.exception("connection lease %s: the heartbeat failed; retrying", conn.name)

    async def _tend(self, conn: _Conn) -> None:
        """One round for one connection: renew it when held and due, else try to take it."""
        loop = asyncio.get_running_loop()
        async with conn.lock:
            if self._conns.get(conn.name) is not conn or not conn.users:
                return  # dropped meanwhile
            if conn.since is not None:
                due = loop.time() - conn.confirmed >= self.beat_s - 0.01
                if due and not await self._renew(conn):
                    self._spawn(self._on_lost(conn.name, sorted(conn.users), conn.owner))
            elif not self._closing and await self._try(conn):
                assert conn.since is not None
                acquired = self._on_acquired(conn.name, sorted(conn.users), conn.since)
                self._spawn(acquired, takeover=True)

    def _spawn(self, work: Awaitable[None], *, takeover: bool = False) -> None:
        async def run() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("taking over or giving up a connection failed")

        task = asyncio.get_running_loop().create_task(run(), name="carrier-connection-handover")
        self._callbacks.add(task)
        task.add_done_callback(self._callbacks.discard)
        if takeover:
            self._takeovers.add(task)
            task.add_done_callback(self._takeovers.discard)

    async def _try(self, conn: _Conn) -> bool:
        """Take ``conn``'s lease if it is free and fair to take; True when taken."""
        loop = asyncio.get_running_loop()
        try:
            current = await self.fleet.lease(conn.name)
            now = self.fleet.now()
            if current is not None and current.owner != self.owner and current.expires_at > now:
                conn.owner, conn.deferred_at = current.owner, None
                return False
            if not await self._fair(conn):
                return False
            lease = await self.fleet.acquire(
                conn.name, self.owner, ttl_s=self.ttl_s, detail={"client": _platform(conn.name)}
            )
        except CarrierError as exc:
            log.warning("connection lease %s: the store did not answer (%s)", conn.name, exc)
            return False
        if lease is None:  # another process took it between the look and the take
            conn.owner = None
            return False
        conn.since, conn.confirmed = self.fleet.now(), loop.time()
        conn.owner, conn.deferred_at = None, None
        log.info("connection lease %s: taken by %s", conn.name, self.owner)
        return True

    async def _fair(self, conn: _Conn) -> bool:
        """Whether this process may take one more free lease now (see the module)."""
        loop = asyncio.get_running_loop()
        now = self.fleet.now()
        live = {
            lease.owner
            for lease in await self.fleet.leases(WORKER_PREFIX)
            if lease.expires_at > now
        } | {self.owner}
        if len(live) == 1:
            return True
        counts = Counter(
            lease.owner
            for lease in await self.fleet.leases(CONN_PREFIX)
            if lease.expires_at > now and lease.owner in live
        )
        mine = counts[self.owner]
        share = math.ceil(len(self._conns) / len(live))
        if mine < share or not any(counts[w] < mine for w in live - {self.owner}):
            return True
        if conn.deferred_at is None:
            conn.deferred_at = loop.time()
            log.info(
                "connection lease %s: left for a worker holding fewer (this one holds %d)",
                conn.name,
                mine,
            )
        return loop.time() - conn.deferred_at >= self.defer_s

    async def _renew(self, conn: _Conn) -> bool:
        """Renew a held lease; False when it is lost (taken, or not confirmed in time)."""
        loop = asyncio.get_running_loop()
        try:
            if await self.fleet.renew(conn.name, self.owner, ttl_s=self.ttl_s):
                conn.confirmed = loop.time()
                return True
            current = await self.fleet.lease(conn.name)
            conn.owner = current.owner if current is not None else None
            log.warning("connection lease %s: lost to %s", conn.name, conn.owner or "nobody")
        except CarrierError as exc:
            # Not confirmed: keep the client while the lease surely stands, stop it before the
            # lease could expire and be taken by another process.
            if loop.time() - conn.confirmed < self.ttl_s - self.beat_s:
                log.warning("connection lease %s: not renewed (%s); retrying", conn.name, exc)
                return True
            log.warning(
                "connection lease %s: not renewed for %.0f s (%s); its clients stop",
                conn.name,
                loop.time() - conn.confirmed,
                exc,
            )
            conn.owner = None
        conn.since = None
        return False

    async def _release(self, conn: _Conn) -> None:
        if conn.since is None:
            return
        conn.since = None
        try:
            await self.fleet.release(conn.name, self.owner)
            log.info("connection lease %s: released by %s", conn.name, self.owner)
        except CarrierError as exc:  # it expires by itself
            log.warning("connection lease %s: not released (%s); it expires", conn.name, exc)


def _platform(name: str) -> str:
    return name.removeprefix(CONN_PREFIX).split(":", 1)[0]


def describe_elsewhere(holding: Holding) -> str:
    """The reason a client shows while another process holds its connection (its state is
    then ``elsewhere``)."""
    if holding.owner:
        return f"{NOT_HERE}: its connection is held by {holding.owner}; taken over here if it stops"
    return (
        f"{NOT_HERE}: its connection is left to another worker for now; retried every few seconds"
    )
