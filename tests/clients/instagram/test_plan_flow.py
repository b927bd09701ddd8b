"""Scheduled posting end to end: a plan with a library folder, a real aioftp server, the loopback
fake Graph API, an AgentManager with a FunctionModel, a JobService on SQLite driven by a manual
clock (scheduler ticks and worker drains by hand, nothing waits on the wall clock), and the jobs
API through httpx's ASGI transport."""

from __future__ import annotations

import io
import random
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.character import Character
from carrier.fleet.model import ChangeKind
from carrier.jobs import Job, JobService, JobState, ManualClock, Scheduler, SQLiteJobStore
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from carrier.types import MemoryKind, MemoryStatus
from clients.instagram import InstagramClient, parse_config
from clients.instagram.drafts import post_memory_id
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.graph import GraphPublisher
from clients.instagram.jobs import (
    NOTICE_JOB_KIND,
    POST_JOB_KIND,
    PUBLISH_JOB_KIND,
    register_instagram_jobs,
)
from clients.instagram.library import MediaLibrary
from tests.clients.instagram.helpers import make_image

ADMIN = "admin-token-for-the-plan-tests"
T0 = datetime(2025, 6, 2, 8, 0, tzinfo=UTC)  # a Monday, 08:00 UTC

CAPTIONS = {
    "01-ferry": "fog came in at six and never left.\nthe ferry horn did all the talking.\n"
    "portra 400, om-2. #35mm #filmphotography #portra400 #fog #ferry #lisbon #atlantic #grain",
    "02-bakery": "the bakery opens at seven. the queue starts at half past six.\nnobody minds.",
    "03-tram": "i waited two hours for the tram to line up with this light.\nit never came.",
}


def character(instagram: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "Lumen",
        "bio": ["Lumen shoots film and travels slowly."],
        "adjectives": ["patient", "observant"],
        "topics": ["film photography", "slow travel"],
        "style": {"post": ["lowercase, short lines", "at most five hashtags"]},
        "postExamples": ["fog came in at six and never left.", "last frame of the roll."],
        "clients": ["instagram"],
        "clientConfig": {"instagram": {"publisher": "graph", **instagram}},
    }


def caption_for(request: ModelRequest) -> str:
    """The fake model: a caption per library file (found by its name in the prompt)."""
    prompt = str(request.messages[-1].content)
    for stem, caption in CAPTIONS.items():
        if stem in prompt:
            return caption
    return "an upload, written by the model.\nhp5 pushed to 1600."


class Clock(ManualClock):
    """The jobs' manual clock, also the publisher's: its sleeps (container polls) advance it."""

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)


@pytest.fixture
def clock() -> Clock:
    """Overrides the Instagram tests' clock: one manual time for publisher, jobs and quota."""
    return Clock(T0)


@dataclass
class World:
    manager: AgentManager
    service: JobService
    clock: Clock
    model: FunctionModel
    graph: FakeGraphAPI
    library: Path
    ftp_root: Path
    agent_id: str
    http: httpx.AsyncClient
    answer: Callable[[ModelRequest], str] = caption_for
    clients: list[InstagramClient] = field(default_factory=list)

    @property
    def jobs(self) -> SQLiteJobStore:
        assert isinstance(self.service.store, SQLiteJobStore)
        return self.service.store

    @property
    def client(self) -> InstagramClient:
        client = self.manager.client(self.agent_id, "instagram")
        assert isinstance(client, InstagramClient)
        return client

    async def run(self, *, advance: timedelta = timedelta(0)) -> None:
        """Move the clock, let the scheduler materialize what is due and drain the worker."""
        self.clock.advance(advance.total_seconds())
        await self.service.scheduler.tick()
        await self.service.worker.drain()

    async def jobs_of(self, kind: str) -> list[Job]:
        return await self.jobs.list_jobs(kind=kind, limit=None)

    async def first(self, kind: str) -> Job:
        """The earliest job of ``kind`` (a schedule keeps its next one waiting too)."""
        return min(await self.jobs_of(kind), key=lambda j: j.run_at)

    async def only(self, kind: str) -> Job:
        [job] = await self.jobs_of(kind)
        return job


