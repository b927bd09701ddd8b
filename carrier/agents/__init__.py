"""Agents: many in one process, each created, edited, started and stopped on its own, with the
store (:mod:`carrier.fleet`) as the truth every process follows. See :mod:`carrier.agents.manager`."""

from carrier.agents.client_config import split_client_id, validate_client_config
from carrier.agents.errors import AgentExists, AgentNotFound, AgentNotRunning, ClientConfigError
from carrier.agents.manager import AgentManager, ModelFactory
from carrier.agents.status import AgentStatus, LoadReport

__all__ = [
    "AgentExists",
    "AgentManager",
    "AgentNotFound",
    "AgentNotRunning",
    "AgentStatus",
    "ClientConfigError",
    "LoadReport",
    "ModelFactory",
    "split_client_id",
    "validate_client_config",
]
