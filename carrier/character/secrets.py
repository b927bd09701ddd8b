"""Secrets in character files are references to environment variables, never values.

A secret is written as ``"$OPENAI_API_KEY"``, ``"${OPENAI_API_KEY}"`` or
``{"env": "OPENAI_API_KEY"}``; an empty string (or ``null``) means "not set here" (real ElizaOS
files ship ``"OPENAI_API_KEY": ""``).
Anything else is a literal secret and is refused, so a character file can be shared, committed
or stored without leaking a credential. Messages name the key, never the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from carrier.errors import Problem

__all__ = [
    "SecretRef",
    "SecretValue",
    "find_secret_problems",
    "is_secret_name",
    "parse_secret_ref",
]

SecretValue = str | dict[str, str] | None
"""How a secret is written in a character file (see the module docstring)."""

_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REF = re.compile(rf"^\$(?:\{{({_ENV_NAME})\}}|({_ENV_NAME}))$")
_ENV_RE = re.compile(rf"^{_ENV_NAME}$")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_WORD_ENDINGS = ("key", "token", "secret", "password", "passwd", "passphrase")
_FORMS = '"$NAME", "${NAME}", {"env": "NAME"} or "" (unset)'


@dataclass(frozen=True, slots=True)
class SecretRef:
    """A named secret and the environment variable that holds it (``env=None``: unset here)."""

    name: str
    env: str | None

    def resolve(self, environ: Mapping[str, str]) -> str | None:
        """The secret's value from ``environ``; an unset reference falls back to the variable
        named like the secret itself (ElizaOS looks settings up in the environment the same way).
        Empty values count as unset."""
        return environ.get(self.env or self.name) or None


class LiteralSecretError(ValueError):
    """A secret value is not an environment reference. The message never holds the value.

    ``literal`` is true for a plain string (a pasted credential), false for a malformed reference.
    """

    def __init__(self, message: str, *, literal: bool = False) -> None:
        super().__init__(message)
        self.literal = literal


def parse_secret_ref(name: str, value: object) -> SecretRef:
    """Parse one secret value; raise :class:`LiteralSecretError` if it is not a reference."""
    if value is None or value == "":
        return SecretRef(name, None)
    if isinstance(value, str):
        match = _REF.match(value.strip())
        if match:
            return SecretRef(name, match.group(1) or match.group(2))
        raise LiteralSecretError("a literal secret is not allowed", literal=True)
    if isinstance(value, Mapping):
        env = value.get("env")
        if set(value) == {"env"} and isinstance(env, str) and _ENV_RE.match(env):
            return SecretRef(name, env)
        raise LiteralSecretError('expected {"env": "NAME"} naming an environment variable')
    raise LiteralSecretError(f"expected an environment reference ({_FORMS}), got a {_kind(value)}")


def is_secret_name(key: str) -> bool:
    """Whether a settings key looks like it holds a credential (``OPENAI_API_KEY``, ``apiToken``,
    ``TWITTER_PASSWORD``, ...). Word-based, so ``maxTokens`` or ``keywords`` are not secrets."""
    words = [w.lower() for w in _WORDS.findall(key)]
    return any(w.endswith(_SECRET_WORD_ENDINGS) for w in words)


def find_secret_problems(data: Mapping[str, Any]) -> list[Problem]:
    """Every literal secret in raw character data (camelCase or snake_case keys), as Problems
    whose path uses the data's own spelling. Checked: ``settings.secrets.*``, top-level
    ``secrets.*``, secret-looking keys anywhere under ``settings`` and ``clientConfig``."""
    problems: list[Problem] = []
    settings = data.get("settings")
    if isinstance(settings, Mapping):
        secrets = settings.get("secrets")
        if isinstance(secrets, Mapping):
            problems += _check_all(secrets, ["settings", "secrets"])
        elif secrets is not None:
            problems.append(Problem("settings.secrets", _expected_mapping(secrets)))
        problems += _check_named(settings, ["settings"], skip=("secrets", "voice"))
    secrets = data.get("secrets")
    if isinstance(secrets, Mapping):
        problems += _check_all(secrets, ["secrets"])
    for key in ("clientConfig", "client_config"):
        config = data.get(key)
        if isinstance(config, Mapping):
            problems += _check_named(config, [key], skip=())
    return problems


def _check_all(secrets: Mapping[Any, Any], path: list[str]) -> list[Problem]:
    problems = []
    for key, value in secrets.items():
        problem = _check_one(str(key), value, [*path, str(key)])
        if problem:
            problems.append(problem)
    return problems


def _check_named(
    mapping: Mapping[Any, Any], path: list[str], *, skip: Sequence[str]
) -> list[Problem]:
    """Check secret-looking keys with string values, walking nested objects."""
    problems: list[Problem] = []
    for key, value in mapping.items():
        key = str(key)
        if key in skip:
            continue
        here = [*path, key]
        if isinstance(value, Mapping):
            if is_secret_name(key) and "env" in value:
                problem = _check_one(key, value, here)
                problems += [problem] if problem else []
            else:
                problems += _check_named(value, here, skip=())
        elif isinstance(value, str) and is_secret_name(key):
            problem = _check_one(key, value, here)
            problems += [problem] if problem else []
    return problems


def _check_one(name: str, value: object, path: list[str]) -> Problem | None:
    try:
        parse_secret_ref(name, value)
    except LiteralSecretError as exc:
        where = ".".join(path)
        if not exc.literal:
            return Problem(where, str(exc))
        env = _suggest_env(path)
        return Problem(
            where,
            "a literal secret is not allowed in a character file; put the value in the "
            f'environment or .env and write "${env}" here',
        )
    return None


def _suggest_env(path: list[str]) -> str:
    """An environment variable name for the secret at ``path`` (``clientConfig.discord.botToken``
    → ``DISCORD_BOT_TOKEN``; ``settings.secrets.OPENAI_API_KEY`` → ``OPENAI_API_KEY``)."""
    if path[0] in ("clientConfig", "client_config"):
        parts = path[1:]
    else:
        parts = [p for p in path if p not in ("settings", "secrets")]
    words: list[str] = []
    for part in parts:
        words += [w.upper() for w in _WORDS.findall(part)]
    deduped = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]]
    return "_".join(deduped) or "SECRET"


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def _expected_mapping(value: object) -> str:
    return f"expected an object of named secrets, got a {_kind(value)}"
