"""The registered HTTP tools, persisted in the store and applied to running agents.

Tools are registered over the API (``POST /tools``); each agent's runtime gets the tools that apply
to it as one plugin named ``tools``, replaced whenever the set changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from carrier.memory.base import Store
from carrier.runtime import AgentRuntime
from carrier.tools import ToolSpec, tools_plugin

__all__ = ["TOOLS_KEY", "ToolExists", "ToolRegistry"]

log = logging.getLogger(__name__)

TOOLS_KEY = "tools"
"""Store settings key holding ``{name: spec}``."""


class ToolExists(Exception):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"a tool named {name!r} is registered already; delete it first to replace it"
        )


class ToolRegistry:
    def __init__(self, *, store: Store, environ: Mapping[str, str]) -> None:
        self.store = store
        self.environ = environ

    async def all(self) -> dict[str, ToolSpec]:
        raw = await self.store.get_setting(TOOLS_KEY) or {}
        specs: dict[str, ToolSpec] = {}
        for name, data in raw.items():
            try:
                specs[name] = ToolSpec.model_validate(data)
            except ValueError as exc:  # a spec stored by an older version: skip it, say so
                log.warning("stored tool %r is invalid and was skipped: %s", name, exc)
        return specs

    async def add(self, spec: ToolSpec) -> None:
        raw = dict(await self.store.get_setting(TOOLS_KEY) or {})
        if spec.name in raw:
            raise ToolExists(spec.name)
        raw[spec.name] = spec.model_dump(mode="json")
        await self.store.set_setting(TOOLS_KEY, raw)

    async def remove(self, name: str) -> bool:
        raw = dict(await self.store.get_setting(TOOLS_KEY) or {})
        if raw.pop(name, None) is None:
            return False
        await self.store.set_setting(TOOLS_KEY, raw)
        return True

    async def apply(self, runtime: AgentRuntime) -> None:
        """Give ``runtime`` the current tools that apply to it (replacing the previous set)."""
        plugin = tools_plugin(
            list((await self.all()).values()), agent_id=runtime.agent_id, environ=self.environ
        )
        registry = runtime.registry
        if plugin.name in registry.plugins:
            registry.unregister(plugin.name)
        if plugin.actions:
            registry.register(plugin)
