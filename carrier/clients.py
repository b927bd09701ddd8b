"""The client contract, its connection state, and discovery through ``carrier.clients``.

A platform adapter lives in its own package (``clients/discord``, ...) and registers a factory
under the group; the core finds it by name and never imports it directly::

    [project.entry-points."carrier.clients"]
    discord = "clients.discord:create_client"

The factory is called as ``factory(runtime, config, environ)`` and returns a :class:`Client`, or
raises :class:`ClientUnavailable` saying why it cannot start (no token, SDK not installed), or
its subclass :class:`ClientRefused` when the platform refused what it was given (a bad token).

A factory may also declare ``connection_parts(character, config, environ)``: the separate
connections one account is made of (Discord: the shards of a bot with a shard count), each a
:class:`ConnectionPart` the host leases, starts and hands over on its own, so several processes
share one account's connections. Its client then runs under the slot name :func:`part_slot`
(``discord#0/4``), with the part's configuration laid over its own.

Every client has a :class:`ClientState` (``/health`` shows it): a client that keeps a connection
tracks it with a :class:`ClientStateTracker`; one that does not is taken as connected once it
started. Clients that did not start have a state too, from the reason they were skipped
(:func:`skipped_state`).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from importlib.metadata import entry_points
from typing import Any

from carrier.errors import CarrierError
from carrier.safety.redact import shown
from carrier.types import utcnow

__all__ = [
    "FAILED_TO_START",
    "NOT_HERE",
    "Client",
    "ClientFactory",
    "ClientRefused",
    "ClientState",
    "ClientStateTracker",
    "ClientStatus",
    "ClientUnavailable",
    "ConnectionPart",
    "client_of_slot",
    "client_state",
    "discover_clients",
    "part_slot",
    "skipped_state",
    "states_of",
]

log = logging.getLogger(__name__)

GROUP = "carrier.clients"

FAILED_TO_START = "failed to start"
"""How the reason of a client that was configured but failed to start begins (the manager's
words for an unexpected error, and :class:`ClientRefused`'s)."""
NOT_HERE = "not started in this process"
"""How the reason of a client that runs in another process begins (the web process of a web +
worker deployment)."""

_ERROR_CHARS = 300


@dataclass(frozen=True)
class ConnectionPart:
    """One of the connections an account is made of (a factory's ``connection_parts``).

    ``name`` tells it apart within the account (``0/4``: shard 0 of 4); ``config`` is laid over
    the client's configuration to start it as that part alone; ``covers`` says whether a stored
    inbound message came through it, so a process that takes the part over settles what the
    part's previous holder left, and only that (:class:`carrier.serving.Platforms`)."""

    name: str
    config: Mapping[str, Any] = field(default_factory=dict)
    covers: Callable[[Any], bool] = lambda _message: True


PART_MARK = "#"


def part_slot(client: str, part: str) -> str:
    """The name a part's client runs under, beside the account's other parts: ``discord#0/4``."""
    return f"{client}{PART_MARK}{part}"


def client_of_slot(slot: str) -> str:
    """The client a slot belongs to: ``discord`` for ``discord#0/4`` (and for ``discord``)."""
    return slot.split(PART_MARK, 1)[0]


class ClientUnavailable(CarrierError):
    """A client cannot start; the message says why and what to set."""


class ClientRefused(ClientUnavailable):
    """The platform refused a configured client (a bad token, a privileged intent not enabled,
    an invalid configuration): retrying cannot help until the operator fixes it. The message
    begins with :data:`FAILED_TO_START`, so the skipped client's state is ``failed``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{FAILED_TO_START}: {reason}")


class ClientStatus(StrEnum):
    CONNECTED = "connected"
    """Connected and handling events."""
    CONNECTING = "connecting"
    """The first connection is being made."""
    RETRYING = "retrying"
    """The connection failed or dropped; it is being made again (``next_retry_at``)."""
    FAILED = "failed"
    """Refused for good (a bad token, ...): the operator must act; ``last_error`` says what."""
    NOT_CONFIGURED = "not_configured"
    """The character lists it, but it has no credentials here (or is not installed)."""
    ELSEWHERE = "elsewhere"
    """It runs in another process (the worker of a web + worker deployment)."""

    @property
    def down(self) -> bool:
        """A configured client that is not connected: the service is degraded."""
        return self in (ClientStatus.RETRYING, ClientStatus.FAILED)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientState:
    """What a client's connection is doing. ``last_error`` is a short text for people, masked
    and redacted: never a credential."""

    status: ClientStatus
    since: datetime | None = None
    """When it entered ``status`` (None: not known)."""
    last_error: str | None = None
    attempts: int = 0
    """Failed attempts since the last time it was connected."""
    next_retry_at: datetime | None = None
    """When the next attempt starts (None: not waiting for one, or the SDK's own retry)."""
    process: str | None = None
    """The process it runs in, when that is another one (as that process reports it:
    :mod:`carrier.agents.reports`)."""

    @classmethod
    def of(
        cls, status: ClientStatus, *, error: str | None = None, since: datetime | None = None
    ) -> ClientState:
        return cls(status=status, since=since, last_error=safe_error(error))


def safe_error(text: str | None) -> str | None:
    """An error as a state may show it: URLs' credentials masked, secrets redacted, one line,
    at most 300 characters."""
    if not text:
        return None
    cleaned = shown(" ".join(text.split())) or ""
    return cleaned if len(cleaned) <= _ERROR_CHARS else cleaned[: _ERROR_CHARS - 1] + "…"


class ClientStateTracker:
    """The state of one client's connection, changed by its connection loop; waiters are woken
    at each change. ``since`` moves only when the status changes, so a client retrying for an
    hour reads "retrying since" the start of the outage."""

    def __init__(self, *, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock
        self._state = ClientState(status=ClientStatus.CONNECTING, since=clock())
        self._changed = asyncio.Event()

    @property
    def state(self) -> ClientState:
        return self._state

    def connected(self) -> None:
        self._set(ClientState(status=ClientStatus.CONNECTED))

    def retrying(
        self, error: str | None, *, delay: float | None = None, counted: bool = False
    ) -> None:
        """An attempt failed (or the connection dropped): the next one starts in ``delay``
        seconds (None: the SDK retries by itself). ``error`` None keeps the last one;
        ``counted``: this failure was reported already (by the SDK), do not count it twice."""
        previous = self._state
        self._set(
            ClientState(
                status=ClientStatus.RETRYING,
                last_error=safe_error(error) or previous.last_error,
                attempts=previous.attempts + (0 if counted else 1),
                next_retry_at=None if delay is None else self._clock() + timedelta(seconds=delay),
            )
        )

    def attempting(self) -> None:
        """The retry is under way: no longer waiting for it."""
        if self._state.next_retry_at is not None:
            self._set(replace(self._state, next_retry_at=None))

    def failed(self, error: str) -> None:
        self._set(
            ClientState(
                status=ClientStatus.FAILED,
                last_error=safe_error(error),
                attempts=self._state.attempts,
            )
        )

    def _set(self, state: ClientState) -> None:
        since = self._state.since if state.status == self._state.status else self._clock()
        self._state = replace(state, since=since)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[ClientState], bool]) -> ClientState:
        """Wait until ``predicate(state)`` holds (bound it with ``asyncio.timeout``)."""
        while not predicate(self._state):
            await self._changed.wait()
        return self._state


class Client(ABC):
    """A running platform connection for one agent."""

    name: str

    @abstractmethod
    async def start(self) -> None:
        """Begin connecting and handling events; returns once running or retrying (the
        connection is kept up in tasks). Raises :class:`ClientUnavailable` when it cannot run
        at all."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect cleanly. Safe to call twice."""

    async def abandon(self) -> None:
        """The connection's lease was lost: another process may connect now, so disconnect at
        once rather than cleanly (running turns may be cut: the new holder settles, or runs
        again, what they leave). By default, :meth:`stop`."""
        await self.stop()

    @property
    def state(self) -> ClientState:
        """The connection's state. A client that keeps no connection of its own (a poster that
        calls an API when it needs to) is connected once started."""
        return ClientState(status=ClientStatus.CONNECTED)


ClientFactory = Callable[[Any, Mapping[str, Any], Mapping[str, str]], Client]


def client_state(client: object) -> ClientState:
    """A started client's state; never raises (a broken ``state`` reads as ``failed``)."""
    try:
        state = getattr(client, "state", None)
    except Exception as exc:
        log.exception("the state of client %r could not be read", getattr(client, "name", client))
        return ClientState.of(ClientStatus.FAILED, error=f"its state is unreadable: {exc}")
    if isinstance(state, ClientState):
        return state
    return ClientState(status=ClientStatus.CONNECTED)


def skipped_state(reason: str, *, elsewhere: bool = False) -> ClientState:
    """The state of a client the character lists that did not start, from the reason given:
    ``elsewhere`` when it runs in another process (``elsewhere`` True, or the reason begins with
    :data:`NOT_HERE`), ``failed`` when it was configured but failed (the reason begins with
    :data:`FAILED_TO_START`), else ``not_configured``."""
    if elsewhere or reason.startswith(NOT_HERE):
        return ClientState.of(ClientStatus.ELSEWHERE)
    if reason.startswith(FAILED_TO_START):
        return ClientState.of(ClientStatus.FAILED, error=reason)
    return ClientState.of(ClientStatus.NOT_CONFIGURED, error=reason)


def states_of(
    started: Mapping[str, object], skipped: Mapping[str, str], *, elsewhere: bool = False
) -> dict[str, ClientState]:
    """The state of each client of an agent: the started ones' own, the skipped ones' from
    their reasons (``elsewhere``: this process starts no clients)."""
    states = {name: skipped_state(why, elsewhere=elsewhere) for name, why in skipped.items()}
    states.update({name: client_state(client) for name, client in started.items()})
    return states


def discover_clients() -> dict[str, ClientFactory]:
    """Installed client factories by name. A factory that fails to load is logged and skipped."""
    found: dict[str, ClientFactory] = {}
    for ep in entry_points(group=GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # a broken adapter must not stop the others
            log.warning(
                "client %r could not be loaded (%s: %s); skipped", ep.name, type(exc).__name__, exc
            )
    return found
