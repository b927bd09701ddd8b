"""Warnings for character files that load but will not do what their author meant.

A file can be valid and still bite: a client Carrier does not have, a ``modelProvider`` it does
not know, a knowledge path that is missing (found only when the agent starts), ElizaOS settings
Carrier never acts on, or a YAML value cut short by a ``#`` read as a comment. These are
warnings, not problems: the file still loads and runs. ``carrier validate`` prints them, and
``carrier validate --strict`` fails on them.

Use :func:`check_paths` for files and folders (problems and warnings per file),
:func:`lint_file` for one file, :func:`lint_character` for a character already loaded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, NamedTuple

from carrier.character._yamlcuts import find_cuts
from carrier.character.loader import expand_paths, load_character
from carrier.character.model import Character
from carrier.character.secrets import is_secret_name
from carrier.clients import GROUP as CLIENTS_GROUP
from carrier.errors import CharacterError, Problem

__all__ = [
    "CharacterWarning",
    "FileReport",
    "WarningKind",
    "check_paths",
    "installed_clients",
    "lint_character",
    "lint_file",
    "lint_yaml",
]

WarningKind = Literal["unknown-client", "unknown-provider", "knowledge-path", "ignored", "cut"]
"""What a warning is about: a client name, the ``modelProvider``, a knowledge path, a setting
Carrier does not act on, or a YAML value cut by a comment."""

ELIZA_CLIENTS = frozenset(
    {
        "alexa", "auto", "deva", "direct", "discord", "farcaster", "github", "instagram", "lens",
        "simsai", "slack", "telegram", "twitter", "whatsapp", "xmtp",
    }
)  # fmt: skip
"""Client names ElizaOS v0.1.x files use (``clients: [...]``)."""

# ElizaOS keys Carrier keeps but never acts on, with what to do instead.
_IGNORED_TOP: dict[str, str] = {
    "plugins": "Carrier does not load ElizaOS plugins",
    "twitterProfile": "Carrier has no Twitter client",
    "extends": "Carrier does not merge characters; copy the fields you need into this file",
    "imageModelProvider": "Carrier does not generate images",
    "imageVisionModelProvider": "Carrier does not describe images with a separate model",
    "modelEndpointOverride": "set CARRIER_API_BASE to the model server's URL instead",
}
_IGNORED_SETTINGS: dict[str, str] = {
    "voice": "Carrier has no voice (text-to-speech) output",
    "ragKnowledge": "Carrier always embeds knowledge and recalls it by meaning; list it under "
    "`knowledge`",
    "transcription": "Carrier does not transcribe audio",
    "imageSettings": "Carrier does not generate images",
    "embeddingModel": "Carrier embeds with its own model (all-MiniLM-L6-v2)",
}
# Keys Carrier writes itself on `carrier import-card`, kept so the card can be exported again.
_CARD_TOP = frozenset({"card"})
_CARD_SETTINGS = frozenset({"postHistoryInstructions"})
# settings keys read outside the typed fields (carrier/assemble.py, Character.model_settings).
_READ_SETTINGS = frozenset({"modelConfig", "model_config", "ignore", "memoryTools"})
_READ_MODEL_CONFIG = frozenset({"temperature", "maxOutputTokens", "maxTokens", "max_tokens"})
_PLUGIN = re.compile(r"^@elizaos(?:-plugins)?/(?:plugin|client)-([a-z0-9-]+)$")


@dataclass(frozen=True, slots=True)
class CharacterWarning:
    """Something in a character that loads but will not act as written: where and why."""

    path: str
    """Dotted field path in the file, e.g. ``clients.0``; ``""`` for the file."""
    message: str
    """What Carrier will do with it, and how to fix it."""
    kind: WarningKind

    def __str__(self) -> str:
        return f"{self.path or '<file>'}: {self.message}"


class FileReport(NamedTuple):
    """What validating one file found: problems (it does not load) and warnings."""

    problems: list[Problem]
    warnings: list[CharacterWarning]


def check_paths(
    paths: Iterable[str | Path],
    *,
    clients: Collection[str] | None = None,
    problems_of: Callable[[Character], list[Problem]] | None = None,
) -> dict[str, FileReport]:
    """Check character files (folders expand to their character files, searched recursively):
    file name → its problems and warnings. A missing path or a folder without character files is
    reported as a problem under its own name. ``clients`` are the client names to accept (by
    default, the ones installed under the ``carrier.clients`` entry-point group);
    ``problems_of`` finds more problems in a character that loads (``carrier validate``: its
    client sections against the installed clients' settings)."""
    known = installed_clients() if clients is None else clients
    results: dict[str, FileReport] = {}
    for path, problem in expand_paths(paths):
        if problem is not None:
            results[str(path)] = FileReport([problem], [])
            continue
        warnings = _source_warnings(path)
        try:
            character = load_character(path)
        except CharacterError as exc:
            results[str(path)] = FileReport(exc.problems, warnings)
        else:
            more = problems_of(character) if problems_of is not None else []
            results[str(path)] = FileReport(
                more, lint_character(character, clients=known) + warnings
            )
    return results


def lint_file(
    path: str | Path, *, clients: Collection[str] | None = None
) -> list[CharacterWarning]:
    """The warnings for one character file; raises :class:`~carrier.errors.CharacterError` when
    the file does not load at all."""
    warnings = _source_warnings(Path(path))
    return lint_character(load_character(path), clients=clients) + warnings


def lint_yaml(text: str) -> list[CharacterWarning]:
    """Warnings only the YAML source can show: values cut short by a ``#`` read as a comment
    (see :mod:`carrier.character._yamlcuts` for which ones are reported)."""
    warnings = []
    for cut in find_cuts(text):
        comment = _clip(cut.comment, 30)
        if cut.kept:
            what = f"the value ends at {_clip_end(cut.kept, 30)!r}"
        else:
            what = "the value is empty"
        warnings.append(
            CharacterWarning(
                cut.path,
                f"line {cut.line}: YAML reads {comment!r} as a comment, so {what}; quote the whole "
                "value (or move a real comment to its own line)",
                "cut",
            )
        )
    return warnings


def lint_character(
    character: Character, *, clients: Collection[str] | None = None
) -> list[CharacterWarning]:
    """The warnings for a loaded character: unknown clients and ``modelProvider``, knowledge
    paths that do not exist (resolved as at run time: relative to the character file), and
    ElizaOS settings Carrier does not act on. ``clients`` as in :func:`check_paths`."""
    known = sorted(installed_clients() if clients is None else {c.lower() for c in clients})
    warnings = _client_warnings(character, known)
    warnings += _provider_warnings(character)
    warnings += _ignored_warnings(character, known)
    warnings += _knowledge_warnings(character)
    return warnings


def installed_clients() -> set[str]:
    """The client names registered under the ``carrier.clients`` entry-point group (lowercase),
    as the runtime finds them; nothing is imported."""
    return {ep.name.lower() for ep in entry_points(group=CLIENTS_GROUP)}


# -- the checks ------------------------------------------------------------------------------------
def _client_warnings(character: Character, known: list[str]) -> list[CharacterWarning]:
    warnings = []
    has = ", ".join(known) or "none installed"
    for i, name in enumerate(character.clients):
        lowered = str(name).lower()
        if lowered in known:
            continue
        if lowered in ELIZA_CLIENTS:
            message = f"{name!r} is not a client Carrier has (it has: {has}); it will be ignored"
        else:
            close = _close(lowered, known)
            guess = f"did you mean {close!r}? " if close else ""
            message = (
                f"{name!r} is not a known client name (Carrier has: {has}); "
                f"{guess}it will be ignored"
            )
        warnings.append(CharacterWarning(f"clients.{i}", message, "unknown-client"))
    for name in character.client_config:
        if name in known:
            continue
        if name.lower() in known:  # the runtime looks options up by the lowercase client name
            message = f"write {name.lower()!r} in lowercase; as written, these options are ignored"
        else:
            message = (
                f"{name!r} is not a client Carrier has (it has: {has}); these options are ignored"
            )
        warnings.append(CharacterWarning(f"clientConfig.{name}", message, "unknown-client"))
    return warnings


def _provider_warnings(character: Character) -> list[CharacterWarning]:
    provider = character.model_provider
    if not provider or not provider.strip() or _known_provider(provider):
        return []
    from carrier.llm.models import PROVIDER_MODELS  # lazily: carrier.llm is heavy to import

    known = sorted(PROVIDER_MODELS)
    close = _close(provider, known)
    guess = f" (did you mean {close!r}?)" if close else ""
    message = (
        f"{provider!r} is not a model provider Carrier knows{guess}, so "
        "it is ignored: the model comes from settings.model (a litellm model string such as "
        "openai/gpt-4o-mini), else CARRIER_MODEL, else the offline mode. Known providers: "
        + ", ".join(known)
    )
    return [CharacterWarning("modelProvider", message, "unknown-provider")]


def _known_provider(provider: str) -> bool:
    # Known means resolve_model maps it to a model, exactly as the runtime does.
    from carrier.llm.models import resolve_model

    return resolve_model(model=None, model_provider=provider, default=None) is not None


def _knowledge_warnings(character: Character) -> list[CharacterWarning]:
    if all(isinstance(item, str) for item in character.knowledge):
        return []
    # The runtime's own resolution (relative to the character file), imported lazily: the
    # knowledge package imports the character package, and is heavy.
    from carrier.knowledge.sources import character_sources

    try:
        character_sources(character)
    except CharacterError as exc:
        return [CharacterWarning(p.path, p.message, "knowledge-path") for p in exc.problems]
    return []


def _ignored_warnings(character: Character, known_clients: list[str]) -> list[CharacterWarning]:
    warnings = []
    if character.plugins:
        warnings.append(
            CharacterWarning(
                "plugins", _plugins_message(character.plugins, known_clients), "ignored"
            )
        )
    for key, value in (character.model_extra or {}).items():
        if key in _CARD_TOP or _empty(value):
            continue
        why = _IGNORED_TOP.get(key, "Carrier does not read this key")
        warnings.append(CharacterWarning(key, f"{why}; it is kept but ignored", "ignored"))
    settings = character.settings
    if not _empty(settings.voice):
        why = _IGNORED_SETTINGS["voice"]
        warnings.append(CharacterWarning("settings.voice", f"{why}; it is ignored", "ignored"))
    for key, value in (settings.model_extra or {}).items():
        path = f"settings.{key}"
        if key in _CARD_SETTINGS or is_secret_name(key) or _empty(value):
            continue
        if key in ("modelConfig", "model_config") and isinstance(value, Mapping):
            warnings += _model_config_warnings(path, value)
        elif key not in _READ_SETTINGS:
            why = _IGNORED_SETTINGS.get(key, "Carrier does not read this setting")
            warnings.append(CharacterWarning(path, f"{why}; it is ignored", "ignored"))
    return warnings


def _model_config_warnings(path: str, config: Mapping[str, Any]) -> list[CharacterWarning]:
    return [
        CharacterWarning(
            f"{path}.{key}",
            "Carrier reads only temperature and maxOutputTokens here; it is ignored",
            "ignored",
        )
        for key in config
        if key not in _READ_MODEL_CONFIG
    ]


def _plugins_message(plugins: list[str], known_clients: list[str]) -> str:
    message = f"{_IGNORED_TOP['plugins']} ({', '.join(plugins)}); they are ignored"
    hints = []
    for plugin in plugins:
        match = _PLUGIN.match(plugin.strip().lower())
        if match is None:
            continue
        name = match.group(1)
        if name in known_clients:
            hints.append(f"list {name!r} under `clients`")
        elif _known_provider(name):
            hints.append(f"set `modelProvider: {name}`")
    if hints:
        message += " (Carrier's equivalent: " + " and ".join(dict.fromkeys(hints)) + ")"
    return message


# -- helpers ---------------------------------------------------------------------------------------
def _source_warnings(path: Path) -> list[CharacterWarning]:
    if path.suffix.lower() not in (".yaml", ".yml"):
        return []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return []  # the loader reports why the file cannot be read
    return lint_yaml(text)


def _empty(value: object) -> bool:
    return value is None or value == "" or (isinstance(value, list | dict) and not value)


def _close(name: str, known: list[str]) -> str | None:
    close = difflib.get_close_matches(name.strip().lower(), known, n=1)
    return close[0] if close else None


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clip_end(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]
