"""Extension contracts: actions, evaluators, context providers, and plugins that bundle them.

A plugin registers all-or-nothing: if any of its names clashes with one already registered,
nothing of it is added. It can be unloaded again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from carrier.errors import ConfigError

if TYPE_CHECKING:
    from carrier.pipeline.base import Hook, HookPoint, Turn

__all__ = [
    "Action",
    "ActionResult",
    "ContextProvider",
    "Evaluator",
    "Plugin",
    "ProviderOutput",
    "Registry",
]


@dataclass
class ActionResult:
    """What an action did. ``replies`` are extra messages to send after the model's own text (a
    continuation, a tool's answer); ``data`` is recorded in the trace."""

    action: str
    ok: bool = True
    replies: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


ActionHandler = Callable[["Turn"], Awaitable[ActionResult]]
Validator = Callable[["Turn"], Awaitable[bool]]


async def _always(_turn: Turn) -> bool:
    return True


@dataclass
class Action:
    """Something the model can choose to do. ``similes`` are other names the model may use."""

    name: str
    description: str
    handler: ActionHandler
    similes: Sequence[str] = ()
    examples: Sequence[str] = ()
    """Short examples shown to the model (``user: ... / agent: ... (ACTION)``)."""
    validate: Validator = _always
    """Whether the action is available in this turn (shown to the model and runnable)."""
    parameters: dict[str, Any] | None = None
    """JSON schema of arguments: the action is offered to the model as a tool (tool calling)
    rather than listed by name, and receives the call in ``turn.current_tool_call``."""
    tool_name: str | None = None
    """The name the model calls the tool by (defaults to ``name``)."""


@dataclass
class Evaluator:
    """Runs after a turn (fact extraction, reflection, checks); may write memories."""

    name: str
    description: str
    handler: Callable[[Turn], Awaitable[None]]
    validate: Validator = _always
    always_run: bool = False
    """Run even when the agent did not answer."""
    background: bool = False
    """May run after the turn, on the agent's background queue (:mod:`carrier.background`):
    the reply, the message's status and the room are not held by it, its model calls have their
    own deadline, and a room's waiting runs are coalesced into one (or dropped when the queue
    is full). Only for an evaluator that does not change the turn and that works out what is
    due from the store (a watermark), so that a run dropped or cut by a crash is caught up by
    the next one. Off by default: an evaluator written for the turn sees the turn as before."""


@dataclass
class ProviderOutput:
    """A named section of State: ``values`` become template variables, ``text`` the section body."""

    values: dict[str, str] = field(default_factory=dict)
    text: str = ""


@dataclass
class ContextProvider:
    """Contributes a named section to State (time, facts, platform context, ...)."""

    name: str
    provide: Callable[[Turn], Awaitable[ProviderOutput]]
    position: int = 100
    """Order of the section in the prompt (lower first)."""
    local: bool = False
    """The provider answers from what the process holds (the turn, the character, the store)
    and waits on nothing outside it. Local providers run one after another in the state
    stage's own task; the others (a provider that calls out: HTTP, a model) each run in a task
    of their own, all at once, while the local ones run. A task costs loop iterations that a
    provider answering in microseconds does not need (~0.2 ms a turn for the built-ins)."""


@dataclass
class Plugin:
    """A bundle of actions, evaluators, providers and hooks, registered all-or-nothing."""

    name: str
    actions: Sequence[Action] = ()
    evaluators: Sequence[Evaluator] = ()
    providers: Sequence[ContextProvider] = ()
    hooks: Sequence[tuple[HookPoint, Hook]] = ()
    description: str = ""


class Registry:
    """The actions, evaluators, providers and hooks of one runtime."""

    def __init__(self) -> None:
        self.actions: dict[str, Action] = {}
        self.evaluators: dict[str, Evaluator] = {}
        self.providers: dict[str, ContextProvider] = {}
        self.hooks: dict[str, list[Hook]] = {}
        self.plugins: dict[str, Plugin] = {}
        self._similes: dict[str, str] = {}

    def find_action(self, name: str) -> Action | None:
        """Look an action up by name or simile, case-insensitively."""
        key = name.strip().upper()
        real = self._similes.get(key, key)
        return self.actions.get(real)

    def register(self, plugin: Plugin) -> None:
        """Add everything of a plugin, or nothing if any name clashes."""
        clashes: list[str] = []
        if plugin.name in self.plugins:
            clashes.append(f"plugin {plugin.name!r}")
        for action in plugin.actions:
            for n in (action.name, *action.similes):
                if n.upper() in self._similes or n.upper() in self.actions:
                    clashes.append(f"action {n!r}")
        clashes += [f"evaluator {e.name!r}" for e in plugin.evaluators if e.name in self.evaluators]
        clashes += [f"provider {p.name!r}" for p in plugin.providers if p.name in self.providers]
        if clashes:
            raise ConfigError(
                f"plugin {plugin.name!r} not registered: {', '.join(clashes)} already registered; "
                "rename them or unregister the plugin that owns them first"
            )
        for action in plugin.actions:
            self.actions[action.name.upper()] = action
            for simile in action.similes:
                self._similes[simile.upper()] = action.name.upper()
        for evaluator in plugin.evaluators:
            self.evaluators[evaluator.name] = evaluator
        for provider in plugin.providers:
            self.providers[provider.name] = provider
        for point, hook in plugin.hooks:
            self.hooks.setdefault(str(point), []).append(hook)
        self.plugins[plugin.name] = plugin

    def unregister(self, name: str) -> None:
        """Remove everything a plugin added."""
        plugin = self.plugins.pop(name, None)
        if plugin is None:
            raise ConfigError(f"plugin {name!r} is not registered")
        for action in plugin.actions:
            self.actions.pop(action.name.upper(), None)
            for simile in action.similes:
                self._similes.pop(simile.upper(), None)
        for evaluator in plugin.evaluators:
            self.evaluators.pop(evaluator.name, None)
        for provider in plugin.providers:
            self.providers.pop(provider.name, None)
        for point, hook in plugin.hooks:
            hooks = self.hooks.get(str(point), [])
            if hook in hooks:
                hooks.remove(hook)

    def hooks_for(self, point: HookPoint) -> list[Hook]:
        return self.hooks.get(str(point), [])
