"""What to publish (:class:`Post`), what came of it (:class:`PublishResult`), and the persisted
record that makes publishing idempotent (:class:`PublishState`, kept in the Store's settings).

The state record is saved before every step that has an effect outside (an upload, a container,
a publish call), so a process killed at any point resumes from what is recorded and never posts
the same :attr:`Post.key` twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, Field, model_validator

from carrier.memory.base import Store
from carrier.types import utcnow

__all__ = [
    "Fence",
    "HostedFile",
    "Phase",
    "Post",
    "PostKind",
    "PublishResult",
    "PublishState",
    "PublishStates",
    "SaveState",
]


class PostKind(StrEnum):
    PHOTO = "photo"
    CAROUSEL = "carousel"
    REEL = "reel"


class Post(BaseModel):
    """One post to publish. ``key`` is its idempotency key (a job's key, a plan entry's id)."""

    key: str = Field(min_length=1)
    kind: PostKind
    media: list[Path]
    """One image (photo), 2 to 10 images (carousel) or one MP4/MOV video (reel)."""
    caption: str = ""
    cover: Path | None = None
    """Reel cover image (optional; Instagram picks a frame without one)."""
    share_to_feed: bool = True
    """Reels: also show in the main feed."""

    @model_validator(mode="after")
    def _count(self) -> Self:
        n = len(self.media)
        if self.kind is PostKind.CAROUSEL and not 2 <= n <= 10:
            raise ValueError(f"a carousel has 2 to 10 images, got {n}")
        if self.kind is not PostKind.CAROUSEL and n != 1:
            raise ValueError(f"a {self.kind.value} has exactly one media file, got {n}")
        return self


class Phase(StrEnum):
    """How far a post got. Only ``published`` is final."""

    NEW = "new"
    UPLOADED = "uploaded"
    """Media is on the media host (Graph API)."""
    CONTAINER = "container"
    """The media container exists (its id is saved): resuming never creates a second one."""
    PUBLISHING = "publishing"
    """A publish call was sent and its outcome is not known yet: check before publishing again."""
    PUBLISHED = "published"


class HostedFile(BaseModel):
    """A media file on the FTP media host."""

    remote_path: str
    url: str
    content_type: str
    deleted: bool = False


class PublishState(BaseModel):
    """The persisted progress of one post."""

    key: str
    publisher: str
    phase: Phase = Phase.NEW
    caption: str | None = None
    hosted: list[HostedFile] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    """Carousel item container ids, in order."""
    container_id: str | None = None
    container_created_at: datetime | None = None
    publish_attempts: int = 0
    publishing_since: datetime | None = None
    media_id: str | None = None
    permalink: str | None = None
    recovered: bool = False
    """The publish was confirmed by checking after an unclear failure or a restart."""
    found_by: str | None = None
    """For a recovered post: how its media was found (``media list``, ``business discovery``,
    ``recorded media id``); ``None`` while it is not found."""
    error: str | None = None
    """The last failure, for the operator."""
    updated_at: datetime = Field(default_factory=utcnow)


class PublishResult(BaseModel):
    """What a job handler records when a post is out (or would be, for a dry run)."""

    key: str
    publisher: str
    media_id: str | None = None
    permalink: str | None = None
    container_id: str | None = None
    caption: str = ""
    dry_run: bool = False
    recovered: bool = False
    changes: list[str] = Field(default_factory=list)
    """What was done to the media to make it postable."""

    @classmethod
    def from_state(cls, state: PublishState, **extra: Any) -> PublishResult:
        return cls(
            key=state.key,
            publisher=state.publisher,
            media_id=state.media_id,
            permalink=state.permalink,
            container_id=state.container_id,
            caption=state.caption or "",
            recovered=state.recovered,
            **extra,
        )


SaveState = Callable[[], Awaitable[None]]
"""Persist the current :class:`PublishState` (publishers call it before each outside effect)."""


Fence = Callable[[], Awaitable[None]]
"""Raises if this process may no longer act for the post (its job was taken over elsewhere)."""


class PublishStates:
    """Publish states of one agent, in the Store's settings under ``instagram:<agent>:post:<key>``.

    With a ``fence``, saving a state that enters ``publishing`` (the save right before the call
    that makes a post live) first calls the fence: a process whose job was taken over by
    another worker stops there instead of publishing a second time.
    """

    def __init__(self, store: Store, agent_id: str, *, fence: Fence | None = None) -> None:
        self.store = store
        self.agent_id = agent_id
        self.fence = fence

    def fenced(self, fence: Fence) -> PublishStates:
        """The same states, saved behind ``fence``."""
        return PublishStates(self.store, self.agent_id, fence=fence)

    def _key(self, post_key: str) -> str:
        return f"instagram:{self.agent_id}:post:{post_key}"

    async def load(self, post_key: str) -> PublishState | None:
        raw = await self.store.get_setting(self._key(post_key))
        return PublishState.model_validate(raw) if raw else None

    async def save(self, state: PublishState) -> None:
        if self.fence is not None and state.phase is Phase.PUBLISHING:
            await self.fence()
        state.updated_at = utcnow()
        await self.store.set_setting(self._key(state.key), state.model_dump(mode="json"))
