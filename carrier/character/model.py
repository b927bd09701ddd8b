"""The Character model: one persona, from ElizaOS v0.1.x / v1.x files, YAML or a Character Card.

Attributes are snake_case, the file keys camelCase (``messageExamples``, ``modelProvider``,
``clientConfig``); both spellings are accepted. Unknown keys are kept, so
``Character.model_dump(by_alias=True, exclude_none=True)`` gives back what was loaded.
Build characters from files with :func:`carrier.character.load_character` (errors name the file
and every field path); ``Character.model_validate(data)`` works for trusted data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from carrier.character.parts import (
    CharacterSettings,
    ElizaModel,
    KnowledgeItem,
    LoreEntry,
    MessageExample,
    Style,
    TextList,
)
from carrier.character.secrets import (
    LiteralSecretError,
    SecretRef,
    SecretValue,
    find_secret_problems,
    is_secret_name,
    parse_secret_ref,
)
from carrier.types import stable_id

__all__ = ["Character", "ModelSettings"]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The model choices of a character, gathered from ``settings`` (``None`` when unset)."""

    model: str | None = None
    model_fallbacks: list[str] = field(default_factory=list)
    """Empty when unset."""
    temperature: float | None = None
    max_tokens: int | None = None
    model_provider: str | None = None
    """The ElizaOS ``modelProvider`` (``openai``, ``anthropic``, ...), when given."""
    timeout: float | None = None
    """Seconds one attempt may take (``settings.modelTimeout``)."""
    deadline: float | None = None
    """Seconds a turn's model calls may take in all (``settings.turnDeadline``)."""


class Character(ElizaModel):
    """A persona, ElizaOS-compatible. See the module docstring for how to load one."""

    name: str
    """The persona's name, as it speaks in examples and is addressed."""
    id: str | None = None
    """A fixed agent id; when unset, :attr:`agent_id` derives one from the name."""
    username: str | None = None
    description: str | None = None
    system: str | None = None
    """System prompt override."""
    model_provider: str | None = None
    clients: list[str] = Field(default_factory=list)
    """Platforms to run on (``discord``, ``instagram``, ...)."""
    plugins: list[str] = Field(default_factory=list)
    settings: CharacterSettings = Field(default_factory=CharacterSettings)
    secrets: dict[str, SecretValue] = Field(default_factory=dict)
    """Named secrets as environment references (ElizaOS v1.x place)."""
    client_config: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-client options, e.g. ``clientConfig.discord.allowedChannels``."""
    bio: TextList = Field(default_factory=list)
    lore: TextList = Field(default_factory=list)
    knowledge: list[KnowledgeItem] = Field(default_factory=list)
    """Facts as text, or files / directories relative to the character file."""
    message_examples: list[list[MessageExample]] = Field(default_factory=list)
    """Example conversations; the offline provider answers from these."""
    post_examples: TextList = Field(default_factory=list)
    topics: TextList = Field(default_factory=list)
    adjectives: TextList = Field(default_factory=list)
    style: Style = Field(default_factory=Style)
    templates: dict[str, str] = Field(default_factory=dict)
    """Prompt templates overriding the built-in ones, by template name."""
    lorebook: list[LoreEntry] = Field(default_factory=list)

    _source: str | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise PydanticCustomError("blank_name", "expected a non-empty name")
        return value

    @model_validator(mode="after")
    def _no_literal_secrets(self) -> Self:
        # The loader reports these (with all other problems) from the raw file; this guards
        # characters built directly in code or from API payloads.
        problems = find_secret_problems(self.model_dump(by_alias=True))
        if problems:
            detail = "; ".join(str(p) for p in problems)
            raise PydanticCustomError("literal_secret", "{detail}", {"detail": detail})
        return self

    def __eq__(self, other: object) -> bool:
        # Where a character was loaded from is not part of what it is.
        if not isinstance(other, Character):
            return NotImplemented
        return (
            self.__dict__ == other.__dict__ and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def source(self) -> str | None:
        """The file this character was loaded from, if any."""
        return self._source

    @property
    def agent_id(self) -> str:
        """``id`` when set, else an id derived from the name (stable across restarts)."""
        return self.id or stable_id("agent", self.name)

    @property
    def model_settings(self) -> ModelSettings:
        """Model, fallbacks, temperature, max tokens, timeout and deadline from ``settings``
        (ElizaOS v1 ``settings.modelConfig.temperature`` / ``maxOutputTokens`` are read too)."""
        s = self.settings
        extra = s.model_extra or {}
        config = extra.get("modelConfig") or extra.get("model_config") or {}
        config = config if isinstance(config, Mapping) else {}
        temperature = s.temperature if s.temperature is not None else _number(config, "temperature")
        max_tokens = s.max_tokens
        if max_tokens is None:
            max_tokens = _integer(config, "maxOutputTokens", "maxTokens", "max_tokens")
        return ModelSettings(
            model=s.model or None,
            model_fallbacks=list(s.model_fallbacks or []),
            temperature=temperature,
            max_tokens=max_tokens,
            model_provider=self.model_provider or None,
            timeout=s.model_timeout,
            deadline=s.turn_deadline,
        )

    def secret_refs(self) -> dict[str, SecretRef]:
        """Every named secret: secret-looking keys directly in ``settings``, then
        ``settings.secrets``, then top-level ``secrets`` (later ones win)."""
        refs: dict[str, SecretRef] = {}
        sources: list[Mapping[str, Any]] = [
            {k: v for k, v in (self.settings.model_extra or {}).items() if is_secret_name(k)},
            self.settings.secrets,
            self.secrets,
        ]
        for source in sources:
            for name, value in source.items():
                try:
                    refs[name] = parse_secret_ref(name, value)
                except LiteralSecretError:
                    continue
        return refs

    def resolve_secret(self, name: str, environ: Mapping[str, str]) -> str | None:
        """The value of secret ``name`` from ``environ``: through its reference when the
        character has one, else the variable of the same name. ``None`` when unset or empty."""
        ref = self.secret_refs().get(name) or SecretRef(name, None)
        return ref.resolve(environ)


def _number(config: Mapping[str, Any], key: str) -> float | None:
    value = config.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _integer(config: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
