"""Graph API publishing end to end: a real aioftp server, a loopback fake Graph API that serves
the FTP root over HTTP, a real SQLite store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from carrier.memory.sqlite import SQLiteStore
from clients.instagram import Post, PostKind, publish_post
from clients.instagram.errors import ContainerFailed, GraphAPIError, MediaRejected, QuotaExceeded
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.graph import GraphAPI, GraphPublisher
from clients.instagram.post import Phase, PublishStates
from clients.instagram.quota import PublishCounter
from tests.clients.instagram.helpers import TOKEN, ManualClock, make_image, make_mp4

Make = Callable[..., GraphPublisher]


def hosted_files(ftp_root: Path) -> list[str]:
    return sorted(p.name for p in (ftp_root / "media").iterdir())


async def test_photo_is_published_with_permalink_and_hosted_file_deleted(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    ftp_root: Path,
    tmp_path: Path,
) -> None:
    photo = make_image(tmp_path / "in" / "Fog at the Ferry.jpg")
    post = Post(key="post-1", kind=PostKind.PHOTO, media=[photo], caption="fog came in at six")

    result = await publish_post(post, publisher=make_publisher(), states=states)

    assert result.media_id == fake_graph.published[0]["id"]
    assert result.permalink == fake_graph.published[0]["permalink"]
    assert fake_graph.published[0]["caption"] == "fog came in at six"
    assert fake_graph.publish_calls == 1
    assert hosted_files(ftp_root) == []  # deleted after publishing
    state = await states.load("post-1")
    assert state is not None and state.phase is Phase.PUBLISHED
    assert state.hosted[0].remote_path.startswith("/media/fog-came-in-at-six-")

    again = await publish_post(post, publisher=make_publisher(), states=states)
    assert again.media_id == result.media_id
    assert fake_graph.publish_calls == 1


async def test_hosted_files_are_kept_when_cleanup_is_off(
    make_publisher: Make, states: PublishStates, ftp_root: Path, tmp_path: Path
) -> None:
    photo = make_image(tmp_path / "Café à Lisboa.jpg")
    post = Post(key="keep", kind=PostKind.PHOTO, media=[photo], caption="")
    await publish_post(post, publisher=make_publisher(delete_after_publish=False), states=states)
    [name] = hosted_files(ftp_root)
    assert name.startswith("keep-") and name.endswith(".jpg") and name.isascii()


async def test_carousel_creates_children_then_the_parent(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    media = [
        make_image(tmp_path / "a.jpg"),
        make_image(tmp_path / "b.png", mode="RGBA", fmt="PNG"),
        make_image(tmp_path / "c.jpg", size=(1500, 1000)),
    ]
    post = Post(key="carousel", kind=PostKind.CAROUSEL, media=media, caption="three frames #35mm")

    result = await publish_post(post, publisher=make_publisher(), states=states)

    [published] = fake_graph.published
    assert published["media_type"] == "CAROUSEL" and result.media_id == published["id"]
    children = [c for c in fake_graph.containers.values() if c.params.get("is_carousel_item")]
    assert len(children) == 3
    assert all(c.params["image_url"].endswith(".jpg") for c in children)
    assert any("flattened transparency" in change for change in result.changes)


async def test_reel_is_published_from_a_hosted_video(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    video = make_mp4(tmp_path / "harbour.mp4")
    post = Post(key="reel", kind=PostKind.REEL, media=[video], caption="the ferry horn")

    result = await publish_post(post, publisher=make_publisher(), states=states)

    [published] = fake_graph.published
    assert published["media_type"] == "REELS" and result.permalink == published["permalink"]
    [container] = fake_graph.containers.values()
    assert container.params["video_url"].endswith(".mp4")
    assert container.params["share_to_feed"] == "true"


async def test_status_is_polled_with_backoff_until_finished(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    fake_graph.in_progress_polls = 4
    post = Post(key="slow", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])
    await publish_post(post, publisher=make_publisher(poll_interval=1.0), states=states)
    assert clock.slept == [1.0, 2.0, 4.0, 8.0]
    assert fake_graph.publish_calls == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ("ERROR", "Error: The aspect ratio is not supported. (2207009)"),
        ("EXPIRED", None),
    ],
)
async def test_error_and_expired_containers_fail_clearly(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    ftp_root: Path,
    tmp_path: Path,
    status: str,
    message: str | None,
) -> None:
    fake_graph.next_status = (status, message)
    post = Post(key=f"bad-{status}", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])

    with pytest.raises(ContainerFailed) as info:
        await publish_post(post, publisher=make_publisher(), states=states)

    assert info.value.status_code == status
    assert f"ended in {status}" in str(info.value)
    if message:
        assert "aspect ratio is not supported (2207009)" in str(info.value).replace(".", "")
    assert fake_graph.publish_calls == 0
    assert hosted_files(ftp_root) == []
    state = await states.load(post.key)
    assert state is not None and state.phase is Phase.NEW and state.container_id is None
    assert state.error and status in state.error


async def test_over_the_api_quota_waits_and_publishes_nothing(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    fake_graph.quota_usage = fake_graph.quota_total
    post = Post(key="q", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])

    with pytest.raises(QuotaExceeded) as info:
        await publish_post(post, publisher=make_publisher(), states=states)

    assert info.value.retry_at > clock.now
    assert "50 of 50" in str(info.value)
    assert fake_graph.publish_calls == 0 and fake_graph.published == []

    # the job waits; later the quota frees and the same container goes out once
    fake_graph.quota_usage = 0
    result = await publish_post(post, publisher=make_publisher(), states=states)
    assert fake_graph.publish_calls == 1 and result.media_id
    assert len(fake_graph.containers) == 1


async def test_local_rolling_counter_survives_restarts(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    store: SQLiteStore,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    first = Post(key="one", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])
    await publish_post(first, publisher=make_publisher(limit=1), states=states)
    published_at = clock.now
    clock.advance(hours=3)

    second = Post(key="two", kind=PostKind.PHOTO, media=[make_image(tmp_path / "b.jpg")])
    with pytest.raises(QuotaExceeded) as info:
        await publish_post(second, publisher=make_publisher(limit=1), states=states)
    assert info.value.retry_at == published_at + timedelta(hours=24)
    assert fake_graph.publish_calls == 1
    counter = PublishCounter(store, "instagram:agent-lumen:published", limit=1, clock=clock)
    assert len(await counter.times()) == 1

    clock.advance(hours=22)
    await publish_post(second, publisher=make_publisher(limit=1), states=states)
    assert fake_graph.publish_calls == 2


@pytest.mark.parametrize("fault", ["drop_after_publish", "500_after_publish"])
async def test_unclear_failure_after_the_server_published_is_not_published_again(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    tmp_path: Path,
    fault: str,
) -> None:
    fake_graph.publish_faults = [fault]  # type: ignore[list-item]
    post = Post(
        key="unclear",
        kind=PostKind.PHOTO,
        media=[make_image(tmp_path / "a.jpg")],
        caption="one true detail",
    )

    result = await publish_post(post, publisher=make_publisher(), states=states)

    assert fake_graph.publish_calls == 1
    [published] = fake_graph.published
    assert result.recovered is True
    assert result.media_id == published["id"] and result.permalink == published["permalink"]


async def test_unclear_failure_before_publishing_publishes_again_once(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    fake_graph.publish_faults = ["drop_before_publish"]
    post = Post(key="retry", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])

    result = await publish_post(post, publisher=make_publisher(), states=states)

    assert fake_graph.publish_calls == 2  # the container was FINISHED, so publishing again was safe
    assert len(fake_graph.published) == 1 and result.recovered is False


async def test_restart_between_container_and_publish_posts_exactly_once(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    from clients.instagram.errors import ContainerNotReady

    fake_graph.in_progress_polls = 100
    post = Post(key="restart", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])
    with pytest.raises(ContainerNotReady):  # the first process gives up waiting (or dies) here
        await publish_post(post, publisher=make_publisher(poll_timeout=5), states=states)
    saved = await states.load("restart")
    assert saved is not None and saved.phase is Phase.CONTAINER and saved.container_id

    fake_graph.containers[saved.container_id].polls_in_progress = 0
    result = await publish_post(post, publisher=make_publisher(), states=states)  # a new process

    assert len(fake_graph.containers) == 1  # the saved container was reused
    assert fake_graph.publish_calls == 1 and len(fake_graph.published) == 1
    assert result.container_id == saved.container_id


class Crash(BaseException):
    """Stands in for the process dying (not an Exception, so nothing catches it)."""


class DyingStore(SQLiteStore):
    """A store whose process 'dies' when it is about to record a published post."""

    async def set_setting(self, key: str, value: object) -> None:
        if isinstance(value, dict) and value.get("phase") == "published":
            raise Crash
        await super().set_setting(key, value)


async def test_killed_after_publishing_before_recording_resumes_without_posting_twice(
    make_publisher: Make, store: SQLiteStore, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    post = Post(
        key="killed",
        kind=PostKind.PHOTO,
        media=[make_image(tmp_path / "a.jpg")],
        caption="last frame",
    )
    dying = DyingStore(path=tmp_path / "carrier.db")
    async with dying:
        with pytest.raises(Crash):
            await publish_post(
                post, publisher=make_publisher(), states=PublishStates(dying, "agent-lumen")
            )
    assert fake_graph.publish_calls == 1  # it went out, but the state still says "publishing"
    states = PublishStates(store, "agent-lumen")
    saved = await states.load("killed")
    assert saved is not None and saved.phase is Phase.PUBLISHING

    result = await publish_post(post, publisher=make_publisher(), states=states)

    assert fake_graph.publish_calls == 1 and len(fake_graph.published) == 1
    assert result.recovered and result.media_id == fake_graph.published[0]["id"]


async def test_bad_media_is_refused_before_any_upload(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    ftp_root: Path,
    tmp_path: Path,
) -> None:
    broken = tmp_path / "notes.jpg"
    broken.write_text("this is not a photo")
    post = Post(key="bad", kind=PostKind.CAROUSEL, media=[make_image(tmp_path / "a.jpg"), broken])

    with pytest.raises(MediaRejected, match=r"notes\.jpg: refused before upload: not an image"):
        await publish_post(post, publisher=make_publisher(), states=states)

    assert hosted_files(ftp_root) == []
    assert fake_graph.state.requests == []


async def test_dry_run_checks_media_and_uploads_nothing(
    make_publisher: Make,
    states: PublishStates,
    fake_graph: FakeGraphAPI,
    ftp_root: Path,
    tmp_path: Path,
) -> None:
    wide = make_image(tmp_path / "wide.png", size=(3000, 1000), fmt="PNG")
    post = Post(
        key="dry",
        kind=PostKind.PHOTO,
        media=[wide],
        caption="a b #one #two #three #four #five #six",
    )

    result = await publish_post(post, publisher=make_publisher(), states=states, dry_run=True)

    assert result.dry_run and result.media_id is None
    assert result.caption.endswith("#five")
    assert any("padded aspect ratio 3.00:1" in c for c in result.changes)
    assert hosted_files(ftp_root) == [] and fake_graph.state.requests == []


async def test_the_access_token_never_appears_in_errors_or_logs(
    fake_graph: FakeGraphAPI, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "EAAG-wrong-but-still-secret"
    api = GraphAPI(access_token=wrong, ig_user_id=fake_graph.ig_user_id, base_url=fake_graph.url)
    caplog.set_level("DEBUG")
    with pytest.raises(GraphAPIError) as info:
        await api.publishing_limit()
    await api.aclose()
    assert info.value.code == 190 and "Invalid OAuth access token" in str(info.value)
    assert wrong not in str(info.value) and wrong not in caplog.text
    assert TOKEN not in caplog.text
    assert api.mask(f"token={wrong}") == "token=***"


async def test_a_container_that_expired_while_waiting_is_replaced_once(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    from clients.instagram.errors import ContainerNotReady

    fake_graph.in_progress_polls = 100
    post = Post(key="stale", kind=PostKind.PHOTO, media=[make_image(tmp_path / "a.jpg")])
    with pytest.raises(ContainerNotReady):
        await publish_post(post, publisher=make_publisher(poll_timeout=5), states=states)
    saved = await states.load("stale")
    assert saved is not None and saved.container_id
    fake_graph.expire(saved.container_id)  # the job waited more than 24 h
    fake_graph.in_progress_polls = 0

    result = await publish_post(post, publisher=make_publisher(), states=states)

    assert len(fake_graph.containers) == 2 and result.container_id != saved.container_id
    assert fake_graph.publish_calls == 1 and len(fake_graph.published) == 1


async def test_a_reel_cover_is_hosted_and_keeps_its_9_by_16_shape(
    make_publisher: Make, states: PublishStates, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    cover = make_image(tmp_path / "cover.png", size=(1080, 1920), fmt="PNG")
    post = Post(
        key="reel-cover",
        kind=PostKind.REEL,
        media=[make_mp4(tmp_path / "r.mp4")],
        cover=cover,
        share_to_feed=False,
    )
    result = await publish_post(post, publisher=make_publisher(), states=states)

    [container] = fake_graph.containers.values()
    assert container.params["cover_url"].endswith(".jpg")
    assert container.params["share_to_feed"] == "false"
    assert result.changes == ["cover.png: converted PNG to JPEG"]  # not padded to 4:5
