"""The pieces of a character: style, message examples, knowledge items, lore entries, settings.

Every model takes camelCase keys (ElizaOS spelling) or snake_case attribute names, keeps unknown
keys, and dumps back with ``model_dump(by_alias=True)`` to the ElizaOS spelling.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from carrier.character._describe import describe
from carrier.character.secrets import SecretValue

__all__ = [
    "BudgetPolicy",
    "CharacterSettings",
    "ElizaModel",
    "ExampleContent",
    "KnowledgeDirectory",
    "KnowledgeFile",
    "KnowledgeItem",
    "LoreEntry",
    "MessageExample",
    "RetentionPolicy",
    "Style",
    "TextList",
]


class ElizaModel(BaseModel):
    """Base of the character models: camelCase aliases, snake_case names accepted, extras kept.

    ``hide_input_in_errors`` keeps values (which may be secrets) out of validation messages.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        hide_input_in_errors=True,
        protected_namespaces=(),
    )


def _text_list(value: object) -> object:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return list(value)
    raise PydanticCustomError(
        "text_list", "expected a string or a list of strings, got {got}", {"got": describe(value)}
    )


TextList = Annotated[list[str], BeforeValidator(_text_list)]
"""A list of strings that may be written as one string (ElizaOS allows both: bio, lore, style)."""


class Style(ElizaModel):
    """How the persona writes: always (``all``), in chats (``chat``), in posts (``post``), and
    in public replies to comments (``comment``, Carrier's addition; chats' style otherwise)."""

    all: TextList = Field(default_factory=list)
    chat: TextList = Field(default_factory=list)
    post: TextList = Field(default_factory=list)
    comment: TextList = Field(default_factory=list)


class ExampleContent(ElizaModel):
    """What a message example says. ``action`` (v0.1.x) and ``actions`` (v1.x) are both kept."""

    text: str = ""
    action: str | None = None
    actions: TextList | None = None

    @property
    def all_actions(self) -> list[str]:
        """``actions`` plus ``action``, in order, without duplicates."""
        names = [*(self.actions or []), *([self.action] if self.action else [])]
        return list(dict.fromkeys(names))


class MessageExample(ElizaModel):
    """One message of an example conversation.

    Files name the speaker under ``user`` (ElizaOS v0.1.x) or ``name`` (v1.x); both become
    ``speaker``, and the file's key is remembered so a dump writes it back the same way.
    Speakers are the persona's name or placeholders such as ``{{user1}}`` / ``{{name1}}``.
    """

    speaker: str
    content: ExampleContent
    speaker_key: Literal["user", "name"] = Field(default="name", exclude=True, repr=False)
    """Which key the file used for the speaker."""

    @model_validator(mode="before")
    @classmethod
    def _find_speaker(cls, data: Any) -> Any:
        if isinstance(data, dict) and "speaker" not in data:
            for key in ("user", "name"):
                if key in data:
                    data = dict(data)
                    data["speaker"] = data.pop(key)
                    data["speaker_key"] = key
                    break
        return data

    @model_serializer(mode="wrap")
    def _dump_speaker(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if info.by_alias and "speaker" in out:
            out = {self.speaker_key: out.pop("speaker"), **out}
        return out

    @property
    def text(self) -> str:
        return self.content.text


class KnowledgeFile(ElizaModel):
    """A knowledge file, relative to the character file; ``shared`` with other agents if true."""

    path: str
    shared: bool = False


class KnowledgeDirectory(ElizaModel):
    """A directory of knowledge files, relative to the character file."""

    directory: str
    shared: bool = False


def _knowledge_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "text"
    if isinstance(value, KnowledgeFile):
        return "file"
    if isinstance(value, KnowledgeDirectory):
        return "directory"
    if isinstance(value, dict):
        if "path" in value:
            return "file"
        if "directory" in value:
            return "directory"
    return None


KnowledgeItem = Annotated[
    Annotated[str, Tag("text")]
    | Annotated[KnowledgeFile, Tag("file")]
    | Annotated[KnowledgeDirectory, Tag("directory")],
    Discriminator(
        _knowledge_kind,
        custom_error_type="knowledge_item",
        custom_error_message=(
            'expected a string, {"path": ..., "shared": ...} or {"directory": ..., "shared": ...}'
        ),
    ),
]
"""A knowledge entry: a fact as text, a file, or a directory of files."""


class LoreEntry(ElizaModel):
    """A keyword-triggered lore entry (a Character Card lorebook entry): when one of ``keys``
    appears in the conversation, ``content`` is added to the prompt."""

    keys: TextList = Field(default_factory=list)
    content: str
    name: str | None = None
    enabled: bool = True
    case_sensitive: bool = False
    constant: bool = False
    """Always inserted, whatever the keys."""
    priority: int | None = None
    """Higher first when the budget is short."""
    insertion_order: int | None = None
    """Lower is inserted earlier in the prompt."""

    def matches(self, text: str) -> bool:
        """Whether this entry is triggered by ``text`` (whole-word key match)."""
        if not self.enabled:
            return False
        if self.constant:
            return True
        flags = 0 if self.case_sensitive else re.IGNORECASE
        return any(
            re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text, flags) for key in self.keys if key
        )


