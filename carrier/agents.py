"""AgentManager: many agents in one process, each started, stopped or edited on its own.

Agents (their character as camelCase data, and a status) live in the Store, so ``carrier serve``
and ``carrier run`` see the same agents. A started agent has an :class:`AgentRuntime` and the
platform clients its character lists (found through ``carrier.clients`` entry points)::

    manager = AgentManager(store=store, embedder=embedder, settings=settings, environ=os.environ)
    record = await manager.create(character)
    status = await manager.start(record.id)      # runtime + clients; says which were skipped
    result = await manager.runtime(record.id).handle(message)
    await manager.close()                        # stops every agent

Client configuration is stored per client id: ``discord`` applies to every agent's Discord client,
``<agent_id>:discord`` to one agent's; an agent's effective configuration is its character's
``clientConfig.discord``, overlaid key by key with the first, then the second.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from carrier.assemble import build_runtime
from carrier.audit.base import AuditLog, audit_from
from carrier.audit.context import current_actor
from carrier.audit.model import AuditKind
from carrier.character import Character, character_data, load_character, parse_character
from carrier.character.secrets import find_secret_problems
from carrier.clients import Client, ClientFactory, ClientUnavailable, discover_clients
from carrier.errors import CarrierError, Problem, UserError
from carrier.llm.base import ModelProvider
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.memory.rights import ForgetReport, forget_entity
from carrier.plugins import Plugin
from carrier.runtime import AgentRuntime
from carrier.settings import Settings
from carrier.tool_registry import ToolRegistry
from carrier.tools.policy import ToolPolicy
from carrier.types import AgentRecord, utcnow

__all__ = [
    "AgentExists",
    "AgentManager",
    "AgentNotFound",
    "AgentNotRunning",
    "AgentStatus",
    "ClientConfigError",
    "LoadReport",
    "ModelFactory",
]

log = logging.getLogger(__name__)

ModelFactory = Callable[[Character], ModelProvider | None]
"""Picks a character's model; ``None`` falls back to :func:`carrier.assemble.choose_model`."""

_CONFIG_KEY = "client_config:"


class AgentNotFound(UserError):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"no agent with id {agent_id!r}; list the agents to see their ids")


class AgentExists(UserError):
    def __init__(self, agent_id: str, name: str) -> None:
        self.agent_id = agent_id
        super().__init__(
            f"an agent with id {agent_id!r} ({name}) exists already; update it instead, or give "
            "the new character another name or an explicit `id`"
        )


class AgentNotRunning(UserError):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"agent {agent_id!r} is not running; start it first")


class ClientConfigError(UserError):
    """A client configuration is invalid; ``problems`` name each field path."""

    def __init__(self, client_id: str, problems: list[Problem]) -> None:
        self.client_id = client_id
        self.problems = problems
        detail = "; ".join(str(p) for p in problems)
        super().__init__(f"invalid configuration for client {client_id!r}: {detail}")


@dataclass
class AgentStatus:
    """An agent as stored, plus what runs of it in this process."""

    record: AgentRecord
    running: bool = False
    model: str | None = None
    """The name of the model that answers (``openai/gpt-4o-mini``), ``offline`` for the offline
    provider; None when the agent does not run here."""
    model_note: str | None = None
    """Why that model: e.g. why the agent is offline (``no model is configured``). No secrets."""
    offline: bool | None = None
    clients: list[str] = field(default_factory=list)
    """Clients started."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Clients the character lists that did not start, with the reason."""
    interrupted: int = 0
    """Messages a previous stop left unfinished (settled at start: see :mod:`carrier.outbox`)."""


@dataclass
class LoadReport:
    """What :meth:`AgentManager.load_files` did with one file."""

    path: str
    error: str | None = None
    status: AgentStatus | None = None


@dataclass
class _Running:
    runtime: AgentRuntime
    model: str
    model_note: str | None
    offline: bool
    clients: dict[str, Client] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    interrupted: int = 0


_NO_CLIENTS = (
    "not started in this process (it runs without platform clients: carrier serve --no-clients); "
    "the worker process (carrier run) runs them"
)


