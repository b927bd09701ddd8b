"""Client states published in the store, so every process can show what the others' clients do.

In a web + worker deployment the web process serves ``/health`` and the console but runs no
platform client: without help it can only say a client runs ``elsewhere``. Each process that
runs clients therefore publishes, per agent, the states of the clients it runs (a store setting
``client_states:<agent id>:<process id>``): when one changes (looked at every
:data:`CHECK_S` seconds) and at least every :data:`REFRESH_S` seconds. A process that shows a
client as ``elsewhere`` reads the reports of the live workers (their ``worker:`` presence
leases, :mod:`carrier.fleet.presence`): a worker that died drops out when its lease expires,
one that stopped when it released it. Reports hold what ``/health`` shows anyway (statuses,
times, short redacted errors), never a credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from carrier.clients import ClientState, ClientStatus, client_of_slot, client_state
from carrier.fleet.presence import WORKER_PREFIX, process_id
from carrier.types import utcnow

if TYPE_CHECKING:
    from carrier.agents.manager import AgentManager

__all__ = ["CHECK_S", "KEY", "REFRESH_S", "ClientReports", "merge_elsewhere"]

log = logging.getLogger(__name__)

KEY = "client_states:"
CHECK_S = 2.0
"""How often a process looks for a change in its clients' states."""
REFRESH_S = 30.0
"""How often a report is written even when nothing changed."""


def _dump(state: ClientState) -> dict[str, Any]:
    return {
        "status": state.status.value,
        "since": state.since.isoformat() if state.since else None,
        "last_error": state.last_error,
        "attempts": state.attempts,
        "next_retry_at": state.next_retry_at.isoformat() if state.next_retry_at else None,
    }


def _load(data: dict[str, Any], process: str) -> ClientState | None:
    try:
        return ClientState(
            status=ClientStatus(data["status"]),
            since=datetime.fromisoformat(data["since"]) if data.get("since") else None,
            last_error=data.get("last_error"),
            attempts=int(data.get("attempts") or 0),
            next_retry_at=(
                datetime.fromisoformat(data["next_retry_at"]) if data.get("next_retry_at") else None
            ),
            process=process,
        )
    except (KeyError, TypeError, ValueError):
        return None  # a report this version cannot read: shown as elsewhere, as before


class ClientReports:
    """Publishes this process's client states (when it runs clients) and reads the others'."""

    def __init__(self, manager: AgentManager) -> None:
        self.manager = manager
        self.process = process_id(manager.environ)
        self._written: dict[str, tuple[dict[str, Any], datetime]] = {}
        self._task: asyncio.Task[None] | None = None

    # -- publishing ---------------------------------------------------------------------------
    def ensure_started(self) -> None:
        """Start publishing (once; only in a process that runs clients)."""
        if self.manager.start_clients and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name=f"carrier-client-reports-{self.process}"
            )

    async def _loop(self) -> None:
        while True:
            try:
                await self.publish()
            except Exception:  # the store may be down a while: the next look tries again
                log.debug("publishing the clients' states failed", exc_info=True)
            await asyncio.sleep(CHECK_S)

    async def publish(self) -> None:
        """Write the report of each agent running here whose clients' states changed (or whose
        report is due a refresh); an agent no longer running here gets an empty one, once."""
        now = utcnow()
        reports = {
            agent_id: {slot: _dump(client_state(c)) for slot, c in running.clients.items()}
            for agent_id, running in self.manager.running_items()
        }
        for agent_id in set(self._written) - set(reports):
            reports[agent_id] = {}
        for agent_id, clients in reports.items():
            last = self._written.get(agent_id)
            if (
                last is not None
                and last[0] == clients
                and now - last[1] < timedelta(seconds=REFRESH_S)
            ):
                continue
            await self.manager.store.set_setting(
                f"{KEY}{agent_id}:{self.process}",
                {"process": self.process, "at": now.isoformat(), "clients": clients},
            )
            if clients:
                self._written[agent_id] = (clients, now)
            else:
                self._written.pop(agent_id, None)

    async def close(self) -> None:
        """Stop publishing; the agents stopped here say so in one last report each."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            with contextlib.suppress(Exception):
                await self.publish()

    # -- reading ------------------------------------------------------------------------------
    async def elsewhere(self, agent_id: str) -> dict[str, ClientState]:
        """The states of ``agent_id``'s clients as the live workers other than this process
        report them, by slot, each naming its process."""
        fleet = await self.manager.fleet()
        now = fleet.now()
        live = [
            lease.owner
            for lease in await fleet.leases(WORKER_PREFIX)
            if lease.expires_at > now and lease.owner != self.process
        ]
        found: dict[str, ClientState] = {}
        for owner in sorted(live):
            report = await self.manager.store.get_setting(f"{KEY}{agent_id}:{owner}")
            if not isinstance(report, dict) or not isinstance(report.get("clients"), dict):
                continue
            for slot, data in report["clients"].items():
                state = _load(data, owner) if isinstance(data, dict) else None
                if state is not None and _better(state, found.get(slot)):
                    found[slot] = state
        return found


def _better(state: ClientState, than: ClientState | None) -> bool:
    """Of two reports of one slot (a handover under way), the connected one, else the first."""
    return than is None or (
        state.status is ClientStatus.CONNECTED and than.status is not ClientStatus.CONNECTED
    )


def merge_elsewhere(
    states: dict[str, ClientState], remote: dict[str, ClientState]
) -> dict[str, ClientState]:
    """``states`` with each client shown ``elsewhere`` replaced by what its process reports (a
    client the web shows whole by each of its parts, where it is made of parts)."""
    merged: dict[str, ClientState] = {}
    for slot, state in states.items():
        if state.status is not ClientStatus.ELSEWHERE:
            merged[slot] = state
            continue
        reported = {
            other: s
            for other, s in remote.items()
            if other == slot or (slot == client_of_slot(slot) and client_of_slot(other) == slot)
        }
        if not reported:
            merged[slot] = state
        for other, s in reported.items():
            merged.setdefault(other, s)
    return merged
