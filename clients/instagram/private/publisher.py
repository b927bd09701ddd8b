"""``InstagrapiPublisher``: photo, album and reel posts through Instagram's private API.

- The session is persisted encrypted (:class:`SessionVault`) and reused; an expired one is
  replaced by a fresh login, and a ``LoginRequired`` mid-upload triggers one ``relogin()``.
- A challenge, two-factor or a wrong password raise :class:`OperatorActionRequired` saying what
  to do; nothing retries them.
- Throttling (``PleaseWaitFewMinutes``, ``FeedbackRequired``, rate limits, HTTP 429) starts a
  persisted cooldown and raises :class:`CoolingDown`: the job waits, nothing loops.
- ``delay_range`` makes instagrapi pause like a person between requests.
- An upload that fails without a clear answer is checked against the account's recent posts
  before anything is uploaded again.

instagrapi is synchronous; its calls run in a worker thread, one at a time per publisher.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import instagrapi
import requests
from cryptography.fernet import Fernet, MultiFernet
from instagrapi import exceptions as ig
from PIL import Image

from carrier.memory.base import Store
from carrier.types import utcnow
from clients.instagram.base import PreparedPost, Publisher
from clients.instagram.config import InstagrapiSettings
from clients.instagram.errors import InstagramError, PublishUncertain
from clients.instagram.post import Phase, PostKind, PublishResult, PublishState, SaveState
from clients.instagram.private.errors import describe_login_failure, throttle_reason
from clients.instagram.private.session import Cooldown, SessionVault
from clients.instagram.quota import PublishCounter

__all__ = ["InstagrapiPublisher", "default_client_factory"]

log = logging.getLogger(__name__)

_UNCLEAR = (
    ig.ClientConnectionError,
    ig.ClientRequestTimeout,
    ig.ClientIncompleteReadError,
    ig.ClientJSONDecodeError,
    requests.RequestException,
)


_OPERATOR = (
    ig.ChallengeError,
    ig.TwoFactorRequired,
    ig.BadPassword,
    ig.BadCredentials,
    ig.ReloginAttemptExceeded,
    ig.AccountSuspended,
)


def default_client_factory() -> instagrapi.Client:
    # with_challenge_flow=False: instagrapi's own challenge flow would wait for a code on stdin.
    return instagrapi.Client(with_challenge_flow=False)


class InstagrapiPublisher(Publisher):
    """Publishes through instagrapi for one account (``username``)."""

    name = "instagrapi"

    def __init__(
        self,
        *,
        username: str,
        password: str,
        store: Store,
        agent_id: str,
        fernet_key: Fernet | MultiFernet | bytes | str,
        settings: InstagrapiSettings | None = None,
        totp_seed: str | None = None,
        counter: PublishCounter | None = None,
        client_factory: Callable[[], instagrapi.Client] = default_client_factory,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.username = username
        self._password = password
        self._totp_seed = totp_seed
        self.settings = settings or InstagrapiSettings()
        self.vault = SessionVault(store, agent_id, username, fernet_key)
        self.cooldown = Cooldown(store, agent_id, username, clock=clock)
        self.counter = counter
        self.client_factory = client_factory
        self.clock = clock
        self._client: instagrapi.Client | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"InstagrapiPublisher(username={self.username!r})"

    async def call(self, fn: Callable[[instagrapi.Client], Any]) -> Any:
        """``fn(client)`` with the logged-in client, in a worker thread, one call at a time, with
        publishing's answers to failures: a challenge or a password problem is
        :class:`OperatorActionRequired`, throttling starts the cooldown (:class:`CoolingDown`),
        an expired session is replaced once. For the conversations (comments, DMs)."""
        await self.cooldown.check()
        async with self._lock:
            try:
                client = await self.login()
                try:
                    return await asyncio.to_thread(fn, client)
                except ig.LoginRequired:
                    await asyncio.to_thread(client.relogin)
                    await self.vault.save(client.get_settings())
                    return await asyncio.to_thread(fn, client)
            except Exception as exc:
                failure = await self._failure(exc)
                if failure is None:
                    raise
                raise failure from None

    async def _failure(self, exc: Exception) -> Exception | None:
        """What a call that raised ``exc`` raises instead (None: ``exc`` itself): a challenge
        or a password problem is :class:`OperatorActionRequired` (and the next call logs in
        afresh, once the operator has acted); throttling starts the cooldown
        (:class:`CoolingDown`); another refusal, or no answer, is :class:`InstagramError`."""
        if isinstance(exc, _OPERATOR):
            self._client = None
            return describe_login_failure(exc, self.username, totp=bool(self._totp_seed))
        if isinstance(exc, ig.ClientError):
            reason = throttle_reason(exc)
            if reason is None:
                return InstagramError(f"Instagram refused the request: {exc.message}")
            wait = (
                timedelta(hours=self.settings.feedback_cooldown_hours)
                if isinstance(exc, ig.FeedbackRequired)
                else timedelta(minutes=self.settings.cooldown_minutes)
            )
            return await self.cooldown.start(self.clock() + wait, reason)
        if isinstance(exc, requests.RequestException):
            return InstagramError(f"could not reach Instagram: {type(exc).__name__}")
        return None

    async def publish(
        self, post: PreparedPost, state: PublishState, save: SaveState
    ) -> PublishResult:
        await self.cooldown.check()
        async with self._lock:
            try:
                await self._publish(post, state, save)
            except Exception as exc:
                failure = await self._failure(exc)
                if failure is None:
                    raise
                raise failure from None
        return PublishResult.from_state(state)

    async def login(self) -> instagrapi.Client:
        """A logged-in client: the stored session when Instagram still accepts it."""
        if self._client is not None:
            return self._client
        stored = await self.vault.load()
        client = await asyncio.to_thread(self._login_sync, stored)
        await self.vault.save(client.get_settings())
        self._client = client
        return client

    def _login_sync(self, stored: dict[str, Any] | None) -> instagrapi.Client:
        client = self.client_factory()
        client.delay_range = list(self.settings.delay_range)
        if stored:
            client.set_settings(stored)
        code = client.totp_generate_code(self._totp_seed) if self._totp_seed else ""
        # With a stored session, login() only checks it (account_info) and logs in afresh,
        # keeping the device ids, when Instagram answers login_required.
        client.login(self.username, self._password, verification_code=code)
        return client

    async def _publish(self, post: PreparedPost, state: PublishState, save: SaveState) -> None:
        if self.counter is not None:
            await self.counter.check()
        client = await self.login()
        # The last attempt's outcome is unknown: look before uploading again.
        if state.phase is Phase.PUBLISHING and await self._recover(client, state, save):
            return
        state.phase = Phase.PUBLISHING
        state.publish_attempts += 1
        state.publishing_since = self.clock()
        await save()
        try:
            try:
                media = await asyncio.to_thread(self._upload, client, post, state.caption or "")
            except ig.LoginRequired:
                log.info(
                    "instagram session for %s expired mid-upload; logging in again", self.username
                )
                await asyncio.to_thread(client.relogin)
                await self.vault.save(client.get_settings())
                media = await asyncio.to_thread(self._upload, client, post, state.caption or "")
        except _UNCLEAR as exc:
            if await self._recover(client, state, save):
                return
            raise PublishUncertain(
                f"the upload gave no clear answer ({type(exc).__name__}) and the post is not among "
                "the account's recent media yet; run again later: it checks before uploading"
            ) from None
        except ig.ClientError:
            state.phase = Phase.NEW  # a clear refusal: nothing was posted, start over next time
            await save()
            raise
        await self._record(state, save, media.id, media.code, recovered=False)
        await self.vault.save(client.get_settings())

    def _upload(self, client: instagrapi.Client, post: PreparedPost, caption: str) -> Any:
        timeout = int(self.settings.configure_timeout)
        if post.kind is PostKind.PHOTO:
            return client.photo_upload(post.images[0].path, caption)
        if post.kind is PostKind.CAROUSEL:
            paths = [image.path for image in post.images]
            return client.album_upload(paths, caption, configure_timeout=timeout)
        assert post.video is not None
        with tempfile.TemporaryDirectory(prefix="carrier-ig-") as tmp:
            cover = post.cover.path if post.cover else _plain_cover(post, Path(tmp))
            return client.clip_upload(
                post.video.path, caption, thumbnail=cover, configure_timeout=timeout
            )

    async def _recover(
        self, client: instagrapi.Client, state: PublishState, save: SaveState
    ) -> bool:
        """Find the post among the account's recent media (same caption, after the attempt)."""
        since = (state.publishing_since or self.clock()) - timedelta(minutes=5)
        try:
            medias = await asyncio.to_thread(client.user_medias_v1, client.user_id, 6)
        except (ig.ClientError, requests.RequestException) as exc:
            raise PublishUncertain(
                f"could not read the account's recent media to check the last attempt: {exc}"
            ) from None
        for media in medias:
            taken = (
                media.taken_at
                if media.taken_at.tzinfo
                else media.taken_at.replace(tzinfo=since.tzinfo)
            )
            if (media.caption_text or "").strip() == (
                state.caption or ""
            ).strip() and taken >= since:
                await self._record(state, save, media.id, media.code, recovered=True)
                return True
        return False

    async def _record(
        self, state: PublishState, save: SaveState, media_id: str, code: str, *, recovered: bool
    ) -> None:
        if self.counter is not None:
            await self.counter.record()
        state.media_id = str(media_id)
        state.permalink = f"https://www.instagram.com/p/{code}/" if code else None
        state.recovered = recovered
        state.phase = Phase.PUBLISHED
        await save()
        log.info("post %s: published as %s (%s)", state.key, state.media_id, state.permalink)


def _plain_cover(post: PreparedPost, out_dir: Path) -> Path:
    """instagrapi needs a cover for a reel and cannot cut one without ffmpeg: a plain one."""
    info = post.video.info if post.video else None
    size = (info.width or 1080, info.height or 1920) if info else (1080, 1920)
    path = out_dir / "cover.jpg"
    Image.new("RGB", size, (0, 0, 0)).save(path, "JPEG", quality=90)
    return path
