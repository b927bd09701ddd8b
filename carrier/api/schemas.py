"""Request and response bodies of the agent API (they make the OpenAPI schema)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from carrier.character.lint import WarningKind
from carrier.types import MemoryKind, MemoryStatus

__all__ = [
    "AgentHealth",
    "AgentOut",
    "CharacterCheckOut",
    "ClientConfigOut",
    "ClientHealth",
    "ClientKindOut",
    "ErrorBody",
    "ForgetOut",
    "HealthOut",
    "LiveOut",
    "MediaOut",
    "MemoryOut",
    "MemoryPage",
    "MessageIn",
    "MessageOut",
    "ProblemOut",
    "ReadyOut",
    "TokenCreated",
    "TokenIn",
    "TokenOut",
    "WarningOut",
]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
"""Agent, entity and room ids: UUIDs, or any short name of letters, digits, ``_ . -``."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$")


def _iso_only(value: Any) -> Any:
    if isinstance(value, str) and not _ISO.match(value.strip()):
        raise ValueError("expected an ISO 8601 date-time, e.g. 2026-05-01T09:30:00Z")
    return value


IsoDatetime = Annotated[datetime, BeforeValidator(_iso_only)]
"""A date-time given as ISO 8601 text (pydantic alone would also take numbers as Unix times)."""


class ProblemOut(BaseModel):
    path: str
    """Field path (``messageExamples.0.1.content.text``, ``body.text``); ``""`` for the whole."""
    message: str
    file: str | None = None
    """The uploaded file the problem is in, for uploads."""


class ErrorBody(BaseModel):
    error: str
    """A short machine-readable code (``agent_not_found``, ``invalid_character``, ...)."""
    message: str
    problems: list[ProblemOut] = Field(default_factory=list)


class AgentOut(BaseModel):
    id: str
    name: str
    status: Literal["running", "stopped"]
    """Its desired state, which every Carrier process sharing the store applies: ``running``
    after a start (also when another process, the worker, runs it), ``stopped`` after a stop
    or before its first start."""
    running: bool
    """Whether it runs in this process."""
    revision: int | None = None
    """Its character's head revision (``GET /agents/{agent_id}/revisions``); pass it as
    ``?revision=`` to ``PUT /agents/{agent_id}`` to refuse an edit over a newer one."""
    desired_by: str | None = None
    """Who last started or stopped it (``admin``, ``cli:<user>``, a character file's path)."""
    desired_at: datetime | None = None
    """When."""
    placement: str | None = None
    """The worker group its clients run on (``carrier run --group``); null: any worker."""
    model: str | None = None
    """The name of the model that answers (``openai/gpt-4o-mini``), ``offline`` when the agent
    answers from its message examples; null when it does not run here."""
    model_note: str | None = None
    """Why that model, e.g. why the agent is offline (``no model is configured``)."""
    offline: bool | None = None
    clients: list[str] = Field(default_factory=list)
    skipped_clients: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, Literal["set", "unset"]] = Field(default_factory=dict)
    """Each secret the character names: whether its environment variable is set here."""
    character: dict[str, Any]
    """The character (camelCase), with secret references left out."""
    created_at: datetime
    updated_at: datetime


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(default="", max_length=20_000)
    user_id: str | None = Field(default=None, min_length=1, max_length=128)
    user_name: str | None = Field(default=None, min_length=1, max_length=128)
    room_id: str | None = Field(default=None, min_length=1, max_length=128)


class ReplyOut(BaseModel):
    id: str
    text: str
    actions: list[str] = Field(default_factory=list)
    attachments: list[dict[str, Any]] = Field(default_factory=list)


