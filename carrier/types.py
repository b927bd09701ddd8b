"""Shared data types, defined once.

Every client normalizes its platform events into a :class:`Message`; the runtime turns it into a
:class:`Memory` (the one record type for messages, facts, knowledge, summaries and posts) with
stable room and entity ids derived from the platform ids.
"""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AgentRecord",
    "Attachment",
    "Author",
    "Channel",
    "Content",
    "Entity",
    "Memory",
    "MemoryKind",
    "MemoryStatus",
    "Message",
    "Room",
    "RoomKind",
    "RoomState",
    "ScoredMemory",
    "Usage",
    "from_us",
    "new_id",
    "stable_id",
    "to_us",
    "utcnow",
]

_NAMESPACE = uuid.UUID("6f1c2a0e-7d4b-5c1e-9a43-2b8f0c6d1e57")


@functools.lru_cache(maxsize=65_536)
def stable_id(*parts: str) -> str:
    """A deterministic id (UUIDv5) from the given parts; the same parts always give the same id.

    Used to map platform ids (a Discord channel id, a username) onto Carrier ids that stay stable
    across restarts, e.g. ``stable_id(agent_id, "discord", channel_id)``. The last ids made are
    kept (a turn asks for its room's, its sender's and the agent's again and again).
    """
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def new_id() -> str:
    """A fresh random id (UUIDv4) as a string."""
    return str(uuid.uuid4())


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    """Integer microseconds since the epoch, how every store keeps times (exact, sortable); a
    naive datetime is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICROSECOND


def from_us(value: int) -> datetime:
    """The UTC datetime of :func:`to_us` microseconds."""
    return _EPOCH + timedelta(microseconds=int(value))


class MemoryKind(StrEnum):
    """What a :class:`Memory` holds."""

    MESSAGE = "message"
    FACT = "fact"
    KNOWLEDGE = "knowledge"
    SUMMARY = "summary"
    POST = "post"
    REFLECTION = "reflection"


class MemoryStatus(StrEnum):
    """Processing state of a memory.

    An inbound message moves received → processed | ignored | superseded | failed; one the agent
    answered waits ``pending`` until its replies' fate is known (:mod:`carrier.outbox`). An
    agent's reply moves pending → sending → sent | failed: stored before it is sent, claimed by
    the one client that sends it, then marked by that client. The inbound message never
    contradicts its replies: ``processed`` once a reply went out (or none was needed), ``failed``
    only when none did."""

    RECEIVED = "received"
    """Stored, not yet processed: a turn that crashes leaves it here."""
    PROCESSED = "processed"
    IGNORED = "ignored"
    """Processed, but the agent decided not to answer (or a hook rejected it)."""
    SUPERSEDED = "superseded"
    """A newer message in the same room arrived before this one's turn started."""
    FAILED = "failed"
    """Processing failed, or (a reply) it was not delivered; ``error`` says why."""
    STORED = "stored"
    """A record that needs no processing (facts, knowledge, summaries; replies stored before
    the outbox)."""
    PENDING = "pending"
    """A reply stored and not yet accepted by its platform; an inbound message whose turn is
    done and whose replies are on their way."""
    SENDING = "sending"
    """A reply a client claimed and is sending now (claimed once: two senders never both win)."""
    SENT = "sent"
    """A reply its platform accepted."""


class RoomKind(StrEnum):
    DM = "dm"
    GROUP = "group"
    THREAD = "thread"
    API = "api"
    CLI = "cli"


class RoomState(StrEnum):
    """The agent's own state in a room (ElizaOS participant user state)."""

    FOLLOWED = "followed"
    MUTED = "muted"