@pytest.fixture
async def make_world(
    tmp_path: Path,
    store: SQLiteStore,
    make_publisher: Callable[..., GraphPublisher],
    fake_graph: FakeGraphAPI,
    ftp_root: Path,
    clock: Clock,
) -> AsyncIterator[Callable[..., Any]]:
    opened: list[tuple[AgentManager, JobService, httpx.AsyncClient]] = []
    library = tmp_path / "library"
    for stem in CAPTIONS:
        make_image(library / f"{stem}.jpg")
    (library / "01-ferry.txt").write_text("the Cacilhas ferry, portra 400", encoding="utf-8")
    (library / ".hidden.jpg").write_bytes(b"not media")

    async def make(plan: dict[str, Any], **instagram: Any) -> World:
        jobs = SQLiteJobStore(path=tmp_path / "jobs.db", clock=clock)
        service = JobService(
            store=jobs, scheduler=Scheduler(store=jobs, clock=clock, rng=random.Random(7))
        )
        model = FunctionModel(lambda r: world.answer(r))

        def factory(runtime: Any, config: Any, environ: Any) -> InstagramClient:
            return InstagramClient(
                runtime=runtime,
                config=parse_config(config),
                environ=environ,
                publisher=make_publisher(),
            )

        settings = load_settings(
            {"CARRIER_DATA_DIR": str(tmp_path / "data"), "CARRIER_ADMIN_TOKEN": ADMIN}
        )
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ={},
            model_factory=lambda c: model,
            client_factories={"instagram": factory},
        )
        register_instagram_jobs(service, manager)
        app = create_app(
            manager,
            settings,
            api_settings=ApiSettings(rate_per_minute=6000, rate_burst=1000, token_cache_seconds=0),
        )
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=("198.51.100.7", 40000)),
            base_url="http://localhost",
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
        opened.append((manager, service, http))
        data = character({**instagram, "plan": {**plan}})
        data["clientConfig"]["instagram"]["plan"].setdefault("media", {"library": str(library)})
        record = await manager.create(Character.model_validate(data))
        world = World(
            manager=manager,
            service=service,
            clock=clock,
            model=model,
            graph=fake_graph,
            library=library,
            ftp_root=ftp_root,
            agent_id=record.id,
            http=http,
        )
        status = await manager.start(record.id)
        assert status.clients == ["instagram"], status.skipped
        await world.run()  # the service starts at 08:00: schedules get their first job
        return world

    yield make
    for manager, service, http in opened:
        await http.aclose()
        await manager.close()
        await service.stop(grace_s=0)


CRON_9AM = {"schedule": {"cron": "0 9 * * *", "timezone": "UTC"}}


