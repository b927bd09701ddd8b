"""Recovering a post whose publish answer was lost: the container proves it is live, and its
media id and permalink are found by its caption's fingerprint, through the media list or, when
that is off or lags, business discovery; never a second publish. And the lease fence: a
process whose job was taken over never makes the publishing call."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carrier.jobs.errors import LeaseLost
from carrier.memory.sqlite import SQLiteStore
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.graph import GraphPublisher
from clients.instagram.graph.recovery import caption_fingerprint, pick
from clients.instagram.post import Phase, Post, PostKind, PublishState, PublishStates
from clients.instagram.publish import publish_post
from tests.clients.instagram.helpers import make_image

Make = Callable[..., GraphPublisher]
CAPTION = "last frame of the roll.\nportra 400 #35mm"


class Died(BaseException):
    """The process dying (not an Exception: nothing catches it)."""


class DiesAfterPublishing(SQLiteStore):
    """Dies when it is about to record the answer of the publishing call."""

    async def set_setting(self, key: str, value: object) -> None:
        if isinstance(value, dict) and value.get("phase") == "published":
            raise Died
        await super().set_setting(key, value)


async def publish_then_die(make: Make, tmp_path: Path, fake: FakeGraphAPI) -> Post:
    post = Post(
        key="lost-answer",
        kind=PostKind.PHOTO,
        media=[make_image(tmp_path / "a.jpg")],
        caption=CAPTION,
    )
    async with DiesAfterPublishing(path=tmp_path / "carrier.db") as dying:
        with pytest.raises(Died):
            await publish_post(post, publisher=make(), states=PublishStates(dying, "agent-lumen"))
    assert fake.publish_calls == 1  # it is live; the state still says "publishing"
    return post


@pytest.mark.parametrize(
    ("media_list", "found_by"),
    [("on", "media list"), ("off", "business discovery"), ("stale", "business discovery")],
)
async def test_a_post_live_before_the_crash_gets_its_media_id_and_permalink(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    tmp_path: Path,
    media_list: str,
    found_by: str,
) -> None:
    fake_graph.media_list = media_list  # type: ignore[assignment]
    post = await publish_then_die(make_publisher, tmp_path, fake_graph)

    result = await publish_post(post, publisher=make_publisher(), states=states)

    [live] = fake_graph.published
    assert fake_graph.publish_calls == 1 and len(fake_graph.containers) == 1
    assert (result.media_id, result.permalink, result.recovered) == (
        live["id"],
        live["permalink"],
        True,
    )
    saved = await states.load(post.key)
    assert saved is not None and saved.phase is Phase.PUBLISHED
    assert (saved.media_id, saved.permalink, saved.found_by) == (
        live["id"],
        live["permalink"],
        found_by,
    )


async def test_a_live_post_no_list_shows_yet_stays_published_and_is_found_later(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    fake_graph.media_list = "off"
    fake_graph.business_discovery = False
    post = await publish_then_die(make_publisher, tmp_path, fake_graph)
    publisher = make_publisher()

    result = await publish_post(post, publisher=publisher, states=states)

    assert fake_graph.publish_calls == 1  # never published again
    assert (result.recovered, result.media_id, result.permalink) == (True, None, None)
    saved = await states.load(post.key)
    assert saved is not None and saved.phase is Phase.PUBLISHED  # live, not failed
    fake_graph.media_list = "on"  # the list comes back

    async def save() -> None:
        await states.save(saved)

    assert await publisher.lookup(saved, save)
    [live] = fake_graph.published
    again = await states.load(post.key)
    assert again is not None
    assert (again.media_id, again.permalink, again.found_by) == (
        live["id"],
        live["permalink"],
        "media list",
    )


async def test_a_recorded_media_id_is_read_for_its_permalink(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    post = Post(key="p", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])
    await publish_post(post, publisher=make_publisher(), states=states)
    saved = await states.load("p")
    assert saved is not None and saved.media_id
    saved.permalink = None  # killed after the publish answer was saved, before the permalink
    fake_graph.media_list = "off"
    fake_graph.business_discovery = False

    async def save() -> None:
        await states.save(saved)

    assert await make_publisher().lookup(saved, save)
    assert saved.permalink == fake_graph.published[0]["permalink"]


def test_the_fingerprint_ignores_what_the_platform_may_change() -> None:
    same = caption_fingerprint("fog at six.\nthe ferry horn.  #35mm")
    assert caption_fingerprint("  fog at six.\r\nthe ferry horn. #35mm\n") == same
    assert caption_fingerprint("cafe\u0301") == caption_fingerprint("caf\u00e9")  # NFC
    assert caption_fingerprint("fog at seven.") != same
    assert caption_fingerprint(None) == caption_fingerprint("")


def test_pick_never_guesses() -> None:
    made = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    state = PublishState(
        key="k", publisher="graph", caption="fog at six.", container_created_at=made
    )

    def media(media_id: str, caption: str, minutes: float) -> dict[str, str]:
        at = made + timedelta(minutes=minutes)
        return {
            "id": media_id,
            "caption": caption,
            "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S+0000"),
        }

    assert pick([media("1", "fog at six.", 1), media("2", "other", 1)], state) == media(
        "1", "fog at six.", 1
    )
    assert pick([media("1", "fog at six.", -60)], state) is None  # posted before the container
    assert pick([media("1", "fog at six.", 1), media("2", "fog at six.", 2)], state) is None
    assert pick([], state) is None


async def test_a_taken_over_process_never_makes_the_publishing_call(
    make_publisher: Make, store: SQLiteStore, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    async def taken_over() -> None:
        raise LeaseLost("job-1", "w1", "it is leased to w2")

    fenced = PublishStates(store, "agent-lumen").fenced(taken_over)
    post = Post(key="fenced", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])
    with pytest.raises(LeaseLost):
        await publish_post(post, publisher=make_publisher(), states=fenced)
    assert fake_graph.publish_calls == 0 and fake_graph.published == []
    saved = await PublishStates(store, "agent-lumen").load("fenced")
    assert saved is not None and saved.phase is Phase.CONTAINER  # the other worker resumes it
