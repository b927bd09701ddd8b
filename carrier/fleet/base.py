"""FleetStore: the state every Carrier process shares about agents, beside the memory store.

A backend (``carrier.fleet.sqlite``, ``carrier.fleet.mongo``) keeps five things, with the same
behaviour (``tests/fleet/test_contract.py`` runs on both):

- **revisions**: each agent's characters, numbered from 1, never rewritten. The newest is the
  *head*; the memory store's ``AgentRecord.character`` mirrors it.
- **desired states**: running or stopped, and where the clients may run. Every process applies
  them: after a restart, every agent that should run runs again.
- **import marks**: which file content the last ``carrier run`` import matched, so a file edit
  that would overwrite a change made elsewhere is refused.
- **the change log**: one entry per revision, desired-state change, client configuration or
  deletion, numbered in the order written; processes follow it (:meth:`FleetStore.wait_changes`)
  to apply each other's changes within a second or two.
- **leases**: a named right (a bot token's connection, a room) held by one process at a time
  until it stops renewing it (it died) or releases it (it stopped).

Usage::

    fleet = FleetStore.from_settings(settings)   # MongoDB if CARRIER_MONGODB_URI is set
    async with fleet:
        rev = await fleet.add_revision("harbor", data, source=RevisionSource.API, actor="admin")
        await fleet.set_desired("harbor", DesiredState.RUNNING, actor="admin")
        changes = await fleet.wait_changes(after=seen, wait_s=1.0)
        lease = await fleet.acquire("discord:<token digest>", owner=worker_id, ttl_s=15)
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from carrier.errors import UserError
from carrier.fleet.model import (
    Change,
    ChangeKind,
    Desired,
    DesiredState,
    ImportMark,
    Lease,
    Revision,
    RevisionSource,
)
from carrier.jobs.clock import Clock, system_clock

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = ["ANY_PLACEMENT", "UNCHANGED", "FleetStore", "RevisionConflict", "placement_from"]

UNCHANGED: Any = object()
"""For :meth:`FleetStore.set_desired`'s ``placement``: keep the stored one."""

ANY_PLACEMENT = "any"
"""What a user writes for "no group in particular" (stored as None)."""


def placement_from(given: str | None) -> str | None:
    """A placement as the API and the CLI take it: left out, :data:`UNCHANGED`; ``any``, None
    (every worker); else the worker group's name."""
    if given is None:
        return UNCHANGED
    return None if given == ANY_PLACEMENT else given


class RevisionConflict(UserError):
    """The head moved since the caller read it (``expected_head``)."""

    def __init__(self, agent_id: str, expected: int, actual: int) -> None:
        self.agent_id, self.expected, self.actual = agent_id, expected, actual
        super().__init__(
            f"agent {agent_id!r} changed meanwhile: its character is at revision {actual}, "
            f"not {expected}; read it again and retry"
        )


