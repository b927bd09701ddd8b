"""The publisher contract: one class per way of posting (Graph API, instagrapi)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from clients.instagram.media import PreparedImage, PreparedVideo
from clients.instagram.post import PostKind, PublishResult, PublishState, SaveState

__all__ = ["PreparedPost", "Publisher"]


@dataclass(frozen=True, slots=True)
class PreparedPost:
    """A post whose media passed the checks (converted where needed) and whose caption fits."""

    key: str
    kind: PostKind
    caption: str
    images: list[PreparedImage] = field(default_factory=list)
    """The photo, or the carousel items in order."""
    video: PreparedVideo | None = None
    cover: PreparedImage | None = None
    share_to_feed: bool = True

    @property
    def changes(self) -> list[str]:
        """What was done to the media, one line per change, prefixed by the file name."""
        items = [*self.images, *([self.cover] if self.cover else [])]
        return [f"{item.source.name}: {change}" for item in items for change in item.changes]


class Publisher(ABC):
    """Publishes a prepared post, keeping ``state`` up to date through ``save``.

    Implementations must call ``save()`` before each step with an effect outside (upload,
    container, publish), and must check, never guess, when a previous attempt's outcome is
    unknown (``state.phase`` is ``publishing``).
    """

    name: ClassVar[str]

    @abstractmethod
    async def publish(
        self, post: PreparedPost, state: PublishState, save: SaveState
    ) -> PublishResult: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Safe to call twice."""