class Attachment(BaseModel):
    """A file that came with a message (or goes out with a reply)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(default_factory=new_id)
    url: str | None = None
    path: str | None = None
    """Local path, when the file was saved (uploads, media library)."""
    title: str | None = None
    content_type: str | None = None
    size: int | None = None
    """Size in bytes, when known."""
    text: str | None = None
    """Extracted text (text attachments, read up to a size cap)."""
    description: str | None = None


class Content(BaseModel):
    """What a memory says. Unknown keys are kept (plugins may add their own)."""

    model_config = ConfigDict(extra="allow")

    text: str = ""
    thought: str | None = None
    """The model's private reasoning for a reply; never sent to the platform."""
    actions: list[str] = Field(default_factory=list)
    source: str | None = None
    """Which client or subsystem produced it: ``discord``, ``api``, ``cli``, ``facts``, ..."""
    attachments: list[Attachment] = Field(default_factory=list)
    in_reply_to: str | None = None
    """Memory id this one answers."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class Memory(BaseModel):
    """The one stored record type: messages, facts, knowledge fragments, summaries, posts."""

    id: str = Field(default_factory=new_id)
    agent_id: str
    room_id: str
    entity_id: str
    """Who said it (for a message) or whom it is about (for a fact)."""
    kind: MemoryKind = MemoryKind.MESSAGE
    content: Content = Field(default_factory=Content)
    embedding: list[float] | None = None
    """Normalized vector; compared only with vectors of the same ``embedding_model``. None while
    ``embedding_model`` is set: the memory has a vector that was not read
    (``Store.get_memories(embeddings=False)``), and ``Store.update_memory`` keeps it."""
    embedding_model: str | None = None
    """``name:dim`` of the model that made ``embedding``, e.g. ``all-MiniLM-L6-v2:384``. Set it
    to None with ``embedding`` to drop a memory's vector."""

    @property
    def vector_unread(self) -> bool:
        """Whether the memory has a stored vector that was not read with it."""
        return self.embedding is None and self.embedding_model is not None

    status: MemoryStatus = MemoryStatus.STORED
    error: str | None = None
    """Why processing failed, for ``status == failed``."""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ScoredMemory(BaseModel):
    """A memory returned by a search, with its score (higher ranks first): a cosine for a
    search by vector, a fused rank score for a hybrid search."""

    memory: Memory
    score: float
    similarity: float | None = None
    """The cosine of the memory's vector with the query's, where the search compared the two
    (every hit of a search by vector; the hits of a hybrid search that its vector side found),
    so a caller that wants it need not read the vector; None where it did not."""


class Room(BaseModel):
    """A conversation place: a channel, thread, DM, API session or terminal."""

    model_config = ConfigDict(extra="allow")

    id: str
    agent_id: str
    platform: str
    platform_id: str
    name: str | None = None
    kind: RoomKind = RoomKind.GROUP
    parent_id: str | None = None
    """For a thread: the room id of its parent channel."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class Entity(BaseModel):
    """A person (or bot) the agent has met, with the names it goes by."""

    model_config = ConfigDict(extra="allow")

    id: str
    agent_id: str
    platform: str
    platform_id: str
    names: list[str] = Field(default_factory=list)
    is_bot: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentRecord(BaseModel):
    """An agent as stored: its character (as loaded, camelCase JSON) and status."""

    id: str
    name: str
    character: dict[str, Any]
    status: str = "stopped"
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Author(BaseModel):
    """Who sent an inbound message, in platform terms."""

    platform_id: str
    name: str
    username: str | None = None
    is_bot: bool = False
    is_admin: bool = False
    """The platform says this person administers the room (Discord: Administrator or Manage
    Server there; the API: the admin token). Set by the client, never from what was written;
    tools with ``trigger: room_admins`` run only for them."""


class Channel(BaseModel):
    """Where an inbound message arrived, in platform terms."""

    platform_id: str
    name: str | None = None
    kind: RoomKind = RoomKind.GROUP
    parent_platform_id: str | None = None
    """For a thread: the platform id of its parent channel."""


class Message(BaseModel):
    """An inbound message normalized by a client; the input of :meth:`AgentRuntime.handle`."""

    platform: str
    """Client name: ``discord``, ``instagram``, ``api``, ``cli``."""
    author: Author
    channel: Channel
    text: str = ""
    platform_message_id: str | None = None
    attachments: list[Attachment] = Field(default_factory=list)
    mentions_agent: bool = False
    """The agent was mentioned by id (or name/nickname, as the client decides)."""
    replies_to_agent: bool = False
    """The message is a platform reply to one of the agent's messages."""
    in_reply_to_platform_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    received_at: datetime = Field(default_factory=utcnow)

    @property
    def is_direct(self) -> bool:
        """Direct channels (DMs, API, terminal) always get an answer."""
        return self.channel.kind in (RoomKind.DM, RoomKind.API, RoomKind.CLI)


class Usage(BaseModel):
    """Token usage and cost of model calls (summed over a turn)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.calls += other.calls
