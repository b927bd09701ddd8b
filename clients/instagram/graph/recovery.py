"""Finding the media a published container became, when the publish call's answer was lost.

Only the answer of ``POST /{ig-user-id}/media_publish`` names the media a container became: an
IG Container has an ``id``, a ``status_code`` (``PUBLISHED`` once it is out), a ``status`` and a
``copyright_check_status``, and no link to its media. So when that answer is lost (a dropped
connection, a worker killed before it saved the id), the container's status proves the post is
live and the post itself is found by what it says: its caption's fingerprint, at about the time
it was published, among the account's newest media. The media are listed from two sources in
turn, since a token may lack one or a list may lag behind:

1. ``GET /{ig-user-id}/media``, the account's media list;
2. ``GET /{ig-user-id}?fields=business_discovery.username(<its username>){media{...}}``, business
   discovery pointed at the account itself.

A media id already recorded (from the publish answer) is read directly for its permalink.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from clients.instagram.errors import GraphAPIError
from clients.instagram.graph.api import GraphAPI, UnclearResponse, parse_timestamp
from clients.instagram.graph.status import ContainerPoller
from clients.instagram.post import PublishState

__all__ = ["Found", "MediaFinder", "caption_fingerprint"]

log = logging.getLogger(__name__)

CLOCK_SKEW = timedelta(minutes=5)
"""How much earlier than our record of the container a media's timestamp may be (clocks differ)."""
LOOK_AT = 25
"""How many of the newest media each source is asked for."""

_SPACE = re.compile(r"\s+")


def caption_fingerprint(caption: str | None) -> str:
    """A short hash of the caption as Instagram shows it: Unicode NFC, whitespace runs collapsed
    to one space, trimmed. Line endings or trailing spaces the platform changes do not matter."""
    text = _SPACE.sub(" ", unicodedata.normalize("NFC", caption or "")).strip()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Found:
    """The media a container became."""

    media_id: str
    permalink: str | None
    source: str
    """How it was found: ``recorded media id``, ``media list`` or ``business discovery``."""


Source = tuple[str, Callable[[], Awaitable[list[dict[str, Any]]]]]


class MediaFinder:
    """Finds the media of a published container for one account."""

    def __init__(self, api: GraphAPI, poller: ContainerPoller) -> None:
        self.api = api
        self.poller = poller
        self._username: str | None = None

    async def find(self, state: PublishState) -> Found | None:
        """The media ``state``'s post became, or ``None`` when no source shows it (yet)."""
        if state.media_id:
            return Found(state.media_id, await self._permalink(state.media_id), "recorded media id")
        for name, read in self._sources():
            try:
                media = await self.poller.retrying(read)
            except (GraphAPIError, UnclearResponse) as exc:
                log.info("post %s: the %s could not be read: %s", state.key, name, exc)
                continue
            match = pick(media, state)
            if match is not None:
                media_id = str(match["id"])
                permalink = match.get("permalink") or await self._permalink(media_id)
                log.info("post %s: found as media %s through the %s", state.key, media_id, name)
                return Found(media_id, permalink, name)
        log.warning(
            "post %s: container %s is published, but no media list shows it yet",
            state.key,
            state.container_id,
        )
        return None

    def _sources(self) -> Sequence[Source]:
        async def discovered() -> list[dict[str, Any]]:
            if self._username is None:
                self._username = str((await self.api.account()).get("username") or "")
            if not self._username:
                raise UnclearResponse("the account's username is not known")
            return await self.api.discovered_media(self._username, LOOK_AT)

        return (
            ("media list", lambda: self.api.recent_media(LOOK_AT)),
            ("business discovery", discovered),
        )

    async def _permalink(self, media_id: str) -> str | None:
        try:
            return await self.poller.retrying(lambda: self.api.permalink(media_id))
        except (GraphAPIError, UnclearResponse) as exc:
            log.warning("media %s: permalink not available: %s", media_id, exc)
            return None


def pick(media: Sequence[dict[str, Any]], state: PublishState) -> dict[str, Any] | None:
    """The one media with the post's caption fingerprint, published after the container was
    made; ``None`` when there is none, or several (two posts with one caption: never guess)."""
    wanted = caption_fingerprint(state.caption)
    since = state.container_created_at or state.publishing_since
    matches = [
        item
        for item in media
        if item.get("id")
        and caption_fingerprint(item.get("caption")) == wanted
        and _after(item, since)
    ]
    if len(matches) > 1:
        log.warning(
            "post %s: %d recent media have its caption; not guessing which one it is",
            state.key,
            len(matches),
        )
    return matches[0] if len(matches) == 1 else None


def _after(item: dict[str, Any], since: datetime | None) -> bool:
    taken = parse_timestamp(str(item.get("timestamp") or ""))
    return since is None or taken is None or taken >= since - CLOCK_SKEW
