"""What the operator lets tools do: which secrets they may send, to which hosts, which internal
hosts they may reach, and how often one person may make one tool run.

The rules come from the process's settings (``CARRIER_TOOL_ENV``, ``CARRIER_TOOL_INTERNAL_HOSTS``,
``CARRIER_TOOL_CALLS_PER_HOUR``), not from the tool specs, because a spec is written through the
API with the admin token, and a token can leak (it travels over HTTP and sits in a browser), while
the environment is the machine owner's. So even a leaked admin token cannot register a tool that
sends ``CARRIER_SECRET_KEY`` to its own server, or aims at the cloud metadata service.

``CARRIER_TOOL_ENV`` lists the environment variables tool headers may reference, comma-separated:

- ``WEATHER_API_KEY@api.weather.example``: that variable, sent only to that host (recommended:
  a registered tool aimed elsewhere cannot carry it away);
- ``WEATHER_API_KEY``: that variable, to whatever host the tool names;
- ``WEATHER_*``: a pattern (``fnmatch``), optionally ``@host`` too.

Carrier's own variables (``CARRIER_*``), model providers' keys (``OPENAI_API_KEY``, ... as
:mod:`carrier.llm.models` knows them) and the platform credentials (``DISCORD_*``,
``INSTAGRAM_*``) are granted only by their exact name, never by a pattern.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

import httpx

from carrier.errors import ConfigError
from carrier.llm.models import PROVIDER_MODELS, credential_env_vars
from carrier.safety.egress import (
    Resolver,
    guarded_transport,
    literal_address,
    normalize_host,
    refusal,
)

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = [
    "DEFAULT_CALLS_PER_HOUR",
    "EnvGrant",
    "ToolPolicy",
    "is_protected",
]

DEFAULT_CALLS_PER_HOUR = 20
"""How many calls of one tool one person may set off per hour, unless the tool or
``CARRIER_TOOL_CALLS_PER_HOUR`` says otherwise."""

_PROTECTED_PREFIXES = ("CARRIER_", "DISCORD_", "INSTAGRAM_")
_MORE_VENDORS = ("azure", "bedrock", "vertex_ai", "huggingface", "cohere", "fireworks_ai")
_ENTRY = re.compile(r"^(?P<name>[A-Za-z_*?][A-Za-z0-9_*?]*)(?:@(?P<host>[^@\s]+))?$")


@cache
def _provider_keys() -> frozenset[str]:
    models = [*PROVIDER_MODELS.values(), *(f"{vendor}/any" for vendor in _MORE_VENDORS)]
    return frozenset(name for model in models for name in credential_env_vars(model))


def is_protected(name: str) -> bool:
    """Carrier's own settings, model providers' keys and platform credentials: a tool may send
    one only when ``CARRIER_TOOL_ENV`` names it exactly."""
    return name.startswith(_PROTECTED_PREFIXES) or name in _provider_keys()


@dataclass(frozen=True, slots=True)
class EnvGrant:
    """One entry of ``CARRIER_TOOL_ENV``: a name or pattern, and the host it is bound to."""

    name: str
    host: str | None = None

    @property
    def pattern(self) -> bool:
        return any(c in self.name for c in "*?")

    @classmethod
    def parse(cls, entry: str) -> EnvGrant:
        match = _ENTRY.match(entry.strip())
        if match is None:
            raise ValueError(
                f"CARRIER_TOOL_ENV: {entry!r} is not NAME, NAME@host or a pattern like WEATHER_*"
            )
        host = match["host"]
        return cls(name=match["name"], host=normalize_host(host) if host else None)

    def names(self, env: str) -> bool:
        """Whether this entry grants ``env`` (a pattern never grants a protected name)."""
        if not self.pattern:
            return env == self.name
        return not is_protected(env) and fnmatch.fnmatchcase(env, self.name)


@dataclass(frozen=True, kw_only=True)
class ToolPolicy:
    """The operator's rules for tools. The default allows no environment variable and no
    internal host: a tool without headers that calls a public address still works."""

    env: tuple[EnvGrant, ...] = ()
    internal_hosts: frozenset[str] = field(default_factory=frozenset)
    calls_per_hour: int = DEFAULT_CALLS_PER_HOUR
    resolver: Resolver | None = None
    """How host names are resolved (tests inject one); the system resolver when None."""

    @classmethod
    def of(
        cls,
        *,
        env: Iterable[str] = (),
        internal_hosts: Collection[str] = (),
        calls_per_hour: int = DEFAULT_CALLS_PER_HOUR,
        resolver: Resolver | None = None,
    ) -> ToolPolicy:
        """A policy from plain lists (entries as ``CARRIER_TOOL_ENV`` takes them)."""
        return cls(
            env=tuple(EnvGrant.parse(e) for e in env if e.strip()),
            internal_hosts=frozenset(normalize_host(h) for h in internal_hosts if h.strip()),
            calls_per_hour=calls_per_hour,
            resolver=resolver,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ToolPolicy:
        """The policy of ``CARRIER_TOOL_*``; :class:`ConfigError` for an entry it cannot read."""
        try:
            return cls.of(
                env=settings.tool_env,
                internal_hosts=settings.tool_internal_hosts,
                calls_per_hour=settings.tool_calls_per_hour,
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    # -- header secrets --------------------------------------------------------------------
    def env_problem(self, env: str, host: str) -> str | None:
        """Why a tool aimed at ``host`` may not send the variable ``env``, or None."""
        grants = [g for g in self.env if g.names(env)]
        if not grants:
            if is_protected(env):
                return (
                    f"{env} is one of Carrier's own secrets, a model provider's key or a platform "
                    "credential; a tool may send it only if CARRIER_TOOL_ENV names it exactly"
                )
            return (
                f"the operator has not allowed tools to send {env}: add it to CARRIER_TOOL_ENV "
                f"(best bound to the tool's host: CARRIER_TOOL_ENV={env}@{host}) and restart"
            )
        wanted = normalize_host(host)
        if any(g.host is None or g.host == wanted for g in grants):
            return None
        hosts = ", ".join(sorted({g.host for g in grants if g.host}))
        return f"CARRIER_TOOL_ENV allows {env} only for {hosts}, not {host}"

    # -- where tools may go ----------------------------------------------------------------
    def is_internal(self, host: str) -> bool:
        return normalize_host(host) in self.internal_hosts

    def address_problem(self, host: str) -> str | None:
        """Why a URL whose host is written as an address (or ``localhost``) may not be used,
        decided without resolving anything; None for names, which are checked at connect
        time."""
        if self.is_internal(host):
            return None
        name = normalize_host(host)
        if name == "localhost" or name.endswith(".localhost"):
            why: str | None = "a loopback name"
        else:
            address = literal_address(host)
            why = refusal(address) if address is not None else None
        if why is None:
            return None
        return (
            f"{host} is {why}; tools may reach public addresses only, unless the operator names "
            "the host in CARRIER_TOOL_INTERNAL_HOSTS"
        )

    def transport(self) -> httpx.AsyncBaseTransport:
        """The HTTP transport of one tool call: every connection checked (see
        :mod:`carrier.safety.egress`)."""
        return guarded_transport(internal_hosts=self.internal_hosts, resolver=self.resolver)
