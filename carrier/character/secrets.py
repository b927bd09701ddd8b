"""Secrets in character files are references to environment variables, never values.

A secret is written as ``"$OPENAI_API_KEY"``, ``"${OPENAI_API_KEY}"`` or
``{"env": "OPENAI_API_KEY"}``; an empty string (or ``null``) means "not set here" (real ElizaOS
files ship ``"OPENAI_API_KEY": ""``).
Anything else is a literal secret and is refused, so a character file can be shared, committed
or stored without leaking a credential. :func:`find_secret_problems` walks the whole file for
them: credential-named keys at any depth (lists included), and any text shaped like a credential
or a URL carrying one, prose included. Messages name the path, never the value.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from carrier.errors import Problem
from carrier.safety.patterns import (
    find_secret_shapes,
    looks_like_secret,
    secret_query_name,
    url_credentials,
)

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
_SECRET_WORD_ENDINGS = (
    "key", "token", "secret", "password", "passwd", "passphrase", "passwords", "passphrases",
)  # fmt: skip
_SECRET_PLURALS = ("keys", "tokens", "secrets")
_PLURAL_QUALIFIERS = {
    "api", "access", "auth", "bearer", "bot", "client", "oauth", "private", "refresh", "secret",
    "session", "signing", "webhook",
}  # fmt: skip
"""A plural counts only after one of these (``apiKeys``, ``accessTokens``): lorebook ``keys``,
``secondary_keys`` or ``maxTokens`` name no credential."""
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
    ``TWITTER_PASSWORD``, ``apiKeys``, ...). Word-based, so ``maxTokens``, ``keywords`` or a
    lorebook entry's ``keys`` are not secrets."""
    words = [w.lower() for w in _WORDS.findall(key)]
    if any(w.endswith(_SECRET_WORD_ENDINGS) for w in words):
        return True
    return any(
        w in _SECRET_PLURALS and i > 0 and words[i - 1] in _PLURAL_QUALIFIERS
        for i, w in enumerate(words)
    )


def find_secret_problems(data: Mapping[str, Any]) -> list[Problem]:
    """Every literal secret in raw character data, as Problems whose path uses the data's own
    spelling (``clientConfig.discord.webhooks.0.token``). One walk over the whole tree, every
    key at every depth, mappings and lists alike; refused:

    - anything but a reference in ``settings.secrets.*`` and top-level ``secrets.*``;
    - a string that is not a reference under a credential-named key (:func:`is_secret_name`)
      anywhere, including the items of a list under one (``settings.apiKeys.0``);
    - any string, prose included (``system``, ``bio``, ``lore``, examples), that holds
      something shaped like a credential (vendor keys, PEM blocks, tokens, Discord webhook URLs;
      see :mod:`carrier.safety.patterns`) or a URL carrying credentials (a password in its user
      info, a ``key=``/``token=`` query value);
    - a key that is itself shaped like a credential.

    References (``"$NAME"``, ``"${NAME}"``, ``{"env": "NAME"}``) and empty values are fine.
    Messages name the path and the kind of credential, never the value.
    """
    return _SecretWalk().run(data)


class _Rule(Enum):
    SECRETS = "every value of this mapping must be a reference"
    SHAPED_KEY = "this key looks like a credential"


_Step = tuple[object, list[str], str | _Rule | None]
"""(value, path, rule): ``rule`` is the credential-named key the value sits under (a list's
items inherit it), a :class:`_Rule`, or None for an ordinary value."""


