"""Real ``carrier`` processes answering Instagram through instagrapi, killed mid-reply.

The fake private API is served over loopback by this process (``FakeInstagram.serve()``); the
``carrier run`` subprocess points instagrapi's sessions at it (``CARRIER_TEST_INSTAGRAPI_URL``),
so instagrapi's login, saved session, requests and parsing are the real ones. A poll finds a
new comment and a new DM; both replies are claimed (the intent saved), the comment's reply takes
effect on the fake and its answer is held, the DM's waits its turn (instagrapi's calls run one
at a time), and the process is killed with SIGKILL. Started again, the process takes both jobs
over, reads the platform (the comment's replies, the DM thread), finds the reply that went out,
sends the one that did not, and records both ``sent``: exactly one reply each. Then a later
poll, after the restart, answers a newer comment and nothing older again."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from carrier.jobs import Job, JobState, SQLiteJobStore
from carrier.memory.sqlite import SQLiteStore
from carrier.types import MemoryKind, MemoryStatus
from clients.instagram.fake.private import FakeInstagram
from clients.instagram.inbound.poller import POLL_JOB_KIND
from clients.instagram.inbound.webhook import INBOUND_JOB_KIND
from tests.deploy.procs import CarrierProcess, base_env

READY = "running (Ctrl-C to stop)"


def character() -> dict[str, object]:
    return {
        "name": "Lumen",
        "bio": ["Lumen shoots film and travels slowly."],
        "clients": ["instagram"],
        "settings": {
            "secrets": {"INSTAGRAM_USERNAME": "$IG_USERNAME", "INSTAGRAM_PASSWORD": "$IG_PASSWORD"}
        },
        "clientConfig": {
            "instagram": {
                "publisher": "instagrapi",
                "instagrapi": {"delayRange": [0, 0]},
                # Polled by the test (an instagram.poll job, as the schedule makes one).
                "conversations": {"poll": {"enabled": True, "interval": "1h"}},
            }
        },
    }


async def until(predicate: Callable[[], bool | Awaitable[bool]], bound_s: float = 60.0) -> None:
    """Poll ``predicate()`` until true; a bound against hanging, not a measure of speed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while True:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def _poll(jobs: SQLiteJobStore, agent_id: str, name: str) -> None:
    """One polling round in the running process (as its schedule would enqueue it)."""
    job = await jobs.enqueue(POLL_JOB_KIND, agent_id=agent_id, idempotency_key=name)

    async def done() -> bool:
        found = await jobs.get(job.id)
        assert found is not None and found.state is not JobState.FAILED, found
        return found.state is JobState.SUCCEEDED

    await until(done)


async def _inbound(jobs: SQLiteJobStore) -> list[Job]:
    return await jobs.list_jobs(kind=INBOUND_JOB_KIND, limit=None)


async def test_instagrapi_replies_once_across_a_kill_and_polls_on_after_the_restart(
    tmp_path: Path,
) -> None:
    ig = FakeInstagram()
    talk = ig.talk
    media = ig.add_media("fog at six")
    hour_ago = time.time() - 3600
    old = talk.person_comments(
        media, "old question?", user_id="6660000", username="zed", at=hour_ago
    )
    talk.person_messages("old hello?", user_id="6660000", username="zed", at=hour_ago)
    data = tmp_path / "data"
    path = tmp_path / "lumen.json"
    path.write_text(json.dumps(character()), encoding="utf-8")
    with ig.serve() as url:
        env = base_env(
            data,
            CARRIER_JOB_LEASE_SECONDS="2",
            CARRIER_TEST_INSTAGRAPI_URL=url,
            IG_USERNAME=ig.username,
            IG_PASSWORD=ig.password,
        )
        jobs = SQLiteJobStore(path=data / "carrier.db")
        store = SQLiteStore(path=data / "carrier.db")
        first = CarrierProcess.start("run", "--no-api", str(path), env=env, name="first")
        try:
            await first.wait_for(READY)
            await jobs.open()
            await store.open()
            [schedule] = [s for s in await jobs.list_schedules() if s.kind == POLL_JOB_KIND]
            assert schedule.agent_id is not None
            agent_id = schedule.agent_id
            await _poll(jobs, agent_id, "poll-1")  # the cursor is set; nothing older is answered

            comment = talk.person_comments(
                media, "what film is this?", user_id="6660001", username="ana"
            )
            talk.person_messages("do you sell prints?", user_id="6660002", username="bo")
            talk.answer_delay_s = 60.0  # a reply takes effect; its answer is held
            await jobs.enqueue(POLL_JOB_KIND, agent_id=agent_id, idempotency_key="poll-2")

            async def both_claimed() -> bool:
                memories = await store.get_memories(
                    agent_id=agent_id, kinds=[MemoryKind.MESSAGE], limit=20
                )
                sending = [m for m in memories if m.status is MemoryStatus.SENDING]
                return talk.answering == 1 and len(sending) == 2

            await until(both_claimed)  # both intents saved; one reply out, the other waiting
        finally:
            first.kill()
        talk.answer_delay_s = 0.0
        assert talk.sends == 1

        second = CarrierProcess.start("run", "--no-api", str(path), env=env, name="second")
        try:
            await second.wait_for(READY)

            async def settled() -> bool:
                found = await _inbound(jobs)
                return len(found) == 2 and all(j.state is JobState.SUCCEEDED for j in found)

            await until(settled)
            settled_jobs = await _inbound(jobs)

            newer = talk.person_comments(
                media, "where was it taken?", user_id="6660003", username="cy"
            )
            await _poll(jobs, agent_id, "poll-3")  # after the restart, from the stored cursor

            async def answered() -> bool:
                found = await _inbound(jobs)
                return len(found) == 3 and all(j.state is JobState.SUCCEEDED for j in found)

            await until(answered)
            memories = await store.get_memories(
                agent_id=agent_id, kinds=[MemoryKind.MESSAGE], limit=20
            )
        finally:
            await jobs.close()
            await store.close()
            second.stop()

    assert [c.text for c in talk.replies_to(comment.pk)] == ["re: what film is this?"]
    assert [m.text for m in talk.thread_with("6660002")] == [
        "do you sell prints?",
        "re: do you sell prints?",
    ]
    assert [c.text for c in talk.replies_to(newer.pk)] == ["re: where was it taken?"]
    assert talk.replies_to(old.pk) == [] and len(talk.thread_with("6660000")) == 1
    assert talk.sends == 3  # the held reply, the waiting one, the newer comment's
    assert all(j.crashes == 1 and j.result is not None for j in settled_jobs)
    assert sorted(j.result["found_on_platform"] for j in settled_jobs if j.result) == [0, 1]
    assert ig.password_logins == 1  # the second process reused the saved, encrypted session
    statuses = {m.content.text: m.status for m in memories}
    assert statuses == {
        "what film is this?": MemoryStatus.PROCESSED,
        "do you sell prints?": MemoryStatus.PROCESSED,
        "where was it taken?": MemoryStatus.PROCESSED,
        "re: what film is this?": MemoryStatus.SENT,
        "re: do you sell prints?": MemoryStatus.SENT,
        "re: where was it taken?": MemoryStatus.SENT,
    }
