"""Client configurations: ids (``discord``, ``<agent_id>:discord``), validation, and the part
of the agent manager that stores them and gives them to running clients.

Configuration is stored per client id: ``discord`` applies to every agent's Discord client,
``<agent_id>:discord`` to one agent's; an agent's effective configuration is its character's
``clientConfig.discord``, overlaid key by key with the first, then the second. Storing one logs
a ``client_config`` change, so every process's running clients take it.
"""

from __future__ import annotations

import builtins
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from carrier.agents.errors import ClientConfigError
from carrier.client_checks import config_problems
from carrier.clients import ClientFactory, client_of_slot
from carrier.fleet.model import ChangeKind

if TYPE_CHECKING:
    from carrier.agents.connections import Connections
    from carrier.agents.status import Running
    from carrier.character import Character
    from carrier.fleet.base import FleetStore
    from carrier.memory.base import Store
    from carrier.types import AgentRecord

__all__ = ["ClientConfigs", "split_client_id", "validate_client_config"]

log = logging.getLogger(__name__)

_CONFIG_KEY = "client_config:"


class ClientConfigs:
    """The agent manager's client-configuration methods (a mixin of
    :class:`~carrier.agents.manager.AgentManager`, which provides what is declared here)."""

    store: Store
    _running: dict[str, Running]
    get: Callable[[str], Awaitable[AgentRecord]]
    character: Callable[[str], Awaitable[Character]]
    fleet: Callable[[], Awaitable[FleetStore]]
    connections: Connections

    @property
    def factories(self) -> dict[str, ClientFactory]:
        raise NotImplementedError  # the manager's

    async def get_client_config(self, client_id: str) -> dict[str, Any]:
        """The stored configuration under ``client_id`` (``name`` or ``agent_id:name``)."""
        value = await self.store.get_setting(_CONFIG_KEY + client_id)
        return dict(value) if isinstance(value, dict) else {}

    async def set_client_config(
        self, client_id: str, config: Mapping[str, Any]
    ) -> builtins.list[str]:
        """Validate and store a client configuration, then push it to the running clients it
        applies to. Returns the ids of the agents whose running client took it."""
        agent_id, name = split_client_id(client_id)
        if agent_id is not None:
            await self.get(agent_id)
        validate_client_config(client_id, name, config, self.factories.get(name))
        await self.store.set_setting(_CONFIG_KEY + client_id, dict(config))
        await (await self.fleet()).append_change(
            ChangeKind.CLIENT_CONFIG, agent_id, {"client": name}
        )
        return await self.push_client_config(agent_id, name)

    async def push_client_config(self, agent_id: str | None, name: str) -> builtins.list[str]:
        """Give the running ``name`` clients (of ``agent_id``, or of every agent) their
        configuration as stored now; the ids of the agents whose client took it."""
        applied = []
        targets = [agent_id] if agent_id is not None else list(self._running)
        for target in targets:
            running = self._running.get(target)
            if running is not None and await self._push_config(target, name, running):
                applied.append(target)
        return applied

    async def effective_client_config(self, agent_id: str, name: str) -> dict[str, Any]:
        character = await self.character(agent_id)
        config = dict(character.client_config.get(name) or {})
        config.update(await self.get_client_config(name))
        config.update(await self.get_client_config(f"{agent_id}:{name}"))
        return config

    async def _push_config(self, agent_id: str, name: str, running: Running) -> bool:
        """Give client ``name`` of a running agent (each of its parts running here, each with
        its part's settings laid over) its configuration as stored now; whether one took it."""
        took = False
        for slot, client in list(running.clients.items()):
            update = getattr(client, "update_config", None)
            if client_of_slot(slot) != name or update is None:
                continue
            try:
                config = await self.effective_client_config(agent_id, name)
                part = self.connections.part(agent_id, slot)
                result = update({**config, **part.config} if part is not None else config)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("client %s of agent %s refused its new configuration", slot, agent_id)
                continue
            took = True
        return took


def split_client_id(client_id: str) -> tuple[str | None, str]:
    """``"discord"`` → ``(None, "discord")``; ``"<agent_id>:discord"`` → ``(agent_id, "discord")``."""
    agent_id, _, name = client_id.rpartition(":")
    return (agent_id or None), name.lower()


def validate_client_config(
    client_id: str, name: str, config: Mapping[str, Any], factory: ClientFactory | None
) -> None:
    """Refuse literal secrets, and check the config against the client's ``config_model`` (a
    pydantic model on the factory) when it has one; raises :class:`ClientConfigError`."""
    problems = config_problems(name, config, factory)
    if problems:
        raise ClientConfigError(client_id, problems)
