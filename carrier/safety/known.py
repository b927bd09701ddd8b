"""Which values are secrets: learning them from the environment, the settings and each persona.

The redactor is configured at the edge (:func:`configure_redactor`, called by the commands'
logging set-up) with every credential the process can see, and learns more as personas are
built (:func:`learn_character`, from :mod:`carrier.assemble`) and tools registered. Nothing here
prints or logs a value: only counts leave.

Known secrets:

- environment variables named like credentials (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*_PASSWORD``, ``*_KEY``..., see :func:`carrier.character.secrets.is_secret_name`), which
  covers the provider keys, ``CARRIER_ADMIN_TOKEN`` and ``CARRIER_SECRET_KEY``;
- the credentials inside any URL in the environment or the settings (the password of
  ``CARRIER_MONGODB_URI``, user info and ``?api_key=`` in ``CARRIER_API_BASE``);
- every environment value a persona references (``settings.secrets``, ``clientConfig``, anywhere
  a ``"$NAME"`` or ``{"env": "NAME"}`` stands), and what its unset secrets fall back to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from carrier.safety.redact import Redactor, current_redactor, set_redactor

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = [
    "configure_redactor",
    "learn_character",
    "learn_environment",
    "learn_settings",
    "learn_value",
]

_REF = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


def _target(redactor: Redactor | None) -> Redactor | None:
    target = redactor if redactor is not None else current_redactor()
    return target if target.learns else None


def learn_environment(environ: Mapping[str, str], *, redactor: Redactor | None = None) -> int:
    """Learn the credential-named variables of ``environ`` and the credentials of the URLs in
    it; returns how many values were new. A redactor that does not learn is left alone."""
    from carrier.character.secrets import is_secret_name

    target = _target(redactor)
    if target is None:
        return 0
    values: list[str] = []
    taken = 0
    for name, value in list(environ.items()):
        if not value:
            continue
        if is_secret_name(name):
            values.append(value)
        if "://" in value:
            taken += target.add_url(value)
    return taken + target.add_many(values)


def learn_settings(settings: Settings, *, redactor: Redactor | None = None) -> int:
    """Learn the secrets of Carrier's own settings (they may come from ``.env`` rather than the
    environment): the admin token, the secret key, the MongoDB URI's password, the credentials
    of ``CARRIER_API_BASE``."""
    target = _target(redactor)
    if target is None:
        return 0
    taken = 0
    for secret in (settings.admin_token, settings.secret_key):
        if secret is not None:
            taken += target.add(secret.get_secret_value())
    if settings.mongodb_uri is not None:
        taken += target.add_url(settings.mongodb_uri.get_secret_value())
    taken += target.add_url(settings.api_base)
    return taken


def learn_character(
    character: Any, environ: Mapping[str, str], *, redactor: Redactor | None = None
) -> int:
    """Learn every environment value ``character`` references, wherever the reference stands
    (``settings.secrets``, ``clientConfig``, a voice setting...), and the values its unset
    secrets fall back to (the variable named like the secret)."""
    target = _target(redactor)
    if target is None:
        return 0
    values: list[str | None] = []
    refs = getattr(character, "secret_refs", None)
    if refs is not None:
        values += [ref.resolve(environ) for ref in refs().values()]
    dump = getattr(character, "model_dump", None)
    data = dump(by_alias=True) if dump is not None else character
    values += [environ.get(name) for name in _references(data)]
    return target.add_many(values)


def learn_value(value: str | None, *, redactor: Redactor | None = None) -> bool:
    """Learn one value (a tool's header secret) if the redactor learns."""
    target = _target(redactor)
    return target.add(value) if target is not None else False


def _references(node: Any, depth: int = 0) -> set[str]:
    """The environment variables named by references anywhere in character data."""
    if depth > 32:
        return set()
    if isinstance(node, str):
        match = _REF.match(node.strip())
        return {match.group(1) or match.group(2)} if match else set()
    if isinstance(node, Mapping):
        env = node.get("env")
        if set(node) == {"env"} and isinstance(env, str):
            return {env}
        found: set[str] = set()
        for value in node.values():
            found |= _references(value, depth + 1)
        return found
    if isinstance(node, list | tuple):
        found = set()
        for value in node:
            found |= _references(value, depth + 1)
        return found
    return set()


def configure_redactor(*, environ: Mapping[str, str], settings: Settings | None = None) -> Redactor:
    """Build the process-wide redactor from the environment (and the settings, which may hold
    values from ``.env``), install it, and return it. Values registered on the one it replaces
    (a minted local admin token) are kept."""
    previous = current_redactor()
    redactor = Redactor(learns=True)
    redactor.absorb(previous)
    learn_environment(environ, redactor=redactor)
    if settings is not None:
        learn_settings(settings, redactor=redactor)
    set_redactor(redactor)
    return redactor
