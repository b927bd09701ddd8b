"""Client configurations: ids (``discord``, ``<agent_id>:discord``) and validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from carrier.agents.errors import ClientConfigError
from carrier.character.secrets import find_secret_problems
from carrier.clients import ClientFactory
from carrier.errors import Problem

__all__ = ["split_client_id", "validate_client_config"]


def split_client_id(client_id: str) -> tuple[str | None, str]:
    """``"discord"`` → ``(None, "discord")``; ``"<agent_id>:discord"`` → ``(agent_id, "discord")``."""
    agent_id, _, name = client_id.rpartition(":")
    return (agent_id or None), name.lower()


def validate_client_config(
    client_id: str, name: str, config: Mapping[str, Any], factory: ClientFactory | None
) -> None:
    """Refuse literal secrets, and check the config against the client's ``config_model`` (a
    pydantic model on the factory) when it has one; raises :class:`ClientConfigError`."""
    problems = [
        Problem(p.path.removeprefix(f"clientConfig.{name}").lstrip("."), p.message)
        for p in find_secret_problems({"clientConfig": {name: dict(config)}})
    ]
    model = getattr(factory, "config_model", None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        try:
            model.model_validate(dict(config))
        except ValidationError as exc:
            for err in exc.errors(include_url=False, include_input=False):
                path = ".".join(str(part) for part in err["loc"])
                problems.append(Problem(path, err["msg"]))
    if problems:
        raise ClientConfigError(client_id, problems)
