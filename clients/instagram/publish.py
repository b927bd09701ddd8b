"""``publish_post``: the one call a job handler makes to put a post on Instagram.

Idempotent given the persisted :class:`~clients.instagram.post.PublishState`: called again
after a crash, a timeout or a ``RetryLater``, it resumes from what was recorded (the hosted
files, the container id, an in-flight publish) and returns the same result once the post is out.
Media and caption are checked first, so a bad file is refused before anything is uploaded.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from clients.instagram.base import PreparedPost, Publisher
from clients.instagram.caption import prepare_caption
from clients.instagram.config import InstagramConfig
from clients.instagram.errors import InstagramError
from clients.instagram.media import ImageRules, VideoRules, check_video, prepare_image
from clients.instagram.post import Phase, Post, PostKind, PublishResult, PublishState, PublishStates

__all__ = ["image_rules", "prepare_post", "publish_post"]

log = logging.getLogger(__name__)


def image_rules(config: InstagramConfig) -> ImageRules:
    """How a feed image is converted for this configuration (``fit``, ``background``): the
    one place the publishers and the console's preview take it from."""
    return ImageRules(fit=config.fit, background=config.background_rgb)


def prepare_post(
    post: Post,
    out_dir: Path,
    config: InstagramConfig | None = None,
    *,
    video_rules: VideoRules | None = None,
) -> PreparedPost:
    """Check and convert the media, trim the caption. Raises ``MediaRejected`` /
    ``CaptionRejected``; touches nothing but ``out_dir``."""
    config = config or InstagramConfig()
    rules = image_rules(config)
    caption = prepare_caption(
        post.caption, max_hashtags=config.max_hashtags, max_length=config.caption_max_length
    )
    if post.kind is PostKind.REEL:
        video = check_video(post.media[0], video_rules)
        # Reel covers are usually 9:16, which feed images may not be.
        cover_rules = dataclasses.replace(rules, min_aspect=9 / 16)
        cover = (
            prepare_image(post.cover, out_dir, cover_rules, stem="cover") if post.cover else None
        )
        return PreparedPost(
            key=post.key,
            kind=post.kind,
            caption=caption,
            video=video,
            cover=cover,
            share_to_feed=post.share_to_feed,
        )
    images = [
        prepare_image(path, out_dir, rules, stem=f"{index:02d}-{path.stem}")
        for index, path in enumerate(post.media)
    ]
    return PreparedPost(key=post.key, kind=post.kind, caption=caption, images=images)


async def publish_post(
    post: Post,
    *,
    publisher: Publisher,
    states: PublishStates,
    config: InstagramConfig | None = None,
    work_dir: Path | None = None,
    dry_run: bool | None = None,
    video_rules: VideoRules | None = None,
) -> PublishResult:
    """Publish ``post`` exactly once (per ``post.key``) and return its media id and permalink.

    Raises ``RetryLater`` (wait until ``retry_at``, no attempt consumed), ``PublishUncertain``
    (call again later; it checks first), ``MediaRejected`` / ``CaptionRejected`` /
    ``OperatorActionRequired`` (a human must act) or another ``InstagramError`` (failed, with the
    platform's message).
    """
    config = config or InstagramConfig()
    dry_run = config.dry_run if dry_run is None else dry_run
    state = await states.load(post.key)
    if state is not None and state.phase is Phase.PUBLISHED:
        log.info("post %s is already published (%s); nothing to do", post.key, state.media_id)
        return PublishResult.from_state(state)
    if state is None:
        state = PublishState(key=post.key, publisher=publisher.name)
    elif state.publisher != publisher.name and state.phase is not Phase.NEW:
        raise InstagramError(
            f"post {post.key} was started with the {state.publisher} publisher (phase "
            f"{state.phase.value}); finish it with that publisher, or delete its state to restart"
        )
    with tempfile.TemporaryDirectory(prefix="carrier-ig-", dir=work_dir) as tmp:
        prepared = prepare_post(post, Path(tmp), config, video_rules=video_rules)
        if dry_run:
            log.info("dry run: post %s would be published by %s", post.key, publisher.name)
            return PublishResult(
                key=post.key,
                publisher=publisher.name,
                caption=prepared.caption,
                dry_run=True,
                changes=prepared.changes,
            )
        if state.caption is None or state.phase in (Phase.NEW, Phase.UPLOADED):
            state.caption = prepared.caption
        state.publisher = publisher.name

        async def save() -> None:
            await states.save(state)

        await save()
        try:
            result = await publisher.publish(prepared, state, save)
        except InstagramError as exc:
            state.error = str(exc)
            await save()
            raise
        state.error = None
        await save()
    return result.model_copy(update={"changes": prepared.changes})
