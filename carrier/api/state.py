"""What the routes share: the agent manager, settings, tokens and metrics (on ``app.state``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from carrier.agents import AgentManager, AgentStatus
from carrier.api._secrets import public_character, secret_status
from carrier.api.auth import TokenStore
from carrier.api.metrics import Metrics
from carrier.api.readiness import Startup
from carrier.api.schemas import AgentOut
from carrier.api.settings import ApiSettings
from carrier.character import parse_character
from carrier.errors import CharacterError
from carrier.safety.redact import shown
from carrier.settings import Settings

__all__ = ["ApiState", "agent_out", "api_state"]


@dataclass
class ApiState:
    manager: AgentManager
    settings: Settings
    api_settings: ApiSettings
    tokens: TokenStore
    metrics: Metrics
    startup: Startup = field(default_factory=Startup)
    """Whether the host finished starting (``/health/ready``)."""
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    """Turns still running after their streaming client went away (kept until they finish)."""

    def keep(self, task: asyncio.Task[Any]) -> None:
        self.background.add(task)
        task.add_done_callback(self.background.discard)


def api_state(request: Request) -> ApiState:
    """Dependency: the shared state."""
    state: ApiState = request.app.state.api
    return state


def agent_out(status: AgentStatus, state: ApiState) -> AgentOut:
    """An agent as the API shows it: secret references left out, their status shown instead;
    the model's name and notes with any endpoint's credentials masked (``CARRIER_API_BASE`` may
    carry a password or a key), as are the reasons clients were skipped. ``status`` is the
    desired state (what every process applies), not what runs here (``running``)."""
    record = status.record
    try:
        secrets = secret_status(parse_character(record.character), state.manager.environ)
    except CharacterError:
        secrets = {}
    return AgentOut(
        id=record.id,
        name=record.name,
        status="running" if status.should_run else "stopped",
        running=status.running,
        revision=status.revision,
        desired_by=status.desired.actor if status.desired is not None else None,
        desired_at=status.desired.updated_at if status.desired is not None else None,
        placement=status.desired.placement if status.desired is not None else None,
        model=shown(status.model),
        model_note=shown(status.model_note),
        offline=status.offline,
        clients=status.clients,
        skipped_clients={name: shown(why) or "" for name, why in status.skipped.items()},
        secrets=secrets,
        character=public_character(record.character),
        created_at=record.created_at,
        updated_at=record.updated_at,
    )
