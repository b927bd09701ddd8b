"""The errors of the agent manager, each one a user can act on."""

from __future__ import annotations

from carrier.errors import Problem, UserError

__all__ = [
    "AgentExists",
    "AgentNotFound",
    "AgentNotRunning",
    "ClientConfigError",
    "RevisionNotFound",
]


class AgentNotFound(UserError):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"no agent with id {agent_id!r}; list the agents to see their ids")


class AgentExists(UserError):
    def __init__(self, agent_id: str, name: str) -> None:
        self.agent_id = agent_id
        super().__init__(
            f"an agent with id {agent_id!r} ({name}) exists already; update it instead, or give "
            "the new character another name or an explicit `id`"
        )


class AgentNotRunning(UserError):
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"agent {agent_id!r} is not running; start it first")


class ClientConfigError(UserError):
    """A client configuration is invalid; ``problems`` name each field path."""

    def __init__(self, client_id: str, problems: list[Problem]) -> None:
        self.client_id = client_id
        self.problems = problems
        detail = "; ".join(str(p) for p in problems)
        super().__init__(f"invalid configuration for client {client_id!r}: {detail}")


class RevisionNotFound(UserError):
    def __init__(self, agent_id: str, number: int) -> None:
        self.agent_id, self.number = agent_id, number
        super().__init__(
            f"agent {agent_id!r} has no revision {number}; list its revisions to see their numbers"
        )
