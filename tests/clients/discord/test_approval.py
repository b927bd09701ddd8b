"""Drafts awaiting approval, posted in an approval channel with Approve/Reject buttons; clicks are
real INTERACTION_CREATE events (component type 3) from the fake Discord, the job store is SQLite
with a manual clock."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import discord
import pytest

from carrier.agents import AgentManager, AgentStatus
from carrier.errors import ClientError, ConfigError
from carrier.jobs import Job, JobState, ManualClock, SQLiteJobStore, Worker
from carrier.types import AgentRecord
from clients.discord.approval import ApprovalSettings, draft_message
from clients.discord.fake import payloads as p
from clients.discord.fake.payloads import ALL_PERMISSIONS, MEMBER_PERMISSIONS, Json
from clients.instagram.jobs import NOTICE_JOB_KIND, InstagramJobs
from tests.clients.discord.conftest import Harness
from tests.clients.instagram.helpers import make_image

T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
EPHEMERAL = 64
MANAGE_GUILD = str(discord.Permissions(manage_guild=True).value | int(MEMBER_PERMISSIONS))
_KINDS = itertools.count()


@pytest.fixture
async def jobs(tmp_path: Path, harness: Harness) -> AsyncIterator[SQLiteJobStore]:
    async with SQLiteJobStore(path=tmp_path / "jobs.db", clock=ManualClock(T0)) as store:
        harness.runtime.services["jobs"] = store
        yield store


async def draft_job(jobs: SQLiteJobStore, agent_id: str, image: Path, caption: str) -> Job:
    """A job parked for approval with an Instagram draft, as the worker leaves it."""
    kind = f"instagram.post.{next(_KINDS)}"
    job = await jobs.enqueue(kind, agent_id=agent_id, payload={"source": "plan"})
    await jobs.claim("w1", [kind], lease_s=60)
    await jobs.start(job.id, "w1")
    draft = {"caption": caption, "media": [str(image)], "kind": "photo", "dry_run": False}
    return await jobs.await_approval(
        job.id, "w1", payload={"draft": draft}, expires_at=datetime(2025, 6, 3, tzinfo=UTC)
    )


async def click(h: Harness, user: Json, message: Json, custom_id: str, permissions: str) -> Json:
    """``user`` clicks a button of ``message`` (as the bot sent it, components included)."""
    channel = int(message["channel_id"])
    data = h.fake.make_interaction(
        user, "-", channel=channel, options=None, permissions=permissions
    )
    data["type"] = 3
    data["data"] = {"custom_id": custom_id, "component_type": 2}
    data["message"] = message
    h.fake.rest.remember_interaction(data)
    count = len(h.fake.interaction_responses)
    await h.fake.dispatch("INTERACTION_CREATE", data, guild_id=h.guild.id)
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) > count)
    return h.fake.interaction_responses[-1]


async def post_draft(h: Harness, job: Job) -> Json:
    reference = await h.client.request_approval(job)
    sent = h.fake.sent[-1]
    assert reference == sent.message["id"]
    return {**sent.message, "components": sent.payload["components"]}


@pytest.fixture
def image(tmp_path: Path) -> Path:
    return make_image(tmp_path / "fog at the ferry.jpg", size=(400, 500))


async def test_approval_draft_is_posted_with_buttons_and_an_allowed_click_approves(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    await h.start({"approvalChannel": "showcase"})
    job = await draft_job(jobs, h.runtime.agent_id, image, "fog came in at six. @everyone")

    message = await post_draft(h, job)

    sent = h.fake.sent[-1]
    assert sent.channel_id == h.channel("showcase")
    assert sent.content.startswith(f"**Draft for Instagram** from Harbor \u00b7 job `{job.id}`")
    assert "> fog came in at six. @\u200beveryone" in sent.content
    assert "Media: fog at the ferry.jpg (photo)" in sent.content and "Expires <t:" in sent.content
    assert sent.payload["allowed_mentions"]["parse"] == []
    [row] = sent.payload["components"]
    buttons = [(b["label"], b["custom_id"], b["style"]) for b in row["components"]]
    assert buttons == [
        ("Approve", f"carrier:approve:{job.id}", 3),
        ("Reject", f"carrier:reject:{job.id}", 4),
    ]
    assert sent.payload["attachments"][0]["filename"] == "fog at the ferry.jpg"

    response = await click(h, h.ana, message, f"carrier:approve:{job.id}", MANAGE_GUILD)

    assert response["type"] == 7  # the message is updated: verdict added, buttons gone
    assert response["data"]["content"].endswith("**Approved** by ana")
    assert response["data"]["components"] == []
    approved = await jobs.get(job.id)
    assert approved is not None and approved.state is JobState.PENDING and approved.approved
    assert approved.history[-1].note == f"approved by discord:ana ({h.ana['id']})"


async def test_approval_click_by_another_user_is_refused(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    await h.start({"approvalChannel": str(h.channel("showcase")), "approvalRoles": ["Editors"]})
    job = await draft_job(jobs, h.runtime.agent_id, image, "blue hour")
    message = await post_draft(h, job)

    for action in ("approve", "reject"):
        response = await click(h, h.bob, message, f"carrier:{action}:{job.id}", MEMBER_PERMISSIONS)
        assert response["type"] == 4 and response["data"]["flags"] & EPHEMERAL
        assert (
            "Manage Server permission or an approval role (editors)" in response["data"]["content"]
        )
    still = await jobs.get(job.id)
    assert still is not None and still.state is JobState.AWAITING_APPROVAL


async def test_approval_role_members_may_reject_and_a_decided_draft_stays_decided(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    editors = h.fake.ids()
    h.guild.roles.append(p.role(editors, "Editors"))
    h.guild.members[int(h.bob["id"])]["roles"] = [str(editors)]
    await h.start({"approvalChannel": "#showcase", "approvalRoles": [str(editors)]})
    job = await draft_job(jobs, h.runtime.agent_id, image, "grain")
    message = await post_draft(h, job)

    response = await click(h, h.bob, message, f"carrier:reject:{job.id}", MEMBER_PERMISSIONS)
    assert response["type"] == 7 and response["data"]["content"].endswith("**Rejected** by bob")
    rejected = await jobs.get(job.id)
    assert rejected is not None and rejected.state is JobState.CANCELLED
    assert rejected.last_error == "rejected: rejected on Discord by bob"

    late = await click(h, h.ana, message, f"carrier:approve:{job.id}", ALL_PERMISSIONS)
    assert late["data"]["flags"] & EPHEMERAL
    assert late["data"]["content"] == "This draft is already cancelled; nothing changed."
    assert (await jobs.get(job.id) or job).state is JobState.CANCELLED


async def test_approval_buttons_survive_a_restart(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    config = {"approvalChannel": "showcase"}
    await h.start(config)
    job = await draft_job(jobs, h.runtime.agent_id, image, "last frame of the roll")
    message = await post_draft(h, job)
    await h.client.stop()

    await h.start(config)  # a new process: nothing but the custom id links click and job
    response = await click(h, h.ana, message, f"carrier:approve:{job.id}", ALL_PERMISSIONS)
    assert response["type"] == 7
    assert (await jobs.get(job.id) or job).approved


async def test_approval_foreign_or_unknown_jobs_are_not_touched(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    await h.start({"approvalChannel": "showcase"})
    foreign = await draft_job(jobs, "another-agent", image, "not ours")
    message = await post_draft(h, foreign)
    response = await click(h, h.ana, message, f"carrier:approve:{foreign.id}", ALL_PERMISSIONS)
    assert response["data"]["content"].startswith("I don't know this draft")
    assert (await jobs.get(foreign.id) or foreign).state is JobState.AWAITING_APPROVAL


async def test_approval_channel_settings(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    await h.start({})
    job = await draft_job(jobs, h.runtime.agent_id, image, "x")
    assert await h.client.request_approval(job) is None  # no approval channel: nothing sent
    assert h.fake.sent == []

    h.client.update_config({"approvalChannel": "no-such-channel"})
    with pytest.raises(ClientError, match="approval channel 'no-such-channel'"):
        await h.client.request_approval(job)
    with pytest.raises(ConfigError, match="approvalRoles: expected a list"):
        ApprovalSettings.from_extra({"approvalRoles": {"a": 1}})
    assert ApprovalSettings.from_extra({"approvalRoles": "Editors", "approvalChannel": 12}) == (
        ApprovalSettings(channel="12", roles=frozenset({"editors"}))
    )
    long = await draft_job(jobs, h.runtime.agent_id, image, "word " * 1000)
    assert len(draft_message(long, "Harbor")) <= 2000


class _Agents:
    """The two calls the approval notice makes of the agent manager."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    async def status(self, agent_id: str) -> AgentStatus:
        record = AgentRecord(id=agent_id, name="Harbor", character={})
        return AgentStatus(record=record, running=True, clients=["discord"])

    def client(self, agent_id: str, name: str) -> Any:
        return self.h.client if agent_id == self.h.runtime.agent_id else None


