"""Posting plans (validation, schedules), the media library and the caption writer's rules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from carrier.character import Character
from carrier.errors import ConfigError
from carrier.jobs import CronSpec, IntervalSpec, OnceSpec
from carrier.llm.fake import FunctionModel, ScriptedModel
from carrier.llm.offline import OfflineProvider
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.types import Content, Memory, MemoryKind
from clients.instagram import parse_config
from clients.instagram.errors import CaptionRejected
from clients.instagram.library import MediaLibrary
from clients.instagram.plan import PostingPlan, parse_duration
from clients.instagram.writer import CaptionRequest, write_caption
from tests.clients.instagram.helpers import make_image

AGENT = "agent-lumen"
NOW = datetime(2025, 6, 2, 8, 0, tzinfo=UTC)
LUMEN = Character.model_validate(
    {
        "name": "Lumen",
        "system": "You are Lumen, a film photographer.",
        "bio": ["Lumen shoots 35mm film."],
        "adjectives": ["patient"],
        "topics": ["film photography", "slow travel", "home developing"],
        "style": {"all": ["specific"], "post": ["lowercase, short lines"]},
        "postExamples": [
            "fog came in at six and never left.\nthe ferry horn did all the talking.",
            "the bakery opens at seven. the queue starts at half past six.",
            "developed a roll of hp5 in the kitchen tonight.",
        ],
    }
)


# -- the plan's configuration ---------------------------------------------------------------


def problems(config: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(config)
    return str(caught.value)


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        ({"schedule": {"cron": "every day"}}, "plan.schedule.cron: Value error, not a cron"),
        (
            {"schedule": {"cron": "0 9 * * *", "interval": "1h"}},
            "plan.schedule: Value error, give exactly one of cron, interval or at (found: cron, "
            "interval)",
        ),
        ({"schedule": {}}, "give exactly one of cron, interval or at (found: none)"),
        (
            {"schedule": {"interval": {"min": "3h", "max": "90m"}}, "media": {"library": "x"}},
            "plan.schedule.interval: Value error, interval max (5400 s) is below min (10800 s)",
        ),
        (
            {"schedule": {"interval": "1h", "jitter": "5m"}, "media": {"library": "x"}},
            "jitter applies to cron schedules only",
        ),
        (
            {"schedule": {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}},
            "plan.schedule.timezone: Value error, unknown time zone 'Mars/Olympus'",
        ),
        ({"schedule": {"cron": "0 9 * * *"}}, "a schedule needs media to post: set media.library"),
        ({"approval": "maybe"}, "plan.approval: Value error, expected 'required' or 'none'"),
        ({"approvalExpiry": "a week"}, "expected a duration like 90, '90m', '1h30m' or '2d'"),
        ({"caption": {"similarity": 1.5}}, "plan.caption.similarity: Input should be less than"),
        ({"media": {"order": "shuffled"}}, "plan.media.order: Input should be 'sequential'"),
        ({"shedule": {"cron": "0 9 * * *"}}, "plan.shedule: Extra inputs are not permitted"),
    ],
)
def test_plan_config_errors_name_the_field_and_the_fix(
    plan: dict[str, object], expected: str
) -> None:
    message = problems({"plan": plan})
    assert message.startswith("invalid Instagram configuration:")
    assert f"clientConfig.instagram.{expected}" in message or expected in message


def test_plan_config_accepts_camel_and_snake_case_and_approval_words() -> None:
    config = parse_config(
        {
            "requireApproval": "required",
            "timezone": "Europe/Lisbon",
            "plan": {
                "schedule": {"cron": "30 9 * * mon-fri", "jitter": "15m"},
                "media": {"library": "media/lumen", "order": "random"},
                "caption": {"max_hashtags": 3, "recentPosts": 5, "similarity": 0.8},
                "approval_expiry": "1h30m",
                "dryRun": True,
            },
        }
    )
    assert config.require_approval is True and config.timezone == "Europe/Lisbon"
    plan = config.plan
    assert plan is not None and plan.approval is None and plan.dry_run is True
    assert plan.approval_expiry == 5400 and plan.caption.max_hashtags == 3
    assert plan.caption.recent_posts == 5 and plan.media.order == "random"
    assert parse_config({"approval": "none"}).require_approval is False
    assert parse_config({"plan": {"approval": "required"}}).plan == PostingPlan(approval=True)
    assert problems({"timezone": "Nowhere/Land"}).endswith(
        "timezone: unknown time zone 'Nowhere/Land'; expected e.g. 'Europe/Lisbon'"
    )


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        (90, 90.0),
        ("90", 90.0),
        ("90m", 5400.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1.5h", 5400.0),
    ],
)
def test_durations(raw: object, seconds: float) -> None:
    assert parse_duration(raw) == seconds


def test_plan_schedules_cron_in_the_accounts_time_zone() -> None:
    plan = PostingPlan.model_validate(
        {"schedule": {"cron": "0 9 * * *", "jitter": "10m"}, "media": {"library": "x"}}
    )
    [schedule] = plan.schedules(AGENT, default_tz="Europe/Lisbon")
    assert schedule.name == f"instagram:{AGENT}:plan" and schedule.kind == "instagram.post"
    assert schedule.agent_id == AGENT and schedule.payload == {"source": "plan"}
    assert schedule.spec == CronSpec(expr="0 9 * * *", tz="Europe/Lisbon", jitter_s=600)
    assert (
        PostingPlan.model_validate({**plan.model_dump(), "enabled": False}).schedules(AGENT) == []
    )


def test_plan_schedules_interval_with_jitter_and_one_off_times() -> None:
    plan = PostingPlan.model_validate(
        {"schedule": {"interval": {"min": "90m", "max": "3h"}}, "media": {"library": "x"}}
    )
    [schedule] = plan.schedules(AGENT)
    assert schedule.spec == IntervalSpec(min_s=5400, max_s=10800)

    plan = PostingPlan.model_validate(
        {
            "schedule": {
                "at": ["2025-06-03 18:30", "2025-06-01T09:00:00Z"],
                "timezone": "Asia/Tokyo",
            },
            "media": {"library": "x"},
        }
    )
    first, second = plan.schedules(AGENT)
    assert first.spec == OnceSpec(at=datetime(2025, 6, 1, 9, 0, tzinfo=UTC))
    assert second.spec == OnceSpec(at=datetime(2025, 6, 3, 9, 30, tzinfo=UTC))  # 18:30 in Tokyo
    assert second.name == f"instagram:{AGENT}:plan:2025-06-03T09:30:00+00:00"


# -- the media library ----------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "library"
    for name in ("b.jpg", "A.png", "sub/c.jpeg"):
        make_image(root / name)
    (root / "clip.mp4").write_bytes(b"x")
    (root / "notes.txt").write_text("not media", encoding="utf-8")
    (root / ".thumbs" / "d.jpg").parent.mkdir()
    (root / ".thumbs" / "d.jpg").write_bytes(b"hidden")
    (root / "b.txt").write_text("harbour at dusk, hp5", encoding="utf-8")
    yield root


async def test_library_takes_each_file_once_in_order_with_notes(
    folder: Path, store: SQLiteStore
) -> None:
    library = MediaLibrary(root=folder, store=store, agent_id=AGENT)
    assert library.files() == ["A.png", "b.jpg", "clip.mp4", "sub/c.jpeg"]
    picks = [await library.take(f"job-{i}", now=NOW) for i in range(5)]
    assert [p.name if p else None for p in picks] == [
        "A.png",
        "b.jpg",
        "clip.mp4",
        "sub/c.jpeg",
        None,
    ]
    assert picks[1] is not None and picks[1].notes == "harbour at dusk, hp5"
    again = await library.take("job-1", now=NOW)  # a rerun gets its own file back
    assert again is not None and again.name == "b.jpg"
    used = await library.used()
    assert used["b.jpg"] == {"job": "job-1", "at": NOW.isoformat()}
    assert await library.used(dry_run=True) == {}


async def test_library_random_order_never_repeats(folder: Path, store: SQLiteStore) -> None:
    library = MediaLibrary(root=folder, store=store, agent_id=AGENT, order="random")
    names = []
    for i in range(4):
        pick = await library.take(f"job-{i}", now=NOW, dry_run=True)
        assert pick is not None
        names.append(pick.name)
    assert sorted(names) == library.files()
    assert await library.take("job-4", now=NOW, dry_run=True) is None
    assert await library.used() == {}  # the dry run kept its own record


# -- the caption writer ---------------------------------------------------------------------


def request(**kwargs: object) -> CaptionRequest:
    options: dict[str, object] = {"key": "job-1", "media_name": "ferry.jpg"}
    options.update(kwargs)
    return CaptionRequest(**options)  # type: ignore[arg-type]


async def add_post(store: SQLiteStore, text: str, *, dry_run: bool = False) -> None:
    await store.add_memory(
        Memory(
            agent_id=AGENT,
            room_id="feed",
            entity_id=AGENT,
            kind=MemoryKind.POST,
            content=Content(text=text, source="instagram", metadata={"dry_run": dry_run}),
        )
    )


async def write(store: SQLiteStore, model: FunctionModel, **kwargs: object) -> str:
    written = await write_caption(
        character=LUMEN,
        model=model,
        embedder=HashEmbedder(),
        store=store,
        agent_id=AGENT,
        request=request(**kwargs),
    )
    return written.text


async def test_caption_hashtags_are_capped(store: SQLiteStore) -> None:
    tags = " ".join(f"#tag{i}" for i in range(12))
    model = FunctionModel(lambda r: f'"Caption: low tide at the pier.\n{tags} #tag1"')
    text = await write(store, model)
    assert text == "low tide at the pier.\n#tag0 #tag1 #tag2 #tag3 #tag4"
    assert len(re.findall(r"#\w+", await write(store, model, max_hashtags=2))) == 2
    assert "#" not in await write(store, model, max_hashtags=0)
    [first, *_] = model.requests
    assert first.purpose == "caption" and first.query == "ferry"
    assert [m.role for m in first.messages] == ["system", "user"]
    prompt = str(first.messages[0].content)  # the persona and the rules
    assert "at most 5 hashtags" in prompt and "lowercase, short lines" in prompt
    assert "fog came in at six" in prompt and "slow travel" in prompt
    assert '<media kind="photo" file="ferry.jpg"></media>' in str(first.messages[1].content)


async def test_caption_too_similar_to_a_recent_post_is_written_again_once(
    store: SQLiteStore,
) -> None:
    recent = "fog came in at six and never left. the ferry horn did all the talking."
    await add_post(store, recent)
    model = ScriptedModel([recent, "blue hour on the river, hands too cold to wind on."])
    written = await write_caption(
        character=LUMEN,
        model=model,
        embedder=HashEmbedder(),
        store=store,
        agent_id=AGENT,
        request=request(),
    )
    assert written.text.startswith("blue hour") and written.attempts == 2
    assert written.similarity < 0.9
    system, data = (str(m.content) for m in model.requests[1].messages)
    assert "too close to a recent post" in system and recent not in system
    assert f"<recent_captions>\n<caption>{recent}</caption>\n</recent_captions>" in data
    assert f"<last_caption>{recent}</last_caption>" in data
    assert model.requests[1].query != model.requests[0].query  # another topic for offline


async def test_caption_still_too_similar_after_one_rewrite_is_refused_clearly(
    store: SQLiteStore,
) -> None:
    recent = "fog came in at six and never left."
    await add_post(store, recent)
    model = FunctionModel(lambda r: recent + " #fog")
    with pytest.raises(CaptionRejected) as caught:
        await write(store, model)
    message = str(caught.value)
    assert re.search(r"too similar to a recent post \(cosine 0\.9\d, the limit is 0\.9\)", message)
    assert "no usable caption after writing it twice" in message and len(model.requests) == 2
    # A lower threshold would refuse more; a higher one (or a dry-run-only record) accepts it.
    assert await write(store, FunctionModel(lambda r: recent), similarity=1.01) == recent


async def test_caption_similarity_ignores_dry_runs_unless_rehearsing(store: SQLiteStore) -> None:
    rehearsed = "the bakery opens at seven."
    await add_post(store, rehearsed, dry_run=True)
    model = FunctionModel(lambda r: rehearsed)
    assert await write(store, model) == rehearsed
    with pytest.raises(CaptionRejected):
        await write(store, model, dry_run=True)


async def test_caption_too_long_is_written_again_then_refused(store: SQLiteStore) -> None:
    long = "light " * 400
    model = ScriptedModel([long, "short this time."])
    assert await write(store, model) == "short this time."
    assert "Write a much shorter one" in str(model.requests[1].messages[0].content)
    with pytest.raises(CaptionRejected, match="at most 2200 are allowed"):
        await write(store, FunctionModel(lambda r: long))
    with pytest.raises(CaptionRejected, match="empty caption"):
        await write(store, FunctionModel(lambda r: "  "))


async def test_caption_from_the_offline_provider_is_a_post_example(store: SQLiteStore) -> None:
    offline = OfflineProvider(
        agent_name="Lumen",
        examples=[],
        embedder=HashEmbedder(),
        post_examples=LUMEN.post_examples,
    )
    written = await write_caption(
        character=LUMEN,
        model=offline,
        embedder=HashEmbedder(),
        store=store,
        agent_id=AGENT,
        request=request(notes="developed hp5 in the kitchen"),
    )
    assert written.offline and written.text == "developed a roll of hp5 in the kitchen tonight."


async def test_caption_template_can_be_overridden_by_the_character(store: SQLiteStore) -> None:
    custom = LUMEN.model_copy(
        update={"templates": {"instagramCaptionTemplate": "Caption {{media}} as {{agentName}}."}}
    )
    model = FunctionModel(lambda r: "ok")
    await write_caption(
        character=custom,
        model=model,
        embedder=HashEmbedder(),
        store=store,
        agent_id=AGENT,
        request=request(),
    )
    system, data = model.requests[0].messages
    assert system.role == "system" and system.content == (
        "Caption the media described in the user message, inside <media> as Lumen.\n"
    )
    assert '<media kind="photo" file="ferry.jpg"></media>' in str(data.content)