class AgentManager:
    """Creates, stores, starts and stops agents. Keyword-only; one per process."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        environ: Mapping[str, str],
        model_factory: ModelFactory | None = None,
        client_factories: Mapping[str, ClientFactory] | None = None,
        plugins: Sequence[Plugin] = (),
        services: Mapping[str, Any] | None = None,
        start_clients: bool = True,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.environ = environ
        self.model_factory = model_factory
        self._factories = dict(client_factories) if client_factories is not None else None
        self._plugins = list(plugins)
        self.services: dict[str, Any] = dict(services or {})
        """Given to every runtime started here (``runtime.services``), e.g. ``"jobs"``."""
        self.start_clients = start_clients
        """False: agents started here answer the API only, and their platform clients are left
        to another process (``carrier serve --no-clients`` beside ``carrier run --no-api``), so a
        bot never connects twice."""
        self.tools = ToolRegistry(
            store=store, environ=environ, policy=ToolPolicy.from_settings(settings)
        )
        self._running: dict[str, _Running] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sources: dict[str, str] = {}

    @property
    def factories(self) -> dict[str, ClientFactory]:
        """Installed client factories (discovered once, on first use)."""
        if self._factories is None:
            self._factories = discover_clients()
        return self._factories

    async def refresh_tools(self) -> None:
        """Apply the registered tools to every running agent (after a tool was added or removed)."""
        for running in self._running.values():
            await self.tools.apply(running.runtime)

    def add_plugin(self, plugin: Plugin) -> None:
        """Register a plugin (hooks, actions) in every running agent and every one started later;
        it replaces a plugin of the same name added before."""
        for running in self._running.values():
            registry = running.runtime.registry
            if plugin.name in registry.plugins:
                registry.unregister(plugin.name)
            registry.register(plugin)
        self._plugins = [p for p in self._plugins if p.name != plugin.name] + [plugin]

    @property
    def audit(self) -> AuditLog:
        """The host's audit log (``services["audit"]``), or one that records nothing."""
        return audit_from(self.services)

    def _lock(self, agent_id: str) -> asyncio.Lock:
        return self._locks.setdefault(agent_id, asyncio.Lock())

    # -- records ----------------------------------------------------------------------------
    async def create(self, character: Character) -> AgentRecord:
        """Store a new, stopped agent. Raises :class:`AgentExists` if its id is taken."""
        agent_id = character.agent_id
        async with self._lock(agent_id):
            existing = await self.store.get_agent(agent_id)
            if existing is not None:
                raise AgentExists(agent_id, existing.name)
            record = AgentRecord(
                id=agent_id, name=character.name, character=character_data(character)
            )
            await self.store.upsert_agent(record)
            if character.source:
                self._sources[agent_id] = character.source
            return record

    async def list(self) -> list[AgentRecord]:
        return await self.store.list_agents()

    async def get(self, agent_id: str) -> AgentRecord:
        record = await self.store.get_agent(agent_id)
        if record is None:
            raise AgentNotFound(agent_id)
        return record

    async def character(self, agent_id: str) -> Character:
        """The agent's character, parsed from the store."""
        record = await self.get(agent_id)
        return parse_character(record.character, source=self._sources.get(agent_id))

    async def status(self, agent_id: str) -> AgentStatus:
        record = await self.get(agent_id)
        running = self._running.get(agent_id)
        if running is None:
            return AgentStatus(record=record)
        return AgentStatus(
            record=record,
            running=True,
            model=running.model,
            model_note=running.model_note,
            offline=running.offline,
            clients=list(running.clients),
            skipped=dict(running.skipped),
            interrupted=running.interrupted,
        )

    async def update(self, agent_id: str, character: Character) -> AgentRecord:
        """Replace the agent's character. A running agent keeps its runtime and uses the new
        character from its next turn (its model is chosen again and its clients get their new
        configuration; a changed ``clients`` list applies at the next start). The agent keeps its
        id even when the name changes."""
        if character.id is not None and character.id != agent_id:
            raise UserError(
                f"the character's id {character.id!r} does not match the agent {agent_id!r}; "
                "remove `id` or make it equal"
            )
        if character.agent_id != agent_id:
            character = character.model_copy(update={"id": agent_id})
        async with self._lock(agent_id):
            record = await self.get(agent_id)
            record.name, record.character = character.name, character_data(character)
            record.updated_at = utcnow()
            await self.store.upsert_agent(record)
            if character.source:
                self._sources[agent_id] = character.source
            running = self._running.get(agent_id)
            if running is not None:
                running.runtime.character = character
                await self._swap_model(running, character)
                for name in running.clients:
                    await self._push_config(agent_id, name, running)
            return record

    async def delete(self, agent_id: str) -> None:
        """Stop the agent if it runs, then delete it with everything it owns (memories, rooms,
        entities, uploaded files)."""
        await self.stop(agent_id)
        async with self._lock(agent_id):
            if not await self.store.delete_agent(agent_id):
                raise AgentNotFound(agent_id)
            for folder in ("media", "uploads"):
                path = self.settings.data_dir / folder / agent_id
                await asyncio.to_thread(shutil.rmtree, path, True)
            self._sources.pop(agent_id, None)
        self._locks.pop(agent_id, None)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self, agent_id: str) -> AgentStatus:
        """Build and start the agent's runtime, then each client its character lists. Starting a
        running agent does nothing. A client that cannot start is skipped with the reason."""
        async with self._lock(agent_id):
            if agent_id not in self._running:
                character = await self.character(agent_id)
                runtime, choice = build_runtime(
                    character,
                    settings=self.settings,
                    store=self.store,
                    embedder=self.embedder,
                    environ=self.environ,
                    model=self._model_for(character),
                )
                runtime.services.update(self.services)
                for plugin in self._plugins:
                    runtime.registry.register(plugin)
                await self.tools.apply(runtime)
                running = _Running(
                    runtime=runtime,
                    model=choice.model,
                    model_note=choice.note,
                    offline=choice.offline,
                )
                running.interrupted = await runtime.start()
                self._running[agent_id] = running
                # Debug: the caller reports it once (carrier run prints it, the API route logs it)
                log.debug("%s (%s): %s", character.name, agent_id, choice.description)
                for name in dict.fromkeys(str(c).lower() for c in character.clients):
                    await self._start_client(agent_id, name, running)
                await self.audit.record(
                    AuditKind.AGENT_START,
                    actor=current_actor(),
                    agent_id=agent_id,
                    action="start",
                    detail={
                        "model": choice.model,
                        "clients": list(running.clients),
                        "skipped": sorted(running.skipped),
                    },
                )
        return await self.status(agent_id)

    async def stop(self, agent_id: str) -> AgentStatus:
        """Stop the agent's clients and runtime; other agents are not touched."""
        async with self._lock(agent_id):
            running = self._running.pop(agent_id, None)
            if running is not None:
                for name, client in running.clients.items():
                    try:
                        await client.stop()
                    except Exception:
                        log.exception("client %s of agent %s did not stop cleanly", name, agent_id)
                await running.runtime.stop()
                await self.audit.record(
                    AuditKind.AGENT_STOP,
                    actor=current_actor(),
                    agent_id=agent_id,
                    action="stop",
                    detail={"clients": list(running.clients)},
                )
        return await self.status(agent_id)

    def runtime(self, agent_id: str) -> AgentRuntime:
        """The running agent's runtime; :class:`AgentNotRunning` when it is not started."""
        running = self._running.get(agent_id)
        if running is None:
            raise AgentNotRunning(agent_id)
        return running.runtime

    def running_ids(self) -> builtins.list[str]:
        return list(self._running)

    def client(self, agent_id: str, name: str) -> Client | None:
        """A started client of a running agent, by name."""
        running = self._running.get(agent_id)
        return running.clients.get(name) if running is not None else None

    async def load_files(self, paths: Iterable[str | Path]) -> builtins.list[LoadReport]:
        """Create or update an agent from each character file and start it. A file that does
        not load is reported and skipped; the others still start."""
        reports: builtins.list[LoadReport] = []
        for path in paths:
            report = LoadReport(path=str(path))
            reports.append(report)
            try:
                record = await self.upsert_file(path)
                report.status = await self.start(record.id)
            except CarrierError as exc:
                report.error = str(exc)
        return reports

    async def upsert_file(self, path: str | Path) -> AgentRecord:
        """Create the agent of a character file, or update it to the file; not started
        (``carrier run`` starts each in turn, showing progress)."""
        character = load_character(path)
        if await self.store.get_agent(character.agent_id) is None:
            return await self.create(character)
        return await self.update(character.agent_id, character)

    async def close(self) -> None:
        """Stop every running agent."""
        for agent_id in list(self._running):
            try:
                await self.stop(agent_id)
            except Exception:
                log.exception("agent %s did not stop cleanly", agent_id)

    async def forget(self, agent_id: str, entity_id: str) -> ForgetReport:
        """Delete what the agent keeps of a person (see :func:`carrier.memory.rights.forget_entity`)."""
        await self.get(agent_id)
        running = self._running.get(agent_id)
        if running is not None:
            return await running.runtime.forget(entity_id)
        return await forget_entity(
            self.store, agent_id=agent_id, entity_id=entity_id, audit=self.audit
        )

    # -- client configuration ---------------------------------------------------------------
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
        applied = []
        targets = [agent_id] if agent_id is not None else list(self._running)
        for target in targets:
            running = self._running.get(target)
            if (
                running is not None
                and name in running.clients
                and await self._push_config(target, name, running)
            ):
                applied.append(target)
        return applied

    async def effective_client_config(self, agent_id: str, name: str) -> dict[str, Any]:
        character = await self.character(agent_id)
        config = dict(character.client_config.get(name) or {})
        config.update(await self.get_client_config(name))
        config.update(await self.get_client_config(f"{agent_id}:{name}"))
        return config

    # -- internals --------------------------------------------------------------------------
    def _model_for(self, character: Character) -> ModelProvider | None:
        return self.model_factory(character) if self.model_factory is not None else None

    async def _swap_model(self, running: _Running, character: Character) -> None:
        from carrier.assemble import choose_model, given_model

        given = self._model_for(character)
        choice = (
            given_model(given)
            if given is not None
            else choose_model(
                character, self.settings, embedder=self.embedder, environ=self.environ
            )
        )
        running.model, running.model_note = choice.model, choice.note
        running.offline = choice.offline
        old, running.runtime.model = running.runtime.model, choice.provider
        if old is not choice.provider:
            await old.aclose()

    async def _start_client(self, agent_id: str, name: str, running: _Running) -> None:
        if not self.start_clients:
            running.skipped[name] = _NO_CLIENTS
            return
        factory = self.factories.get(name)
        if factory is None:
            running.skipped[name] = f"no '{name}' client is installed in this version"
            return
        try:
            config = await self.effective_client_config(agent_id, name)
            client = factory(running.runtime, config, self.environ)
            await client.start()
        except ClientUnavailable as exc:
            running.skipped[name] = str(exc)
            return
        except Exception as exc:  # one broken client must not stop the agent or the others
            log.exception("client %s of agent %s failed to start", name, agent_id)
            running.skipped[name] = f"failed to start: {type(exc).__name__}: {exc}"
            return
        running.clients[name] = client

    async def _push_config(self, agent_id: str, name: str, running: _Running) -> bool:
        client = running.clients.get(name)
        update = getattr(client, "update_config", None)
        if update is None:
            return False
        try:
            result = update(await self.effective_client_config(agent_id, name))
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("client %s of agent %s refused its new configuration", name, agent_id)
            return False
        return True


def split_client_id(client_id: str) -> tuple[str | None, str]:
    """``"discord"`` → ``(None, "discord")``; ``"<agent_id>:discord"`` → ``(agent_id, "discord")``."""
    agent_id, _, name = client_id.rpartition(":")
    return (agent_id or None), name.lower()


def validate_client_config(
    client_id: str, name: str, config: Mapping[str, Any], factory: ClientFactory | None
) -> None:
    """Refuse literal secrets, and check the config against the client's ``config_model`` (a
    pydantic model on the factory) when it has one; raises :class:`ClientConfigError`."""
    problems = [
        Problem(p.path.removeprefix(f"clientConfig.{name}").lstrip("."), p.message)
        for p in find_secret_problems({"clientConfig": {name: dict(config)}})
    ]
    model = getattr(factory, "config_model", None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        try:
            model.model_validate(dict(config))
        except ValidationError as exc:
            for err in exc.errors(include_url=False, include_input=False):
                path = ".".join(str(part) for part in err["loc"])
                problems.append(Problem(path, err["msg"]))
    if problems:
        raise ClientConfigError(client_id, problems)