class _SecretWalk:
    """The walk behind :func:`find_secret_problems`: iterative and depth-first in file order (a
    deeply nested file cannot exhaust the stack), visiting each container once (YAML aliases may
    share a subtree many times, or nest one in itself)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: set[int] = set()

    def run(self, data: Mapping[str, Any]) -> list[Problem]:
        stack: list[_Step] = [(data, [], None)]
        while stack:
            stack.extend(reversed(self._visit(*stack.pop())))
        return self.problems

    def _visit(self, value: object, path: list[str], rule: str | _Rule | None) -> list[_Step]:
        if rule is _Rule.SHAPED_KEY:
            self.problems.append(Problem(".".join(path), _SHAPED_KEY))
            return []
        if rule is _Rule.SECRETS:
            self._secrets(value, path)
            return []
        if isinstance(value, str):
            if rule is not None and self._ref(rule, value, path):
                return []
            self._shape(value, path)
            return []
        if not isinstance(value, Mapping | list | tuple) or id(value) in self._seen:
            return []
        self._seen.add(id(value))
        if isinstance(value, list | tuple):
            return [(item, [*path, str(i)], rule) for i, item in enumerate(value)]
        if rule is not None and "env" in value:
            self._ref(rule, value, path)
            return []
        children: list[_Step] = []
        for raw_key, item in value.items():
            key = str(raw_key)
            kind = looks_like_secret(key)
            here = [*path, key if kind is None else f"<a key shaped like {_a(kind)}>"]
            if kind is not None:
                children.append((None, here, _Rule.SHAPED_KEY))
            if key == "secrets" and path in ([], ["settings"]):
                children.append((item, here, _Rule.SECRETS))
            elif is_secret_name(key) and isinstance(item, str | Mapping | list | tuple):
                children.append((item, here, key))
            else:
                children.append((item, here, None))
        return children

    def _secrets(self, secrets: object, path: list[str]) -> None:
        """``settings.secrets`` / ``secrets``: every value must be a reference, whatever its key."""
        if secrets is None:
            return
        if not isinstance(secrets, Mapping):
            self.problems.append(Problem(".".join(path), _expected_mapping(secrets)))
            return
        for key, value in secrets.items():
            problem = _check_one(str(key), value, [*path, str(key)])
            if problem:
                self.problems.append(problem)

    def _ref(self, name: str, value: object, path: list[str]) -> bool:
        """Check a value under a credential-named key; True when a problem was reported."""
        problem = _check_one(name, value, path)
        if problem:
            self.problems.append(problem)
        return problem is not None

    def _shape(self, text: str, path: list[str]) -> None:
        kind = _credential_in(text)
        if kind is None:
            return
        what = (
            f"a URL with {_URL_KINDS.get(kind, 'credentials')}"
            if kind.startswith("url ")
            else f"what looks like {_a(kind)}"
        )
        message = (
            f"holds {what}; a character file must not contain credentials (it is shared, "
            "stored and shown): remove "
            + ("the credentials from it" if kind.startswith("url ") else "it")
        )
        if path and path[0] not in _PROSE:
            message += (
                "; a value the persona needs goes in the environment or .env, referenced as "
                f'"${_suggest_env(path)}"'
            )
        self.problems.append(Problem(".".join(path), message))


_PROSE = {
    "system", "bio", "lore", "description", "messageExamples", "message_examples",
    "postExamples", "post_examples", "topics", "adjectives", "style", "knowledge", "lorebook",
    "templates", "card", "name", "username",
}  # fmt: skip
"""Top-level fields of text the persona speaks from: a credential there is removed, never
referenced."""
_SHAPED_KEY = (
    "this key looks like a credential; a character file must not contain credentials: "
    "rename the key and put the value in the environment or .env"
)
_URL_KINDS = {
    "url credentials": "a password in its user info",
    "url query credential": "a credential in its query (key=, token=, ...)",
}
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"'`]+")
_URL_TAIL = ".,;:!?)]}"


def _credential_in(text: str) -> str | None:
    """The kind of credential ``text`` holds somewhere, or None. URLs are checked one by one,
    so a URL with credentials in the middle of prose counts, and a reference in their place
    (``mongodb://app:${MONGO_PASSWORD}@db``, ``?key=$API_KEY``) does not."""
    if len(text) <= _CACHED_LENGTH:
        return _credential_in_short(text)
    return _scan(text)


_CACHED_LENGTH = 2048


@functools.lru_cache(maxsize=4096)
def _credential_in_short(text: str) -> str | None:
    # A stored character is parsed again whenever it is shown or started: its strings come back
    # the same, and the pattern scan is what costs (bounded: 4096 strings of at most 2 KiB).
    return _scan(text)


def _scan(text: str) -> str | None:
    for start, end, kind in find_secret_shapes(text):
        if not kind.startswith("url "):
            return kind
        secret = text[start:end]
        if kind == "url credentials":  # user:password
            secret = secret.partition(":")[2]
        if not _is_ref(unquote(secret)):
            return kind
    if "://" not in text:
        return None
    for match in _URL.finditer(text):
        found = _url_problem(match.group().rstrip(_URL_TAIL))
        if found is not None:
            return found
    return None


def _url_problem(url: str) -> str | None:
    if not url_credentials(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password and not _is_ref(unquote(parts.password)):
        return "url credentials"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if value and secret_query_name(name) and not _is_ref(value):
            return "url query credential"
    return None


def _is_ref(value: str) -> bool:
    return bool(_REF.match(value.strip()))


def _a(kind: str) -> str:
    return ("an " if kind[:1].lower() in "aeiou" else "a ") + kind


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
