"""Replies as an outbox: stored before they are sent, sent once, and never lost in a crash.

A turn stores each reply ``pending`` (its id derived from the inbound message's, so it is
recorded once) and leaves the message it answers ``pending`` too. The client that owns the room
claims each reply (pending → sending, a compare-and-set in the store, so two senders never both
win), sends it, and marks it ``sent`` once the platform accepted it, or ``failed`` with the
reason. Then the inbound message is closed by what happened to its replies: ``processed`` once
one went out, ``failed`` (with the reason) when none did; never both a delivered reply and a
failed message.

A process that stops mid-way leaves the outbox as it was. When the agent starts again,
:meth:`Outbox.recover` settles what the previous process left (see its docstring): replies that
are still fresh (``CARRIER_REPLY_RECOVERY_SECONDS``, 120 s by default) are sent by their client
once it is connected (:meth:`Outbox.redeliver`), older ones are failed with the reason.

With several processes on one store, each settles only the platforms it serves
(:class:`carrier.serving.Platforms`): the web process the API's at its start, a worker a platform's when it takes
that platform's connection over (its lease, :mod:`carrier.agents.leases`), from that moment on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import count

from carrier.memory.base import Store
from carrier.serving import EVERY, Platforms
from carrier.types import Memory, MemoryKind, MemoryStatus, stable_id, utcnow

__all__ = [
    "HISTORY_PLATFORMS",
    "INTERRUPTED",
    "RECOVERY_SECONDS",
    "Outbox",
    "Recovery",
    "Send",
    "reply_id",
]

log = logging.getLogger(__name__)

RECOVERY_SECONDS = 120.0
"""How long after it was written a reply left unsent by a stopped process is still sent."""
INTERRUPTED = "interrupted: the process stopped during this turn"
"""Why a message whose turn stopped before any reply was stored is failed."""
HISTORY_PLATFORMS = frozenset({"api"})
"""Platforms whose callers read the conversation's history (``GET /agents/{id}/messages``): a
fresh reply whose caller is gone (the process stopped, the stream was closed) is delivered
there, as the caller that lost its answer reads it; nothing else can be sent to them."""

Send = Callable[[Memory], Awaitable[object]]
"""Sends one reply; returns once the platform accepted it, raises when it did not."""

_OPEN = (MemoryStatus.RECEIVED, MemoryStatus.PENDING)
"""An inbound message's statuses before it is closed."""
_UNSENT = (MemoryStatus.PENDING, MemoryStatus.SENDING)
_DELIVERED = (MemoryStatus.SENT, MemoryStatus.STORED)
"""``stored``: a reply written before the outbox existed, sent by the process that wrote it."""
_PAGE = 500


def reply_id(inbound_id: str, index: int) -> str:
    """The id of the ``index``-th reply to an inbound message: derived from the message's id,
    so a turn that runs again records each reply once."""
    return stable_id(inbound_id, "reply", str(index))


@dataclass
class Recovery:
    """What :meth:`Outbox.recover` found a previous process left."""

    found: int = 0
    """Unfinished messages (``received`` or ``pending``)."""
    interrupted: int = 0
    """Of those, messages with no reply stored: failed, ``interrupted``."""
    delivered: int = 0
    """Replies delivered to a conversation's history (the API's)."""
    waiting: int = 0
    """Fresh replies left for their client to send once it is connected."""
    expired: int = 0
    """Replies too old to send: failed, ``not delivered within N s``."""
    resumable: list[Memory] = field(default_factory=list)
    """With ``resume``: messages with no reply stored, still fresh, left ``received`` for the
    client that takes their platform over to run again (:meth:`Outbox.recover`)."""