async def test_approval_notice_job_posts_the_draft_once_it_is_recorded(
    harness: Harness, jobs: SQLiteJobStore, image: Path
) -> None:
    h = harness
    await h.start({"approvalChannel": "showcase"})
    job = await draft_job(jobs, h.runtime.agent_id, image, "the bakery opens at seven")
    notice = await jobs.enqueue(
        NOTICE_JOB_KIND, agent_id=h.runtime.agent_id, payload={"job_id": job.id}
    )
    worker = Worker(store=jobs, clock=jobs.clock)
    worker.register(NOTICE_JOB_KIND, InstagramJobs(cast(AgentManager, _Agents(h))).notice)

    await worker.drain()

    done = await jobs.get(notice.id)
    [sent] = h.fake.sent
    assert done is not None and done.result == {"sent": {"discord": sent.message["id"]}}
    assert "the bakery opens at seven" in sent.content


async def test_approval_an_instagram_reply_is_posted_with_what_it_answers(
    harness: Harness, jobs: SQLiteJobStore
) -> None:
    h = harness
    await h.start({"approvalChannel": "showcase"})
    kind = f"instagram.inbound.{next(_KINDS)}"
    job = await jobs.enqueue(kind, agent_id=h.runtime.agent_id, payload={"event": {}})
    await jobs.claim("w1", [kind], lease_s=60)
    await jobs.start(job.id, "w1")
    payload = {
        "reply": "It is Le Samourai (1967). @everyone",
        "answers": {"kind": "comment", "from": "ana_b", "text": "what film is this? @here"},
    }
    job = await jobs.await_approval(
        job.id, "w1", payload=payload, expires_at=datetime(2025, 6, 3, tzinfo=UTC)
    )

    await post_draft(h, job)

    sent = h.fake.sent[-1]
    assert sent.content.startswith(
        f"**Reply on Instagram awaiting approval** from Harbor \u00b7 job `{job.id}`"
    )
    assert "To ana\\_b's comment:\n> what film is this? @\u200bhere" in sent.content
    assert "Reply:\n> It is Le Samourai (1967). @\u200beveryone" in sent.content
    assert "Media:" not in sent.content and "attachments" not in sent.payload
    [row] = sent.payload["components"]
    assert [b["custom_id"] for b in row["components"]] == [
        f"carrier:approve:{job.id}",
        f"carrier:reject:{job.id}",
    ]