class UsageOut(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0


class MessageOut(BaseModel):
    reply: str
    """All reply texts, joined by blank lines (empty when the agent did not answer)."""
    replies: list[ReplyOut]
    actions: list[dict[str, Any]]
    thought: str | None = None
    """Only with ``?include_thought=true`` and the admin token."""
    status: MemoryStatus
    reason: str | None = None
    offline: bool
    usage: UsageOut
    message_id: str
    """The stored inbound message."""


class MemoryOut(BaseModel):
    id: str
    room_id: str
    entity_id: str
    kind: MemoryKind
    status: MemoryStatus
    text: str
    actions: list[str] = Field(default_factory=list)
    source: str | None = None
    in_reply_to: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    score: float | None = None
    """For searches: similarity to ``q`` (cosine), or by words its fused rank score."""


class MemoryPage(BaseModel):
    items: list[MemoryOut]
    next_before: datetime | None = None
    """Pass as ``before`` for the next page (listing without ``q``)."""
    next_offset: int | None = None
    """Pass as ``offset`` for the next page."""


class ForgetOut(BaseModel):
    entity_id: str
    deleted: int
    """All memories deleted; the kinds follow."""
    messages: int = 0
    facts: int = 0
    replies: int = 0
    """The agent's replies to the person's messages."""
    summaries: int = 0
    other: int = 0
    entity_record: bool = False
    """Whether the person's entity record (names, platform id) was deleted too."""


class ClientConfigOut(BaseModel):
    client_id: str
    config: dict[str, Any]
    """Stored configuration; values of secret-looking keys are shown as ``set``/``unset``."""
    validated: bool
    """Whether the client's own schema checked it (else any JSON object is accepted)."""
    applied_to: list[str] = Field(default_factory=list)
    """Agents whose running client took the new configuration now."""


class ClientKindOut(BaseModel):
    """A platform client installed here (the ``carrier.clients`` entry points)."""

    name: str
    """What a character lists under ``clients`` (``discord``) and keys its options by
    (``clientConfig.discord``)."""
    config_schema: dict[str, Any] | None = None
    """The JSON schema its ``clientConfig.<name>`` is checked against (camelCase keys); null
    when the client declares none (then any JSON object is accepted)."""


class WarningOut(BaseModel):
    path: str
    """Field path (``clients.0``, ``modelProvider``); ``""`` for the whole character."""
    message: str
    """What Carrier will do with it, and how to fix it."""
    kind: WarningKind
    """A client name, the ``modelProvider``, a knowledge path, a key Carrier does not act on,
    or a YAML value cut short by a ``#`` read as a comment."""


class CharacterCheckOut(BaseModel):
    """What ``carrier validate`` says of a character a save would take."""

    warnings: list[WarningOut] = Field(default_factory=list)
    """What loads but will not act as written, each at its field path; a save is not refused
    for these."""


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    agent_id: str = Field(pattern=ID_PATTERN)
    """The one agent the token may use."""


class TokenOut(BaseModel):
    name: str
    agent_id: str
    created_at: datetime


class TokenCreated(TokenOut):
    token: str
    """The bearer token; shown this once, stored only as a hash."""


class ClientHealth(BaseModel):
    """One platform client of a running agent (see ``carrier.clients.ClientStatus``)."""

    status: Literal["connected", "connecting", "retrying", "failed", "not_configured", "elsewhere"]
    """``retrying`` and ``failed`` are a configured client that is down (the service is
    ``degraded``); ``not_configured``: no credentials here; ``elsewhere``: it runs in another
    process (the worker)."""
    since: datetime | None = None
    """When it entered this status."""
    last_error: str | None = None
    """What went wrong last (no secrets): for ``failed``, what to fix."""
    attempts: int = 0
    """Failed attempts since it was last connected."""
    next_retry_at: datetime | None = None
    process: str | None = None
    """The worker it runs in, when that is another process (as the worker reports it)."""


class AgentHealth(BaseModel):
    id: str
    name: str
    model: str | None
    """The model's name, or ``offline``."""
    model_note: str | None = None
    """Why that model, e.g. why the agent is offline."""
    offline: bool | None
    clients: dict[str, ClientHealth] = Field(default_factory=dict)
    """Each client the character lists, by name: started or not, and how it is doing."""


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    """``degraded``: the store does not answer (the answer is then 503), or a configured
    client of a running agent is down (retrying or failed)."""
    store: str
    """``ok``, or what failed."""
    agents: list[AgentHealth] | None = None
    """Running agents, their model and their clients' states (admin only)."""


class LiveOut(BaseModel):
    status: Literal["ok"]
    """The process and its event loop answer."""


class ReadyOut(BaseModel):
    status: Literal["ready", "starting", "unavailable"]
    """``ready`` (200): start-up is over and the store answers; otherwise 503."""
    reason: str | None = None
    """Why it is not ready."""


class MediaOut(BaseModel):
    id: str
    agent_id: str
    file_name: str
    content_type: str | None
    size: int
    caption: str | None
    publish_at: datetime | None
    status: str
    """``received``: stored, waiting for a publisher."""
    message: str
