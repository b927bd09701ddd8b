"""The registered HTTP tools, persisted in the store and applied to running agents.

Tools are registered over the API (``POST /tools``); each agent's runtime gets the tools that apply
to it as one plugin named ``tools``, replaced whenever the set changes. A spec that breaks the
operator's rules (a header secret ``CARRIER_TOOL_ENV`` does not allow for its host, a URL at a
loopback, private or link-local address not named in ``CARRIER_TOOL_INTERNAL_HOSTS``) is refused
at registration with every problem named, and again at each call (the rules may change).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from carrier.memory.base import Store
from carrier.runtime import AgentRuntime
from carrier.tools import CallLimiter, ToolPolicy, ToolSpec, tools_plugin

__all__ = ["TOOLS_KEY", "ToolExists", "ToolRefused", "ToolRegistry"]

log = logging.getLogger(__name__)

TOOLS_KEY = "tools"
"""Store settings key holding ``{name: spec}``."""


class ToolExists(Exception):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"a tool named {name!r} is registered already; delete it first to replace it"
        )


class ToolRefused(Exception):
    """A spec the operator's rules do not allow; ``problems`` are ``(field path, message)``."""

    def __init__(self, name: str, problems: list[tuple[str, str]]) -> None:
        self.name = name
        self.problems = problems
        super().__init__(f"tool {name!r} is not allowed here: " + "; ".join(m for _, m in problems))


class ToolRegistry:
    def __init__(
        self, *, store: Store, environ: Mapping[str, str], policy: ToolPolicy | None = None
    ) -> None:
        self.store = store
        self.environ = environ
        self.policy = policy if policy is not None else ToolPolicy()
        self.limiter = CallLimiter()
        """Calls per person and tool, shared by every agent's copy of the tools (and kept when
        the set of tools changes)."""
        self._warned: set[tuple[str, str]] = set()

    def problems(self, spec: ToolSpec) -> list[tuple[str, str]]:
        """What in ``spec`` the operator's rules refuse, as ``(field path, message)``."""
        found = []
        for ref in spec.header_refs():
            problem = self.policy.env_problem(ref.env or ref.name, spec.host)
            if problem is not None:
                found.append((f"headers.{ref.name}", f"header {ref.name!r}: {problem}"))
        problem = self.policy.address_problem(spec.host)
        if problem is not None:
            found.append(("url", problem))
        return found

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
        problems = self.problems(spec)
        if problems:
            raise ToolRefused(spec.name, problems)
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
        specs = list((await self.all()).values())
        for spec in specs:
            for _, problem in self.problems(spec):  # stored before the rules changed
                if (spec.name, problem) not in self._warned:
                    self._warned.add((spec.name, problem))
                    log.warning("tool %s will refuse its calls: %s", spec.name, problem)
        plugin = tools_plugin(
            specs,
            agent_id=runtime.agent_id,
            environ=self.environ,
            policy=self.policy,
            limiter=self.limiter,
        )
        registry = runtime.registry
        if plugin.name in registry.plugins:
            registry.unregister(plugin.name)
        if plugin.actions:
            registry.register(plugin)