async def test_plan_dry_run_records_the_would_be_post_and_publishes_nothing(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({**CRON_9AM, "dryRun": True})
    [schedule] = await w.jobs.list_schedules()
    assert schedule.name == f"instagram:{w.agent_id}:plan" and schedule.kind == POST_JOB_KIND

    await w.run()  # 08:00: the 09:00 job exists, not yet due
    post = await w.first(POST_JOB_KIND)
    assert post.state is JobState.PENDING and post.run_at == T0 + timedelta(hours=1)
    assert await w.jobs_of(PUBLISH_JOB_KIND) == []

    await w.run(advance=timedelta(hours=1))

    post = await w.jobs.get(post.id) or post
    publish = await w.only(PUBLISH_JOB_KIND)
    assert post.state is JobState.SUCCEEDED and publish.state is JobState.SUCCEEDED
    assert publish.result is not None and publish.result["dry_run"] is True
    assert publish.result["media"] == ["01-ferry.jpg"]
    would_be = publish.result["caption"]
    assert would_be.startswith("fog came in at six")
    assert len(re.findall(r"#\w+", would_be)) == 5  # the hashtag cap (default 5)
    # Nothing went out: no upload, no container, no publish.
    assert w.graph.publish_calls == 0 and w.graph.containers == {}
    assert list((w.ftp_root / "media").iterdir()) == []
    memory = await w.manager.store.get_memory(post_memory_id(w.agent_id, post.id))
    assert memory is not None and memory.kind is MemoryKind.POST
    assert memory.content.text == would_be and memory.content.metadata["dry_run"] is True
    assert memory.content.metadata["media_id"] is None
    # The caption came from the agent's model, asked for a caption with the file's notes.
    [request] = [r for r in w.model.requests if r.purpose == "caption"]
    assert "the Cacilhas ferry" in request.query
    prompt = str(request.messages[0].content)  # the persona and the rules
    assert "lowercase, short lines" in prompt and "slow travel" in prompt
    assert "the Cacilhas ferry" in str(request.messages[1].content)  # the notes: data
    # A rehearsal does not use up the real library.
    library = w.client.library
    assert library is not None
    assert await library.used() == {}
    assert list(await library.used(dry_run=True)) == ["01-ferry.jpg"]


async def test_plan_approval_through_the_api_publishes_exactly_once(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({**CRON_9AM, "approval": "required", "approvalExpiry": "6h"})
    await w.run(advance=timedelta(hours=1))

    post = await w.first(POST_JOB_KIND)
    assert post.state is JobState.AWAITING_APPROVAL
    assert post.approval_expires_at == T0 + timedelta(hours=7)
    assert await w.jobs_of(PUBLISH_JOB_KIND) == [] and w.graph.publish_calls == 0
    notice = await w.only(NOTICE_JOB_KIND)  # no Discord here: nobody to tell
    assert notice.state is JobState.SUCCEEDED and notice.result == {"sent": {}}

    listed = await w.http.get("/jobs", params={"state": "awaiting_approval"})
    assert listed.status_code == 200, listed.text
    [shown] = listed.json()
    assert shown["id"] == post.id and shown["kind"] == POST_JOB_KIND
    draft = shown["payload"]["draft"]
    assert draft["caption"].startswith("fog came in") and draft["library_file"] == "01-ferry.jpg"
    assert draft["media"] == [str(w.library / "01-ferry.jpg")] and draft["dry_run"] is False

    edited = "fog, ferry, six o'clock.\nportra 400 #35mm"
    approved = await w.http.post(f"/jobs/{post.id}/approve", json={"caption": edited})
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] == "pending" and approved.json()["approved_at"]

    await w.run()

    [published] = w.graph.published
    assert published["caption"] == edited and w.graph.publish_calls == 1
    post = await w.jobs.get(post.id) or post
    publish = await w.only(PUBLISH_JOB_KIND)
    assert post.state is JobState.SUCCEEDED and post.result is not None
    assert post.result["publish_job_id"] == publish.id and post.result["approved"] is True
    assert publish.state is JobState.SUCCEEDED and publish.result is not None
    assert publish.result["media_id"] == published["id"]
    memory = await w.manager.store.get_memory(post_memory_id(w.agent_id, post.id))
    assert memory is not None and memory.content.text == edited
    assert memory.content.metadata["permalink"] == published["permalink"]
    assert memory.content.metadata["media_id"] == published["id"]
    assert memory.content.metadata["caption_by"] == "operator"

    # Never twice: approving again is refused, the publish job is keyed by the post job, and
    # running the publish handler again finds the post already out.
    again = await w.http.post(f"/jobs/{post.id}/approve", json={})
    assert again.status_code == 409 and again.json()["error"] == "job_state"
    same = await w.jobs.enqueue(
        PUBLISH_JOB_KIND, payload={}, idempotency_key=f"instagram:publish:{post.id}"
    )
    assert same.id == publish.id
    retried = await w.http.post(f"/jobs/{publish.id}/retry")
    assert retried.status_code == 409  # succeeded jobs are not run again
    await w.run(advance=timedelta(hours=2))
    assert w.graph.publish_calls == 1


async def test_plan_rejected_draft_never_posts(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({**CRON_9AM, "approval": "required"})
    await w.run(advance=timedelta(hours=1))
    post = await w.first(POST_JOB_KIND)

    rejected = await w.http.post(f"/jobs/{post.id}/reject", json={"reason": "wrong mood"})
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["state"] == "cancelled"
    assert rejected.json()["last_error"] == "rejected: wrong mood"

    await w.run(advance=timedelta(minutes=30))
    assert w.graph.publish_calls == 0 and await w.jobs_of(PUBLISH_JOB_KIND) == []
    assert await w.manager.store.get_memory(post_memory_id(w.agent_id, post.id)) is None
    late = await w.http.post(f"/jobs/{post.id}/approve")
    assert late.status_code == 409


async def test_plan_expired_draft_is_cancelled(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({**CRON_9AM, "approval": True, "approvalExpiry": "2h"})
    await w.run(advance=timedelta(hours=1))
    post = await w.first(POST_JOB_KIND)
    assert post.state is JobState.AWAITING_APPROVAL

    await w.run(advance=timedelta(hours=1, minutes=59))
    assert (await w.jobs.get(post.id) or post).state is JobState.AWAITING_APPROVAL
    await w.run(advance=timedelta(minutes=2))

    expired = await w.jobs.get(post.id)
    assert expired is not None and expired.state is JobState.CANCELLED
    assert expired.last_error is not None and expired.last_error.startswith("approval expired")
    assert w.graph.publish_calls == 0 and await w.jobs_of(PUBLISH_JOB_KIND) == []


async def test_plan_library_files_are_posted_once_in_order(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"schedule": {"interval": "1h"}})
    for _ in range(5):
        await w.run(advance=timedelta(hours=1))

    posts = sorted(await w.jobs_of(POST_JOB_KIND), key=lambda j: j.run_at)
    done = [j for j in posts if j.state is JobState.SUCCEEDED and j.result and "draft" in j.result]
    assert [j.result["draft"]["library_file"] for j in done if j.result] == [
        "01-ferry.jpg",
        "02-bakery.jpg",
        "03-tram.jpg",
    ]
    assert w.graph.publish_calls == 3
    assert [p["caption"].split("\n")[0] for p in w.graph.published] == [
        c.split("\n")[0] for c in CAPTIONS.values()
    ]
    skipped = [j for j in posts if j.result and "skipped" in j.result]
    assert skipped and "has been posted" in str(skipped[0].result)
    library = w.client.library
    assert library is not None
    used = await library.used()
    assert sorted(used) == ["01-ferry.jpg", "02-bakery.jpg", "03-tram.jpg"]
    assert await library.unused() == []
    # A new process (a new library object over the same store) agrees, and a job that runs
    # again gets the file it took, not another one.
    again = MediaLibrary(root=w.library, store=w.manager.store, agent_id=w.agent_id)
    first = done[0]
    pick = await again.take(first.id, now=w.clock())
    assert pick is not None and pick.name == "01-ferry.jpg"
    assert await again.take("a-new-job", now=w.clock()) is None


async def test_plan_too_similar_caption_fails_the_job_clearly(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({"schedule": {"interval": "1h"}})
    w.answer = lambda r: CAPTIONS["01-ferry"]  # the model repeats itself
    await w.run(advance=timedelta(hours=1))
    await w.run(advance=timedelta(hours=1))

    first, second = sorted(await w.jobs_of(POST_JOB_KIND), key=lambda j: j.run_at)[:2]
    assert first.state is JobState.SUCCEEDED
    assert second.state is JobState.FAILED and second.last_error is not None
    assert "too similar to a recent post" in second.last_error
    assert "PermanentFailure" in second.last_error
    assert w.graph.publish_calls == 1
    calls = [r for r in w.model.requests if r.purpose == "caption"]
    assert len(calls) == 3  # one for the first post, two (write, rewrite once) for the second
    assert "too close to a recent post" in str(calls[-1].messages[0].content)


async def test_upload_is_queued_posted_with_its_caption_and_marked_processed(
    make_world: Callable[..., Any], tmp_path: Path
) -> None:
    w: World = await make_world({"caption": {"maxHashtags": 2}})
    assert await w.jobs.list_schedules() == []  # a plan without schedule: uploads only
    image = make_image(tmp_path / "upload.jpg")
    at = T0 + timedelta(hours=3)
    sent = await w.http.post(
        f"/{w.agent_id}/media",
        files={"file": ("harbour.jpg", io.BytesIO(image.read_bytes()), "image/jpeg")},
        data={"caption": "harbour at dusk #a #b #c #d", "publish_at": at.isoformat()},
    )
    assert sent.status_code == 202, sent.text
    upload_id = sent.json()["id"]
    post = await w.first(POST_JOB_KIND)
    assert post.run_at == at and post.payload == {"source": "upload", "upload_id": upload_id}

    await w.run(advance=timedelta(hours=2))
    assert w.graph.publish_calls == 0
    await w.run(advance=timedelta(hours=1))

    [published] = w.graph.published
    assert published["caption"] == "harbour at dusk #a #b"
    upload = await w.manager.store.get_memory(upload_id)
    assert upload is not None and upload.status is MemoryStatus.PROCESSED
    assert [r for r in w.model.requests if r.purpose == "caption"] == []

    # An upload without a caption gets one from the model; a restart queues nothing twice.
    again = await w.http.post(
        f"/{w.agent_id}/media",
        files={"file": ("ferry.jpg", io.BytesIO(image.read_bytes()), "image/jpeg")},
    )
    assert again.status_code == 202
    assert len(await w.client.queue_waiting_uploads()) == 1  # the same job, not a new one
    await w.run()
    assert w.graph.publish_calls == 2
    assert w.graph.published[1]["caption"].startswith("an upload, written by the model")
    assert len(await w.jobs_of(POST_JOB_KIND)) == 2


async def test_upload_stored_before_the_publisher_ran_is_queued_at_start(
    make_world: Callable[..., Any], tmp_path: Path
) -> None:
    w: World = await make_world({})
    await w.manager.stop(w.agent_id)
    image = make_image(tmp_path / "late.jpg")
    sent = await w.http.post(
        f"/{w.agent_id}/media",
        files={"file": ("late.jpg", io.BytesIO(image.read_bytes()), "image/jpeg")},
        data={"caption": "kept for later"},
    )
    assert sent.status_code == 202  # stored: the instagram client queues it when it starts
    # and a process running it elsewhere (a worker beside a web) hears of it at once
    changes = await (await w.manager.fleet()).changes(0)
    [told] = [c for c in changes if c.kind == ChangeKind.UPLOADS]
    assert told.agent_id == w.agent_id and told.detail == {"media_id": sent.json()["id"]}
    await w.manager.start(w.agent_id)
    await w.run()
    assert [p["caption"] for p in w.graph.published] == ["kept for later"]


async def test_plan_schedules_follow_config_changes(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"schedule": {"at": ["2025-06-02 12:00", "2025-06-03T09:00:00Z"]}})
    names = sorted(s.name for s in await w.jobs.list_schedules())
    assert names == [
        f"instagram:{w.agent_id}:plan:2025-06-02T12:00:00+00:00",
        f"instagram:{w.agent_id}:plan:2025-06-03T09:00:00+00:00",
    ]
    config = await w.manager.effective_client_config(w.agent_id, "instagram")
    config["plan"] = {
        "schedule": {"cron": "30 18 * * *", "timezone": "Europe/Lisbon"},
        "media": {"library": str(w.library), "order": "random"},
    }
    await w.client.update_config(config)
    [schedule] = await w.jobs.list_schedules()
    assert schedule.name == f"instagram:{w.agent_id}:plan"
    assert schedule.spec.describe() == "cron '30 18 * * *' (Europe/Lisbon)"
    await w.client.update_config({**config, "plan": {"enabled": False}})
    assert await w.jobs.list_schedules() == []


async def test_publish_waits_for_the_quota_without_using_an_attempt(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world(CRON_9AM)
    w.graph.quota_usage = w.graph.quota_total  # Instagram says the day's posts are used up
    await w.run(advance=timedelta(hours=1))
    publish = await w.only(PUBLISH_JOB_KIND)
    assert publish.state is JobState.PENDING and publish.attempts == 0
    assert publish.run_at > w.clock() and w.graph.publish_calls == 0
    assert "50 of 50 posts used" in (publish.history[-1].note or "")

    w.graph.quota_usage = 0
    w.clock.set(publish.run_at)
    await w.service.worker.drain()
    assert (await w.jobs.get(publish.id) or publish).state is JobState.SUCCEEDED
    assert w.graph.publish_calls == 1


async def test_slots_missed_while_the_agent_was_stopped_post_once_not_in_a_burst(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({"schedule": {"interval": "1h"}})
    await w.manager.stop(w.agent_id)
    for _ in range(3):
        await w.run(advance=timedelta(hours=1))
    waiting = [
        j
        for j in await w.jobs_of(POST_JOB_KIND)
        if "not running in this process" in (j.history[-1].note or "")
    ]
    assert len(waiting) == 3
    assert all(j.state is JobState.PENDING and j.attempts == 0 for j in waiting)

    await w.manager.start(w.agent_id)
    w.clock.advance(600)  # the waits end
    await w.service.worker.drain()

    assert w.graph.publish_calls == 1
    results = [(await w.jobs.get(j.id) or j).result or {} for j in waiting]
    assert sum("draft" in r for r in results) == 1
    assert sum("later slot" in str(r.get("skipped")) for r in results) == 2


async def test_a_deleted_agents_plan_stops(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"schedule": {"interval": "1h"}})
    assert await w.jobs.list_schedules() != []
    await w.manager.delete(w.agent_id)
    await w.run(advance=timedelta(hours=1))
    post = await w.first(POST_JOB_KIND)
    assert post.state is JobState.FAILED and "no longer exists" in (post.last_error or "")
    assert await w.jobs.list_schedules() == []
