"""A client's settings checked against what its client declares.

A client factory may carry ``config_model``, a pydantic model of its settings (Discord's
``DiscordConfig``, Instagram's ``InstagramConfig``). The same check serves every way settings
arrive: a character's ``clientConfig.<name>`` saved through the API or the console, imported from
a file by ``carrier run``, brought back by a revert, or read by ``carrier validate``; and a
client configuration stored through ``POST /clients/{id}/config``. Literal secrets are refused
there too (name an environment variable instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from carrier.errors import Problem

__all__ = ["character_config_problems", "config_problems"]


def config_problems(name: str, config: Mapping[str, Any], factory: object) -> list[Problem]:
    """What is wrong with settings ``config`` of client ``name``: literal secrets, and what the
    factory's ``config_model`` refuses (when it has one). Paths are within the settings
    (``maxMessageLength``); empty when they fit."""
    from carrier.character.secrets import find_secret_problems  # carrier.character imports us

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
    return problems


def character_config_problems(character: Any, factories: Mapping[str, object]) -> list[Problem]:
    """Each ``clientConfig.<name>`` of a character whose client is installed (in
    ``factories``), checked by :func:`config_problems`: the problems at their full paths
    (``clientConfig.discord.maxMessageLength``). Sections of clients not installed here are
    left alone (``carrier validate`` warns of those)."""
    problems: list[Problem] = []
    for name, config in character.client_config.items():
        factory = factories.get(name)
        if factory is None:
            continue
        base = f"clientConfig.{name}"
        problems += [
            Problem(f"{base}.{p.path}" if p.path else base, p.message)
            for p in config_problems(name, config, factory)
        ]
    return problems
