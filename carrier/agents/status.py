"""What the manager says of an agent (:class:`AgentStatus`), and what it keeps of one running."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from carrier.clients import Client
from carrier.fleet.model import Desired, DesiredState
from carrier.runtime import AgentRuntime
from carrier.types import AgentRecord

if TYPE_CHECKING:
    from carrier.agents.imports import ImportOutcome

__all__ = ["AgentStatus", "LoadReport", "Running"]


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
    desired: Desired | None = None
    """Whether it should run (every process applies it); None: never started, so stopped."""
    revision: int | None = None
    """The character's head revision in the store."""

    @property
    def should_run(self) -> bool:
        return self.desired is not None and self.desired.state == DesiredState.RUNNING


@dataclass
class LoadReport:
    """What :func:`carrier.agents.imports.load_files` did with one file."""

    path: str
    error: str | None = None
    status: AgentStatus | None = None
    outcome: ImportOutcome | None = None


@dataclass
class Running:
    runtime: AgentRuntime
    model: str
    model_note: str | None
    offline: bool
    clients: dict[str, Client] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    interrupted: int = 0
    revision: int = 0
    """The revision of the character it runs."""