class RetentionPolicy(ElizaModel):
    """``settings.retention``: how many days the agent keeps what it is told. A daily job deletes
    what is older (see :mod:`carrier.retention`); a key left out keeps that data for ever."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key would silently keep everything

    messages: int | None = Field(default=None, ge=1)
    """Days a conversation message (either side) is kept."""
    uploads: int | None = Field(default=None, ge=1)
    """Days an uploaded file (message attachments, media to post) is kept."""
    summarize_before_delete: bool = False
    """Summarize old messages into the room's summaries before deleting them."""


class BudgetPolicy(ElizaModel):
    """``settings.budget``: what the agent's model calls may cost, in US dollars as litellm
    prices them, per UTC day and calendar month, and what happens once one is spent (see
    :mod:`carrier.llm.budget`, which enforces it)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt limit would silently allow anything

    daily_usd: float | None = Field(default=None, gt=0)
    monthly_usd: float | None = Field(default=None, gt=0)
    policy: Literal["warn", "fallback", "offline", "pause"] = "warn"
    """``warn`` (log and audit), ``fallback`` (to ``fallbackModel``), ``offline`` (answer from
    the examples) or ``pause`` (stop the agent)."""
    fallback_model: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _fallback_named(self) -> BudgetPolicy:
        if self.policy == "fallback" and not self.fallback_model:
            raise ValueError("policy fallback needs fallbackModel (the cheaper model to use)")
        return self


class CharacterSettings(ElizaModel):
    """Free-form settings; the keys Carrier reads are typed, the rest are kept as they are."""

    model: str | None = None
    """litellm model string (``openai/gpt-4o-mini``) or a bare model name."""
    model_fallbacks: TextList | None = None
    """Models to try, in order, when ``model`` fails."""
    temperature: float | None = None
    max_tokens: int | None = None
    model_timeout: float | None = Field(default=None, gt=0, le=600)
    """Seconds one model call attempt may take (``modelTimeout``; else
    ``CARRIER_MODEL_TIMEOUT``)."""
    turn_deadline: float | None = Field(default=None, gt=0, le=3600)
    """Seconds a turn's model calls may take in all, retries and fallbacks included
    (``turnDeadline``; else ``CARRIER_TURN_DEADLINE``)."""
    secrets: dict[str, SecretValue] = Field(default_factory=dict)
    """Named secrets as environment references (ElizaOS v0.1.x place)."""
    voice: dict[str, Any] | None = None
    retention: RetentionPolicy | None = None
    """How long messages and uploads are kept (:class:`RetentionPolicy`); unset: for ever."""
    budget: BudgetPolicy | None = None
    """What the model may cost (:class:`BudgetPolicy`); unset: no limit but the global one."""
