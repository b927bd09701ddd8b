"""The client contract and discovery through the ``carrier.clients`` entry-point group.

A platform adapter lives in its own package (``clients/discord``, ...) and registers a factory
under the group; the core finds it by name and never imports it directly::

    [project.entry-points."carrier.clients"]
    discord = "clients.discord:create_client"

The factory is called as ``factory(runtime, config, environ)`` and returns a :class:`Client`, or
raises :class:`ClientUnavailable` saying why it cannot start (no token, SDK not installed).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from carrier.errors import CarrierError

__all__ = ["Client", "ClientFactory", "ClientUnavailable", "discover_clients"]

log = logging.getLogger(__name__)

GROUP = "carrier.clients"


class ClientUnavailable(CarrierError):
    """A client cannot start; the message says why and what to set."""


class Client(ABC):
    """A running platform connection for one agent."""

    name: str

    @abstractmethod
    async def start(self) -> None:
        """Connect and begin handling events; returns once running (work continues in tasks)."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect cleanly. Safe to call twice."""


ClientFactory = Callable[[Any, Mapping[str, Any], Mapping[str, str]], Client]


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
