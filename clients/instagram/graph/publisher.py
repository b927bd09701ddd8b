"""``GraphPublisher``: photo, carousel and reel posts through the Instagram Graph API, with
media hosted on FTP.

Steps, each recorded in the post's state before it has an effect: upload media → check the
public URLs → create item containers (carousel) → create the container → poll its
``status_code`` with backoff → check the quota (local rolling 24 h count and the API's
``content_publishing_limit``) → publish → fetch the permalink → delete the hosted files.

A publish is never retried blindly. After an unclear failure (timeout, reset, 5xx) or a restart
while ``publishing``, the container's status decides: ``PUBLISHED`` → it is out (find its media
by the caption's fingerprint, :mod:`~clients.instagram.graph.recovery`); ``FINISHED`` → not
published, publishing again is safe; anything else → fail clearly. A post found live whose media
could not be found yet is still published (never failed); :meth:`GraphPublisher.lookup` tries
again later.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from carrier.types import utcnow
from clients.instagram.base import PreparedPost, Publisher
from clients.instagram.errors import (
    ContainerFailed,
    CoolingDown,
    GraphAPIError,
    InstagramError,
    PublishUncertain,
    QuotaExceeded,
)
from clients.instagram.ftp import FtpMediaHost
from clients.instagram.graph.api import ContainerStatus, GraphAPI, UnclearResponse
from clients.instagram.graph.recovery import MediaFinder
from clients.instagram.graph.status import ContainerPoller
from clients.instagram.post import Phase, PostKind, PublishResult, PublishState, SaveState
from clients.instagram.quota import PublishCounter

__all__ = ["GraphPublisher"]

log = logging.getLogger(__name__)

_THROTTLE_CODES = {4, 17, 32, 613}  # app / user / page call limits
_PUBLISH_LIMIT_SUBCODE = 2207042  # "reached the maximum number of posts" (content publishing)


class GraphPublisher(Publisher):
    """Publishes through the Graph API. Give it a :class:`GraphAPI`, a media host and a counter."""

    name = "graph"

    def __init__(
        self,
        *,
        api: GraphAPI,
        host: FtpMediaHost,
        counter: PublishCounter,
        delete_after_publish: bool = True,
        check_urls: bool = True,
        poll_interval: float = 2.0,
        poll_max_interval: float = 30.0,
        poll_timeout: float = 600.0,
        max_publish_attempts: int = 3,
        throttle_wait: timedelta = timedelta(minutes=15),
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.host = host
        self.counter = counter
        self.delete_after_publish = delete_after_publish
        self.check_urls = check_urls
        self.max_publish_attempts = max_publish_attempts
        self.throttle_wait = throttle_wait
        self.clock = clock
        self.poller = ContainerPoller(
            api,
            interval=poll_interval,
            max_interval=poll_max_interval,
            timeout=poll_timeout,
            clock=clock,
            sleep=sleep,
        )
        self.finder = MediaFinder(api, self.poller)

    async def aclose(self) -> None:
        await self.api.aclose()

    async def publish(
        self, post: PreparedPost, state: PublishState, save: SaveState
    ) -> PublishResult:
        try:
            await self._publish_container(post, state, save)
        except ContainerFailed as failed:
            await self._forget_container(state, save)
            if failed.status_code != "EXPIRED" or not failed.resumed:
                raise
            # An expired container can never be published: make a new one (once).
            log.info(
                "post %s: container %s expired; creating a new one", state.key, failed.container_id
            )
            try:
                await self._publish_container(post, state, save)
            except ContainerFailed:
                await self._forget_container(state, save)
                raise
        await self._finish(state, save)
        return PublishResult.from_state(state)

    async def _publish_container(
        self, post: PreparedPost, state: PublishState, save: SaveState
    ) -> None:
        resumed = state.container_id is not None
        try:
            if state.container_id is None:
                await self.counter.check()  # before uploading anything
                await self._create_container(post, state, save)
            assert state.container_id is not None
            ready = await self.poller.wait_ready(state.container_id)
            if ready == "PUBLISHED":  # a previous run published it and died before recording
                await self._recover(state, save)
            else:
                await self._check_quota()
                await self._publish(state, save)
        except ContainerFailed as exc:
            exc.resumed = resumed
            raise
        except GraphAPIError as exc:
            raise self._throttled(exc) or exc from None
        except UnclearResponse as exc:
            raise InstagramError(f"the Graph API gave no clear answer: {exc}") from None

    # -- steps ---------------------------------------------------------------------------------
    async def _create_container(
        self, post: PreparedPost, state: PublishState, save: SaveState
    ) -> None:
        files = [(img.path, img.content_type) for img in post.images]
        if post.video is not None:
            files = [(post.video.path, post.video.content_type)]
            if post.cover is not None:
                files.append((post.cover.path, post.cover.content_type))
        slug = (state.caption or post.key).split("\n")[0]
        for path, content_type in files[len(state.hosted) :]:
            state.hosted.append(await self.host.upload(path, slug=slug, content_type=content_type))
            await save()
        state.phase = Phase.UPLOADED
        await save()
        if self.check_urls:
            for hosted in state.hosted:
                await self.host.verify(hosted)
        caption = state.caption or None
        if post.kind is PostKind.CAROUSEL:
            for hosted in state.hosted[len(state.children) :]:
                child = await self.poller.retrying(functools.partial(self._create_item, hosted.url))
                state.children.append(child)
                await save()
            container = await self.poller.retrying(
                lambda: self.api.create_carousel(state.children, caption=caption)
            )
        elif post.kind is PostKind.REEL:
            cover = state.hosted[1].url if len(state.hosted) > 1 else None
            container = await self.poller.retrying(
                lambda: self.api.create_reel(
                    state.hosted[0].url,
                    caption=caption,
                    cover_url=cover,
                    share_to_feed=post.share_to_feed,
                )
            )
        else:
            container = await self.poller.retrying(
                lambda: self.api.create_image(state.hosted[0].url, caption=caption)
            )
        # Saved before anything can publish it: a restart resumes this container.
        state.container_id = container
        state.container_created_at = self.clock()
        state.phase = Phase.CONTAINER
        await save()
        log.info("post %s: container %s created", state.key, container)

    async def _check_quota(self) -> None:
        await self.counter.check()
        limit = await self.poller.retrying(self.api.publishing_limit)
        if limit.total is not None and limit.usage >= limit.total:
            retry_at = await self.counter.retry_at()
            if retry_at is None or retry_at <= self.clock():
                retry_at = self.clock() + timedelta(hours=1)
            raise QuotaExceeded(
                retry_at, f"the API reports {limit.usage} of {limit.total} posts used in 24 h"
            )

    async def _publish(self, state: PublishState, save: SaveState) -> None:
        container_id = state.container_id
        assert container_id is not None
        for _ in range(self.max_publish_attempts):
            state.phase = Phase.PUBLISHING
            state.publish_attempts += 1
            state.publishing_since = self.clock()
            await save()  # from here on, a restart checks the status before publishing
            try:
                media_id = await self.api.publish(container_id)
            except UnclearResponse as exc:
                log.warning("post %s: publish gave no clear answer (%s); checking", state.key, exc)
                status = await self._status_or_uncertain(container_id, str(exc))
                if status.code == "PUBLISHED":
                    await self._recover(state, save)
                    return
                if status.code == "FINISHED":
                    continue  # not published: publishing again is safe
                if status.code in ("ERROR", "EXPIRED"):
                    raise ContainerFailed(container_id, status.code, status.message) from None
                raise PublishUncertain(
                    f"publishing container {container_id} gave no clear answer ({exc}) and its "
                    f"status is {status.code or 'unknown'}; run again later to check",
                    container_id=container_id,
                ) from None
            except GraphAPIError:
                state.phase = Phase.CONTAINER
                await save()
                raise
            state.media_id = media_id  # saved first: the only answer that names the media
            state.phase = Phase.PUBLISHED
            await save()
            await self.counter.record()
            log.info("post %s: published as %s", state.key, media_id)
            return
        raise PublishUncertain(
            f"publishing container {container_id} gave no clear answer "
            f"{self.max_publish_attempts} times (it is still not published); run again later",
            container_id=container_id,
        )

    async def _recover(self, state: PublishState, save: SaveState) -> None:
        """The container is PUBLISHED: the post is out. Find the media it became."""
        state.phase = Phase.PUBLISHED
        state.recovered = True
        await save()  # live, whatever the lookup finds
        await self.counter.record()
        await self.lookup(state, save)
        log.info("post %s: container was already published (media %s)", state.key, state.media_id)

    async def lookup(self, state: PublishState, save: SaveState) -> bool:
        """Fill in a published post's media id and permalink if they are missing; True once
        both are known. Safe to call again (a later call may find what a media list did not
        show yet)."""
        if state.media_id is None or state.permalink is None:
            found = await self.finder.find(state)
            if found is not None:
                state.media_id, state.permalink = found.media_id, found.permalink
                if state.recovered:
                    state.found_by = found.source
                await save()
        return state.media_id is not None and state.permalink is not None

    async def _finish(self, state: PublishState, save: SaveState) -> None:
        if state.media_id and not state.permalink:
            await self.lookup(state, save)
        if self.delete_after_publish:
            await self._delete_hosted(state, save)

    async def _forget_container(self, state: PublishState, save: SaveState) -> None:
        """A failed container can never be published: start over next time."""
        await self._delete_hosted(state, save)
        state.hosted, state.children = [], []
        state.container_id = state.container_created_at = None
        state.phase = Phase.NEW
        await save()

    async def _delete_hosted(self, state: PublishState, save: SaveState) -> None:
        for hosted in state.hosted:
            if not hosted.deleted and await self.host.delete(hosted):
                hosted.deleted = True
        await save()

    # -- helpers -------------------------------------------------------------------------------
    async def _create_item(self, url: str) -> str:
        return await self.api.create_image(url, carousel_item=True)

    async def _status_or_uncertain(self, container_id: str, why: str) -> ContainerStatus:
        try:
            return await self.poller.status(container_id)
        except UnclearResponse as exc:
            raise PublishUncertain(
                f"publishing container {container_id} gave no clear answer ({why}) and its status "
                f"could not be read ({exc}); run again later: the status is checked before any "
                "new publish",
                container_id=container_id,
            ) from None

    def _throttled(self, exc: GraphAPIError) -> CoolingDown | QuotaExceeded | None:
        if exc.subcode == _PUBLISH_LIMIT_SUBCODE:
            return QuotaExceeded(self.clock() + timedelta(hours=1), exc.api_message)
        if exc.code in _THROTTLE_CODES:
            return CoolingDown(self.clock() + self.throttle_wait, exc.api_message)
        return None