class FleetStore(ABC):
    """Coroutine-safe; several processes (on several hosts, over MongoDB) may share one."""

    poll_s: float = 0.25
    """How often :meth:`wait_changes` looks at the log when the backend cannot be woken."""

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self.clock = clock

    @classmethod
    def from_settings(cls, settings: Settings, *, clock: Clock = system_clock) -> FleetStore:
        """MongoDB when ``CARRIER_MONGODB_URI`` is set, else the SQLite file in the data dir
        (``<data_dir>/carrier.db``, beside the memory store, the jobs and the audit log)."""
        if settings.mongodb_uri is not None:
            from carrier.fleet.mongo import MongoFleetStore

            return MongoFleetStore.from_url(settings.mongodb_uri.get_secret_value(), clock=clock)
        from carrier.fleet.sqlite import SQLiteFleetStore

        return SQLiteFleetStore(path=settings.store_path, clock=clock)

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    async def open(self) -> None:
        """Create or migrate the tables/collections; refuse a schema newer than this code."""

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- revisions -------------------------------------------------------------------------
    @abstractmethod
    async def add_revision(
        self,
        agent_id: str,
        character: dict[str, Any],
        *,
        source: RevisionSource,
        actor: str | None = None,
        note: str | None = None,
        expected_head: int | None = None,
    ) -> Revision:
        """Store the next revision (head + 1, or 1) and a ``character`` change, atomically: two
        processes adding at once get two numbers. With ``expected_head`` (0 for "none yet"), raise
        :class:`RevisionConflict` unless the head is that number."""

    @abstractmethod
    async def head(self, agent_id: str) -> Revision | None: ...

    @abstractmethod
    async def revision(self, agent_id: str, number: int) -> Revision | None: ...

    @abstractmethod
    async def revisions(
        self, agent_id: str, *, limit: int = 50, before: int | None = None
    ) -> list[Revision]:
        """Newest first; ``before`` pages back (numbers below it)."""

    # -- desired state ---------------------------------------------------------------------
    @abstractmethod
    async def set_desired(
        self,
        agent_id: str,
        state: DesiredState,
        *,
        placement: str | None = UNCHANGED,
        actor: str | None = None,
    ) -> Desired:
        """Store the agent's desired state and a ``desired`` change (also when it is the same:
        a start after a crash asks the workers to look again)."""

    @abstractmethod
    async def desired(self, agent_id: str) -> Desired | None: ...

    @abstractmethod
    async def all_desired(self) -> list[Desired]: ...

    # -- imports ---------------------------------------------------------------------------
    @abstractmethod
    async def mark_import(self, mark: ImportMark) -> None:
        """Replace the agent's import mark."""

    @abstractmethod
    async def import_mark(self, agent_id: str) -> ImportMark | None: ...

    # -- agents ----------------------------------------------------------------------------
    @abstractmethod
    async def delete_agent(self, agent_id: str) -> None:
        """Drop the agent's revisions, desired state and import mark, and log ``deleted``."""

    # -- the change log ----------------------------------------------------------------------
    @abstractmethod
    async def append_change(
        self, kind: ChangeKind, agent_id: str | None = None, detail: dict[str, Any] | None = None
    ) -> Change: ...

    @abstractmethod
    async def latest_seq(self) -> int:
        """The newest entry's ``seq`` (0 when the log is empty): where a new follower starts."""

    @abstractmethod
    async def changes(self, after: int, *, limit: int = 500) -> list[Change]:
        """Entries with ``seq > after``, oldest first."""

    async def wait_changes(self, after: int, *, wait_s: float) -> list[Change]:
        """Entries after ``after`` as soon as there are any, or ``[]`` after ``wait_s`` seconds.
        This default polls every :attr:`poll_s`; a backend that can be woken overrides it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            found = await self.changes(after)
            left = deadline - loop.time()
            if found or left <= 0:
                return found
            await asyncio.sleep(min(self.poll_s, left))

    @abstractmethod
    async def prune_changes(self, older_than: datetime) -> int:
        """Delete entries written before ``older_than`` (the newest entry is always kept, so
        ``seq`` never goes back); returns how many went."""

    # -- leases ----------------------------------------------------------------------------
    @abstractmethod
    async def acquire(
        self, name: str, owner: str, *, ttl_s: float, detail: dict[str, Any] | None = None
    ) -> Lease | None:
        """Take the lease when it is free, expired or already ``owner``'s (then renew it), until
        now + ``ttl_s``; None when another owner holds it unexpired. Atomic across processes."""

    @abstractmethod
    async def renew(self, name: str, owner: str, *, ttl_s: float) -> bool:
        """Extend ``owner``'s lease; False when it is not (or no longer) ``owner``'s — the
        caller lost it and must stop using what it guards."""

    @abstractmethod
    async def release(self, name: str, owner: str) -> bool:
        """Give the lease up at once (a graceful stop); False when ``owner`` did not hold it."""

    @abstractmethod
    async def lease(self, name: str) -> Lease | None:
        """The lease as stored (also when expired: compare ``expires_at`` with the clock)."""

    @abstractmethod
    async def leases(self, prefix: str = "") -> list[Lease]:
        """Every stored lease whose name starts with ``prefix``, by name."""

    def now(self) -> datetime:
        return self.clock()
