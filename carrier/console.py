"""What platform adapters offer the web console, found through the ``carrier.console`` group.

Some figures only an adapter can give: how much of the platform's publishing quota an account
has used (Instagram's ``content_publishing_limit``), or a draft's media converted exactly as it
will be uploaded. The core never imports an adapter, so each registers a provider factory::

    [project.entry-points."carrier.console"]
    instagram = "clients.instagram.console:provider"

The factory is called as ``factory(manager)`` (the host's
:class:`~carrier.agents.AgentManager`) and returns a :class:`ConsoleProvider`; the API serves
what it offers (:mod:`carrier.api.routes.platforms`: ``GET /agents/{id}/quotas``,
``GET /jobs/{id}/preview/{n}``). No FastAPI here: a provider returns plain data, and raises
:class:`NoPreview` or :class:`PreviewRefused` with a message that says what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import entry_points
from typing import Any, Literal, Protocol, runtime_checkable

from carrier.errors import CarrierError

__all__ = [
    "GROUP",
    "ConsoleProvider",
    "NoPreview",
    "Preview",
    "PreviewRefused",
    "ProviderFactory",
    "Quota",
    "discover_console_providers",
]

log = logging.getLogger(__name__)

GROUP = "carrier.console"


@dataclass(frozen=True, slots=True)
class Quota:
    """How much of a platform's limit an agent's account has used."""

    client: str
    """The client it is about (``instagram``)."""
    what: str
    """What is counted (``posts``)."""
    used: int
    limit: int | None
    """``None`` when the platform names no limit."""
    window_s: int
    """The rolling window the count is over (86400: the last 24 h)."""
    source: Literal["platform", "carrier"]
    """``platform``: the platform's own figure; ``carrier``: what Carrier recorded publishing."""
    carrier_used: int | None = None
    """What Carrier recorded in the same window (beside a platform figure, which also counts
    posts made elsewhere)."""
    carrier_limit: int | None = None
    """Carrier's own limit for the account (``clientConfig.instagram.dailyLimit``)."""
    next_free_at: datetime | None = None
    """When the oldest post Carrier counted leaves the window (a slot frees)."""
    note: str | None = None
    """Anything the operator should know: why the platform's figure is not shown, and what to
    do about it."""


@dataclass(frozen=True, slots=True)
class Preview:
    """A draft's media file as it will be uploaded."""

    name: str
    """The source file's name (never its path on the server)."""
    data: bytes
    media_type: str
    width: int
    height: int
    changes: tuple[str, ...] = field(default_factory=tuple)
    """What the conversion did (``padded aspect ratio 2.67:1 to 1.91:1``); empty when the file
    goes as it is."""


class NoPreview(CarrierError):
    """The draft has no media there to show (no such file, a video, a file gone); the message
    says which and what to do. The API answers 404 ``no_media``."""


class PreviewRefused(CarrierError):
    """The platform would refuse the file (too small, a strip, corrupt): the message says why and
    what to do. The API answers 422 ``media_refused``."""


@runtime_checkable
class ConsoleProvider(Protocol):
    """One adapter's figures and previews for the console."""

    name: str
    """The client it belongs to (``instagram``)."""
    job_kinds: frozenset[str]
    """The job kinds whose drafts (``payload.draft``) it previews."""

    async def quota(self, agent_id: str) -> Quota | None:
        """The agent's account's usage of the platform's limit; ``None`` when the agent does not
        use this client. Never raises for a platform that cannot be asked: it says so in
        :attr:`Quota.note` and gives what Carrier recorded."""
        ...

    async def preview(self, agent_id: str, payload: Mapping[str, Any], index: int) -> Preview:
        """The ``index``-th media file of ``payload["draft"]`` converted as it will be uploaded.
        Raises :class:`NoPreview` or :class:`PreviewRefused`."""
        ...


ProviderFactory = Callable[[Any], ConsoleProvider]


def discover_console_providers() -> dict[str, ProviderFactory]:
    """Installed provider factories by name. One that fails to load is logged and skipped."""
    found: dict[str, ProviderFactory] = {}
    for ep in entry_points(group=GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # a broken adapter must not take the others down
            log.warning(
                "console provider %r could not be loaded (%s: %s); skipped",
                ep.name,
                type(exc).__name__,
                exc,
            )
    return found
