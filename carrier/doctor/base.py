"""What ``carrier doctor`` checks produce, and what an adapter's check is given.

Every check returns :class:`Result` records: a name, a status, what was found and, when something
is wrong, how to fix it. Platform adapters add their own checks through the ``carrier.doctor``
entry-point group (the core never imports them)::

    [project.entry-points."carrier.doctor"]
    discord = "clients.discord.doctor:check"

An adapter's check is ``async def check(target: ClientTarget) -> Sequence[Result]``, called once
for each persona that lists the client. Results never hold a secret: name the variable instead
(:meth:`ClientTarget.secret_var`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from carrier.memory.base import Store

__all__ = [
    "STATUSES",
    "ClientCheck",
    "ClientTarget",
    "Result",
    "Status",
    "fail",
    "ok",
    "skip",
    "warn",
]

Status = Literal["ok", "warn", "fail", "skip"]
"""``ok``: works. ``warn``: works, or is not needed, but deserves a look. ``fail``: something a
configured persona needs does not work (``carrier doctor`` exits 1). ``skip``: not checked, and
why (a check it depends on failed, or it does not apply)."""

STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of one check."""

    name: str
    """What was checked, short: ``data dir``, ``store``, ``model``, ``discord token``."""
    status: Status
    detail: str = ""
    """What was found, in a sentence (no secrets)."""
    fix: str = ""
    """How to fix it, when the status is ``warn`` or ``fail``."""
    persona: str | None = None
    """The persona the check concerns (set by the runner); ``None`` for the deployment."""


def ok(name: str, detail: str = "") -> Result:
    return Result(name, "ok", detail)


def warn(name: str, detail: str, fix: str = "") -> Result:
    return Result(name, "warn", detail, fix)


def fail(name: str, detail: str, fix: str) -> Result:
    return Result(name, "fail", detail, fix)


def skip(name: str, detail: str) -> Result:
    return Result(name, "skip", detail)


@dataclass(frozen=True)
class ClientTarget:
    """One persona's configuration of one client, as ``carrier run`` would start it."""

    client: str
    """The client's name (``discord``), as listed in the character's ``clients``."""
    character: Any
    """The :class:`~carrier.character.Character`; secrets are resolved through it."""
    config: Mapping[str, Any]
    """The effective ``clientConfig.<client>``: the character's, overlaid with the configuration
    stored through the API (``<client>``, then ``<agent_id>:<client>``) when the store is open."""
    environ: Mapping[str, str] = field(repr=False)
    """The environment the client would see, ``CARRIER_SECRET_KEY`` included."""
    store: Store | None = None
    """The open store (for state a client keeps there, e.g. a saved session); ``None`` when the
    doctor could not open it without changing it."""
    timeout: float = 10.0
    """Seconds any one network call may take."""

    @property
    def persona(self) -> str:
        return str(self.character.name)

    def secret(self, name: str) -> str | None:
        """The secret's value, resolved as the client resolves it (``None`` when unset)."""
        value = self.character.resolve_secret(name, self.environ)
        return str(value) if value else None

    def secret_var(self, name: str) -> str:
        """The environment variable that holds secret ``name``: what to print instead of it."""
        ref = self.character.secret_refs().get(name)
        return str(ref.env) if ref is not None and ref.env else name


ClientCheck = Callable[[ClientTarget], Awaitable[Sequence[Result]]]
"""What a ``carrier.doctor`` entry point loads to."""
