"""The instagrapi publisher against FakeInstagram, which answers instagrapi's own HTTP sessions:
the real instagrapi login, session checks, uploads and error mapping run unchanged."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from carrier.memory.sqlite import SQLiteStore
from clients.instagram import Post, PostKind, publish_post
from clients.instagram.config import InstagrapiSettings
from clients.instagram.errors import CoolingDown, OperatorActionRequired, PublishUncertain
from clients.instagram.fake.private import FakeInstagram
from clients.instagram.post import Phase, PublishStates
from clients.instagram.private import InstagrapiPublisher, SessionVault
from tests.clients.instagram.helpers import ManualClock, make_image, make_mp4

KEY = Fernet.generate_key()
Make = Callable[..., InstagrapiPublisher]


@pytest.fixture
def world() -> FakeInstagram:
    return FakeInstagram()


@pytest.fixture
def make(world: FakeInstagram, store: SQLiteStore, clock: ManualClock) -> Make:
    """A new publisher each call, as a restarted process would build it."""

    def build(**kwargs: object) -> InstagrapiPublisher:
        options: dict[str, object] = {
            "username": world.username,
            "password": world.password,
            "store": store,
            "agent_id": "agent-lumen",
            "fernet_key": KEY,
            "settings": InstagrapiSettings(delay_range=(0.0, 0.001), configure_timeout=0),
            "client_factory": world.client_factory,
            "clock": clock,
        }
        options.update(kwargs)
        return InstagrapiPublisher(**options)  # type: ignore[arg-type]

    return build


def album(tmp_path: Path, key: str, caption: str = "two frames") -> Post:
    media = [make_image(tmp_path / key / "a.jpg"), make_image(tmp_path / key / "b.png", fmt="PNG")]
    return Post(key=key, kind=PostKind.CAROUSEL, media=media, caption=caption)


async def test_photo_album_and_reel_use_the_matching_instagrapi_uploads(
    make: Make, states: PublishStates, world: FakeInstagram, tmp_path: Path
) -> None:
    publisher = make()
    photo = Post(
        key="p", kind=PostKind.PHOTO, media=[make_image(tmp_path / "p.jpg")], caption="fog"
    )
    reel = Post(key="r", kind=PostKind.REEL, media=[make_mp4(tmp_path / "r.mp4")], caption="ferry")

    results = [
        await publish_post(photo, publisher=publisher, states=states),
        await publish_post(album(tmp_path, "a"), publisher=publisher, states=states),
        await publish_post(reel, publisher=publisher, states=states),
    ]

    assert [m["media_type"] for m in world.media] == [1, 8, 2]
    configures = [r.split("/api/v1/media/")[1] for r in world.requests if "/media/configure" in r]
    assert configures == ["configure/", "configure_sidecar/", "configure_to_clips/"]
    assert [m["caption"]["text"] for m in world.media] == ["fog", "two frames", "ferry"]
    for result, media in zip(results, world.media, strict=True):
        assert result.media_id == media["id"]
        assert result.permalink == f"https://www.instagram.com/p/{media['code']}/"
    assert world.password_logins == 1
    client = await publisher.login()
    assert client.delay_range == [0.0, 0.001]


async def test_the_session_is_stored_encrypted_and_reused_after_a_restart(
    make: Make, states: PublishStates, world: FakeInstagram, store: SQLiteStore, tmp_path: Path
) -> None:
    await publish_post(album(tmp_path, "one"), publisher=make(), states=states)

    raw = await store.get_setting(f"instagram:agent-lumen:instagrapi:{world.username}:session")
    [session_id] = world.sessions
    assert session_id not in json.dumps(raw) and world.password not in json.dumps(raw)
    decrypted = json.loads(Fernet(KEY).decrypt(raw["token"].encode()))
    assert decrypted["authorization_data"]["sessionid"] == session_id

    await publish_post(album(tmp_path, "two"), publisher=make(), states=states)  # a new process

    assert world.password_logins == 1  # the stored session was reused
    assert len(world.media) == 2


async def test_a_session_that_cannot_be_decrypted_is_replaced(
    make: Make,
    states: PublishStates,
    world: FakeInstagram,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await publish_post(album(tmp_path, "one"), publisher=make(), states=states)
    await publish_post(
        album(tmp_path, "two"), publisher=make(fernet_key=Fernet.generate_key()), states=states
    )
    assert world.password_logins == 2
    assert "cannot be decrypted" in caplog.text


async def test_an_expired_session_is_replaced_by_a_fresh_login(
    make: Make, states: PublishStates, world: FakeInstagram, store: SQLiteStore, tmp_path: Path
) -> None:
    await publish_post(album(tmp_path, "one"), publisher=make(), states=states)
    world.expire_sessions()

    await publish_post(album(tmp_path, "two"), publisher=make(), states=states)

    assert world.password_logins == 2 and len(world.media) == 2
    vault = SessionVault(store, "agent-lumen", world.username, KEY)
    stored = await vault.load()
    assert stored is not None and stored["authorization_data"]["sessionid"] in world.sessions


async def test_login_required_mid_upload_relogs_in_once_and_posts_once(
    make: Make, states: PublishStates, world: FakeInstagram, tmp_path: Path
) -> None:
    publisher = make()
    await publisher.login()
    world.fail_next["configure_sidecar"] = "login_required"

    await publish_post(album(tmp_path, "one"), publisher=publisher, states=states)

    assert world.password_logins == 2 and len(world.media) == 1


@pytest.mark.parametrize(
    ("outcome", "password", "expected"),
    [
        ("challenge", None, "security challenge"),
        ("two_factor", None, "INSTAGRAM_TOTP_SEED"),
        ("ok", "wrong password", "Set INSTAGRAM_PASSWORD"),
    ],
)
async def test_login_problems_say_what_the_operator_must_do(
    make: Make,
    states: PublishStates,
    world: FakeInstagram,
    tmp_path: Path,
    outcome: str,
    password: str | None,
    expected: str,
) -> None:
    world.login_outcome = outcome
    publisher = make(password=password) if password else make()

    with pytest.raises(OperatorActionRequired, match=expected) as info:
        await publish_post(album(tmp_path, "x"), publisher=publisher, states=states)

    assert f"@{world.username}" in str(info.value) and "start the client again" in str(info.value)
    assert world.media == [] and world.password not in str(info.value)


@pytest.mark.parametrize(
    ("fault", "wait"),
    [
        ("please_wait", timedelta(minutes=60)),
        ("rate_limit", timedelta(minutes=60)),
        ("feedback_required", timedelta(hours=24)),
    ],
)
async def test_throttling_starts_a_persisted_cooldown_instead_of_retrying(
    make: Make,
    states: PublishStates,
    world: FakeInstagram,
    clock: ManualClock,
    tmp_path: Path,
    fault: str,
    wait: timedelta,
) -> None:
    world.fail_next["configure_sidecar"] = fault
    post = album(tmp_path, "x")

    with pytest.raises(CoolingDown) as info:
        await publish_post(post, publisher=make(), states=states)
    assert info.value.retry_at == clock.now + wait
    assert world.media == []
    state = await states.load("x")
    assert state is not None and state.phase is Phase.NEW  # refused: nothing was posted

    sent = len(world.requests)
    with pytest.raises(CoolingDown):  # a restarted process respects the stored cooldown
        await publish_post(post, publisher=make(), states=states)
    assert len(world.requests) == sent  # not a single request to Instagram

    clock.now = info.value.retry_at + timedelta(seconds=1)
    await publish_post(post, publisher=make(), states=states)
    assert len(world.media) == 1


async def test_an_upload_lost_in_transit_is_found_not_posted_twice(
    make: Make, states: PublishStates, world: FakeInstagram, tmp_path: Path
) -> None:
    world.fail_next["configure_sidecar"] = "drop_after"  # posted, but the answer never arrives

    result = await publish_post(
        album(tmp_path, "x", "one true detail"), publisher=make(), states=states
    )

    assert len(world.media) == 1 and result.recovered
    assert result.media_id == world.media[0]["id"]


async def test_an_upload_that_never_arrived_is_uncertain_then_posted_once(
    make: Make, states: PublishStates, world: FakeInstagram, tmp_path: Path
) -> None:
    world.fail_next["configure_sidecar"] = "drop"  # lost before Instagram saw it
    post = album(tmp_path, "x")

    with pytest.raises(PublishUncertain):
        await publish_post(post, publisher=make(), states=states)
    assert world.media == []

    result = await publish_post(post, publisher=make(), states=states)
    assert len(world.media) == 1 and not result.recovered