class Outbox:
    """One agent's replies on their way out. Built by the runtime (``runtime.outbox``);
    clients call :meth:`deliver` after each turn and :meth:`redeliver` once connected.

    ``since`` is when this process's runtime started: a claim older than that was made by a
    process that stopped (one process serves a room; see :meth:`recover`). A platform this
    process took over later (its connection) is settled from that moment instead.
    """

    def __init__(
        self,
        store: Store,
        *,
        agent_id: str,
        since: datetime,
        window_s: float = RECOVERY_SECONDS,
    ) -> None:
        self.store = store
        self.agent_id = agent_id
        self.since = since
        self.window_s = window_s
        self._agent_entity = stable_id(agent_id, "agent")
        self._lock = asyncio.Lock()
        self._taken: list[tuple[Platforms, datetime]] = []
        """What this process settled, from when: a platform's replies left before that moment
        are the previous holder's (:meth:`redeliver`)."""
        self._expiries: set[asyncio.Task[None]] = set()
        self.on_delivered: Callable[[Sequence[Memory]], None] | None = None
        """Called with the replies of each :meth:`deliver` once their delivery is over (the
        runtime queues their vectors: :mod:`carrier.reply_vectors`)."""

    @property
    def stale_reason(self) -> str:
        return f"not delivered within {self.window_s:g} s; the process stopped"

    # -- the live path -----------------------------------------------------------------------
    async def deliver(self, replies: Sequence[Memory], send: Send | None = None) -> int:
        """Send a turn's replies once each, in order, then close the message they answer.

        Each reply is claimed first (pending → sending); one that is not pending (already sent,
        or another sender has it) is skipped. ``send(reply)`` returns once the platform accepted
        it, and the reply is marked ``sent``; when it raises, that reply and the ones after it are
        marked ``failed`` with the reason, the message is closed, and the exception propagates
        (the client reports it as before). Without ``send`` the caller has handed the replies
        over itself (the API's response, the terminal's print): they are marked sent at once.
        Returns how many replies this call sent."""
        sent = 0
        try:
            for index, reply in enumerate(replies):
                if send is None:
                    sent += await self._mark(
                        reply, MemoryStatus.SENT, expect=[MemoryStatus.PENDING]
                    )
                    continue
                if not await self._mark(reply, MemoryStatus.SENDING, expect=[MemoryStatus.PENDING]):
                    continue
                try:
                    await send(reply)
                except Exception as exc:
                    reason = _describe(exc)
                    await self._mark(
                        reply,
                        MemoryStatus.FAILED,
                        error=f"not delivered: {reason}",
                        expect=[MemoryStatus.SENDING],
                    )
                    for later in replies[index + 1 :]:
                        await self._mark(
                            later,
                            MemoryStatus.FAILED,
                            error=f"not sent: an earlier reply was not delivered ({reason})",
                            expect=[MemoryStatus.PENDING],
                        )
                    raise
                # Accepted by the platform: sent, even if a recovery meanwhile thought the claim
                # abandoned and reset it (what went out is the truth).
                sent += await self._mark(reply, MemoryStatus.SENT, expect=[*_UNSENT])
        finally:
            for inbound_id in dict.fromkeys(r.content.in_reply_to for r in replies):
                if inbound_id:
                    await self.close(inbound_id)
            if self.on_delivered is not None and replies:
                self.on_delivered(replies)
        return sent

    async def fail(self, inbound_id: str, reason: str) -> int:
        """Mark the unsent replies to a message failed with ``reason`` (its turn failed after
        they were stored, so they are not to be sent). Returns how many."""
        failed = 0
        for reply in await self.replies_of(inbound_id):
            failed += await self._mark(reply, MemoryStatus.FAILED, error=reason, expect=[*_UNSENT])
        return failed

    async def close(self, inbound_id: str) -> MemoryStatus | None:
        """Give a message the status its replies call for, once none is on its way: processed
        when one was delivered, failed (with the first reply's reason) when none was. Returns
        the status set; None while replies are unsent, or when the message is gone or closed."""
        replies = await self.replies_of(inbound_id)
        if not replies or any(r.status in _UNSENT for r in replies):
            return None
        failed = [r for r in replies if r.status is MemoryStatus.FAILED]
        if len(failed) < len(replies):
            error = None
            if failed:
                error = f"{len(failed)} of {len(replies)} replies not delivered: {failed[0].error}"
            # A delivered reply is never contradicted, even by a failure recorded in a race.
            expect = [*_OPEN, MemoryStatus.FAILED]
            status = MemoryStatus.PROCESSED
        else:
            error, expect, status = failed[0].error, [*_OPEN], MemoryStatus.FAILED
        changed = await self.store.set_memory_status(inbound_id, status, error=error, expect=expect)
        return status if changed else None

    async def replies_of(self, inbound_id: str) -> list[Memory]:
        """The replies stored for a message, in order (read by their derived ids)."""
        found: list[Memory] = []
        for index in count():
            reply = await self.store.get_memory(reply_id(inbound_id, index))
            if reply is None:
                return found
            found.append(reply)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- after a stop ------------------------------------------------------------------------
    async def recover(
        self, *, platforms: Platforms = EVERY, since: datetime | None = None, resume: bool = False
    ) -> Recovery:
        """Settle the messages of ``platforms`` a previous process left unfinished (``received``
        or ``pending``, written before ``since``: this process's start by default, or the
        moment it took a platform's connection over). Run at agent start, before the clients
        connect, and when a connection is taken over, before that client connects.

        - no reply stored: the message is failed, ``interrupted``; or, with ``resume`` (the
          caller's client can run a message again: Discord fetches it and answers it as if it
          had just come), when it is still fresh, left ``received`` in ``resumable`` for that
          client (one not resumed in time is failed once its window ends, as unsent replies are);
        - a reply claimed (``sending``) by the stopped process: it may or may not have gone
          out, so it is made ``pending`` again and sent once more (Discord recognises the
          resend by its nonce and does not post it twice);
        - a ``pending`` reply older than the window: failed, ``not delivered within N s``;
        - a fresh one to an API caller: delivered to the conversation's history
          (:data:`HISTORY_PLATFORMS`);
        - a fresh one for a client (Discord): left for it, sent once it is connected
          (:meth:`redeliver`); one still unsent when its window ends is failed then;
        - and the message is closed as its replies say, if none is left unsent.

        One process serves a room: the one that holds the platform's connection (or serves the
        API), so every claim on ``platforms`` older than ``since`` is a previous holder's. A
        process never settles a platform it does not serve: the caller says which it serves."""
        since = since or self.since
        report = Recovery()
        if platforms.empty:
            return report
        async with self._lock:
            self._taken.append((platforms, since))
            unfinished = await self._all(
                kinds=[MemoryKind.MESSAGE], statuses=list(_OPEN), exclude_agent=True, before=since
            )
            for inbound in unfinished:
                if not platforms.admits(inbound):
                    continue
                report.found += 1
                replies = await self.replies_of(inbound.id)
                if not replies and resume and not self._stale(inbound):
                    report.resumable.append(inbound)
                    continue
                if not replies:
                    await self.store.set_memory_status(
                        inbound.id, MemoryStatus.FAILED, error=INTERRUPTED, expect=list(_OPEN)
                    )
                    report.interrupted += 1
                    continue
                for reply in replies:
                    await self._settle(reply, report, since)
                await self.close(inbound.id)
            if report.waiting or report.resumable:
                self._schedule_expiry(platforms, since)
            return report

    async def interrupt(self, messages: Sequence[Memory], why: str = INTERRUPTED) -> int:
        """Fail messages left ``received`` for a resumption that will not happen (their client
        did not start, or cannot run them again). Returns how many were failed."""
        failed = 0
        for inbound in messages:
            failed += await self.store.set_memory_status(
                inbound.id, MemoryStatus.FAILED, error=why, expect=[MemoryStatus.RECEIVED]
            )
        return failed

    async def _settle(self, reply: Memory, report: Recovery, since: datetime) -> None:
        if reply.status is MemoryStatus.SENDING and reply.updated_at < since:
            await self._mark(reply, MemoryStatus.PENDING, expect=[MemoryStatus.SENDING])
        if reply.status is not MemoryStatus.PENDING:
            return
        if self._stale(reply):
            if await self._mark(
                reply,
                MemoryStatus.FAILED,
                error=self.stale_reason,
                expect=[MemoryStatus.PENDING],
            ):
                report.expired += 1
        elif reply.content.source in HISTORY_PLATFORMS:
            if await self._mark(reply, MemoryStatus.SENT, expect=[MemoryStatus.PENDING]):
                report.delivered += 1
        else:
            report.waiting += 1

    async def redeliver(
        self,
        platform: str,
        send: Send,
        *,
        rooms: Collection[str] | None = None,
        where: Callable[[Memory], bool] | None = None,
    ) -> int:
        """Send the fresh replies a stopped process left for ``platform`` (its client calls
        this once connected; again after a reconnect finds nothing new): oldest first, each
        message's replies through :meth:`deliver`, so each is claimed before it is sent. Only
        rooms in ``rooms``, and replies to inbound messages ``where`` admits (a client that
        serves one part of its account), when given. A send that fails is recorded and logged
        and the next message's replies still go. Returns how many replies were sent."""
        async with self._lock:
            left = await self._all(
                kinds=[MemoryKind.MESSAGE],
                statuses=[MemoryStatus.PENDING],
                agent_only=True,
                before=self._since_for(platform),
            )
            inbound_ids = dict.fromkeys(
                r.content.in_reply_to
                for r in reversed(left)  # oldest first
                if r.content.source == platform
                and r.content.in_reply_to
                and (rooms is None or r.room_id in rooms)
            )
            sent = 0
            for inbound_id in inbound_ids:
                assert inbound_id is not None
                if where is not None and not await self._inbound_admitted(inbound_id, where):
                    continue
                replies = [
                    r for r in await self.replies_of(inbound_id) if r.status is MemoryStatus.PENDING
                ]
                fresh = [r for r in replies if not self._stale(r)]
                if len(fresh) < len(replies):
                    await self._expire(replies)
                    continue
                try:
                    sent += await self.deliver(fresh, send)
                except Exception as exc:
                    log.warning(
                        "%s: a reply left by a previous stop could not be sent: %s",
                        platform,
                        _describe(exc),
                    )
            return sent

    async def expire(self, *, platforms: Platforms = EVERY, since: datetime | None = None) -> int:
        """Fail the replies of ``platforms`` a stopped process left (before ``since``) that are
        still unsent after their window, and close their messages. Runs by itself once the last
        window ends."""
        async with self._lock:
            left = await self._all(
                kinds=[MemoryKind.MESSAGE],
                statuses=[MemoryStatus.PENDING],
                agent_only=True,
                before=since or self.since,
            )
            # Messages left for a resumption that did not happen in their window.
            unrun = await self._all(
                kinds=[MemoryKind.MESSAGE],
                statuses=[MemoryStatus.RECEIVED],
                exclude_agent=True,
                before=since or self.since,
            )
            await self.interrupt(
                [m for m in unrun if platforms.admits(m) and self._stale(m)],
                f"{INTERRUPTED}; not run again within {self.window_s:.0f} s",
            )
            stale = [r for r in left if r.content.source in platforms and self._stale(r)]
            if platforms.where is not None:
                stale = [
                    r
                    for r in stale
                    if r.content.in_reply_to
                    and await self._inbound_admitted(r.content.in_reply_to, platforms.where)
                ]
            return await self._expire(stale)

    async def aclose(self) -> None:
        """Stop the expiry timers (the agent stops)."""
        tasks = list(self._expiries)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._expiries.clear()

    # -- helpers ---------------------------------------------------------------------------
    async def _inbound_admitted(self, inbound_id: str, where: Callable[[Memory], bool]) -> bool:
        inbound = await self.store.get_memory(inbound_id)
        return inbound is not None and where(inbound)

    async def _expire(self, replies: Sequence[Memory]) -> int:
        expired = 0
        for reply in replies:
            expired += await self._mark(
                reply, MemoryStatus.FAILED, error=self.stale_reason, expect=[MemoryStatus.PENDING]
            )
        for inbound_id in dict.fromkeys(r.content.in_reply_to for r in replies):
            if inbound_id:
                await self.close(inbound_id)
        if expired:
            log.warning(
                "agent %s: %d reply(ies) left by a previous stop were %s",
                self.agent_id,
                expired,
                self.stale_reason,
            )
        return expired

    def _schedule_expiry(self, platforms: Platforms, since: datetime) -> None:
        task = asyncio.get_running_loop().create_task(
            self._expire_later(platforms, since), name=f"carrier-outbox-expiry-{self.agent_id}"
        )
        self._expiries.add(task)
        task.add_done_callback(self._expiries.discard)

    async def _expire_later(self, platforms: Platforms, since: datetime) -> None:
        # Every reply waiting was written before ``since``, so one wake-up at the end of the
        # newest one's window finds them all stale.
        await asyncio.sleep(max(0.0, (since - utcnow()).total_seconds() + self.window_s))
        try:
            await self.expire(platforms=platforms, since=since)
        except Exception:  # logged; the next start settles them
            log.exception("agent %s: expiring unsent replies failed", self.agent_id)

    def _since_for(self, platform: str) -> datetime:
        """From when this process serves ``platform``: the latest recovery that covered it
        (its start, or a takeover of the connection), else its start."""
        found = [since for platforms, since in self._taken if platform in platforms]
        return max(found) if found else self.since

    def _stale(self, reply: Memory) -> bool:
        return reply.created_at < utcnow() - timedelta(seconds=self.window_s)

    async def _mark(
        self,
        reply: Memory,
        status: MemoryStatus,
        *,
        expect: Sequence[MemoryStatus],
        error: str | None = None,
    ) -> bool:
        changed = await self.store.set_memory_status(reply.id, status, error=error, expect=expect)
        if changed:
            reply.status, reply.error = status, error
        return changed

    async def _all(
        self,
        *,
        kinds: list[MemoryKind],
        statuses: list[MemoryStatus],
        agent_only: bool = False,
        exclude_agent: bool = False,
        before: datetime,
    ) -> list[Memory]:
        """Every memory of this agent with these statuses written before ``before``, newest
        first (read page by page; the agent's own replies only, or none of them)."""
        found: list[Memory] = []
        while True:
            page = await self.store.get_memories(
                agent_id=self.agent_id,
                entity_id=self._agent_entity if agent_only else None,
                kinds=kinds,
                statuses=statuses,
                before=before,
                limit=_PAGE,
                embeddings=False,
            )
            found += [m for m in page if not (exclude_agent and m.entity_id == self._agent_entity)]
            if len(page) < _PAGE:
                return found
            before = page[-1].created_at


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
