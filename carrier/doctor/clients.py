"""Clients' checks: found through the ``carrier.doctor`` entry points, run per persona.

The core knows no platform: for each client a persona lists it loads the adapter's check by name
and hands it a :class:`ClientTarget` (the persona, its effective client configuration, the
environment, the open store). A check that cannot be loaded, raises, or hangs is reported as a
failure of that client, and the others still run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from carrier.doctor.base import ClientCheck, ClientTarget, Result, fail, skip, warn
from carrier.install import install_hint
from carrier.memory.base import Store
from carrier.settings import Settings

__all__ = ["ClientChecks"]

log = logging.getLogger(__name__)

GROUP = "carrier.doctor"
_CALLS_PER_CHECK = 6
"""A check makes a few network calls, each bounded by the timeout; the whole is bounded too."""


class ClientChecks:
    """Loads each adapter's check once, on first use."""

    def __init__(
        self,
        *,
        settings: Settings,
        environ: Mapping[str, str],
        store: Store | None,
        timeout: float,
        checks: Mapping[str, ClientCheck] | None = None,
    ) -> None:
        self.settings = settings
        self.environ = environ
        self.store = store
        self.timeout = timeout
        self._checks: dict[str, ClientCheck | str] | None = dict(checks) if checks else None
        self._installed: set[str] | None = None

    def _load(self) -> dict[str, ClientCheck | str]:
        """Name → check, or why it could not be loaded."""
        if self._checks is None:
            self._checks = {}
            for ep in entry_points(group=GROUP):
                try:
                    self._checks[ep.name] = ep.load()
                except Exception as exc:  # a broken adapter must not stop the other checks
                    self._checks[ep.name] = f"{type(exc).__name__}: {exc}"
        return self._checks

    def _client_installed(self, name: str) -> bool:
        if self._installed is None:
            self._installed = {ep.name for ep in entry_points(group="carrier.clients")}
        return name in self._installed

    async def check(self, character: Any) -> list[Result]:
        """Every client the character lists, in its order."""
        results: list[Result] = []
        for name in dict.fromkeys(str(c).lower() for c in character.clients):
            results.extend(await self._one(character, name))
        return results

    async def _one(self, character: Any, name: str) -> list[Result]:
        check = self._load().get(name)
        if check is None:
            if self._client_installed(name):
                return [skip(name, f"the {name} client has no doctor checks")]
            return [
                warn(
                    name,
                    f"no '{name}' client is installed in this Carrier; carrier run skips it",
                    f"remove {name} from the character's clients, or install its adapter",
                )
            ]
        if isinstance(check, str):
            return [
                fail(
                    name,
                    f"the {name} adapter's checks could not be loaded ({check})",
                    install_hint(f"the {name} client"),
                )
            ]
        target = ClientTarget(
            client=name,
            character=character,
            config=await self._config(character, name),
            environ=self.environ,
            store=self.store,
            timeout=self.timeout,
        )
        try:
            async with asyncio.timeout(self.timeout * _CALLS_PER_CHECK):
                return list(await check(target))
        except TimeoutError:
            return [
                fail(
                    name,
                    f"the {name} checks did not finish in {self.timeout * _CALLS_PER_CHECK:.0f} s",
                    "check the network between this machine and the platform",
                )
            ]
        except Exception as exc:
            log.debug("the %s check crashed", name, exc_info=True)
            return [
                fail(
                    name,
                    f"the {name} check crashed: {type(exc).__name__}: {exc}",
                    "report this as a bug in Carrier, with carrier doctor --json output",
                )
            ]

    async def _config(self, character: Any, name: str) -> dict[str, Any]:
        """The character's ``clientConfig.<name>`` overlaid with what the API stored, as
        :meth:`carrier.agents.AgentManager.effective_client_config` builds it."""
        config = dict(character.client_config.get(name) or {})
        if self.store is None:
            return config
        from carrier.agents import AgentManager
        from carrier.doctor.model import NoEmbedder

        manager = AgentManager(
            store=self.store, embedder=NoEmbedder(), settings=self.settings, environ=self.environ
        )
        config.update(await manager.get_client_config(name))
        config.update(await manager.get_client_config(f"{character.agent_id}:{name}"))
        return config
