"""The instagrapi backend's conversations: real instagrapi (its login, saved session, requests
and parsing) against FakeInstagram. Comments on the persona's media and direct threads are
polled from a stored cursor, answered through the pipeline with instagrapi, once, across a
restart and across a reply sent by a worker that died before recording it; a challenge is an
operator action."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from carrier.jobs import JobState
from carrier.types import MemoryStatus
from clients.instagram import InstagramClient
from clients.instagram.fake.private import FakeInstagram
from clients.instagram.inbound.conversation import to_message
from clients.instagram.inbound.poller import POLL_JOB_KIND
from clients.instagram.inbound.webhook import event_of
from tests.clients.instagram._conversation_world import COMMENT_REPLY, DM_REPLY, World


async def _poll(w: World) -> None:
    await w.jobs.enqueue(POLL_JOB_KIND, agent_id=w.agent_id)
    await w.service.worker.drain()


async def test_polled_comments_and_dms_are_answered_through_instagrapi_once(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world({"poll": {"enabled": True}}, private=ig)
    talk = ig.talk
    media = ig.add_media("fog at six")
    hour_ago = time.time() - 3600
    old = talk.person_comments(
        media, "old question?", user_id="6660000", username="zed", at=hour_ago
    )
    talk.person_messages("old hello?", user_id="6660000", username="zed", at=hour_ago)

    await _poll(w)  # the cursor is set; nothing older is answered

    question = talk.person_comments(media, "what film is this?", user_id="6660001", username="ana")
    talk.person_messages("do you sell prints?", user_id="6660002", username="bo")
    await _poll(w)

    assert [c.text for c in talk.replies_to(question.pk)] == [COMMENT_REPLY]
    assert [m.text for m in talk.thread_with("6660002")] == ["do you sell prints?", DM_REPLY]
    assert talk.replies_to(old.pk) == [] and len(talk.thread_with("6660000")) == 1

    await w.manager.halt(w.agent_id)  # a restart: the saved session, the stored cursor
    await w.manager.run(w.agent_id)
    logins = ig.password_logins
    await _poll(w)

    assert talk.sends == 2 and len(talk.replies_to(question.pk)) == 1
    assert ig.password_logins == logins  # the encrypted session was reused
    jobs = await w.inbound_jobs()
    assert len(jobs) == 2 and all(j.state is JobState.SUCCEEDED for j in jobs)


async def test_a_dm_sent_by_a_worker_that_died_is_found_in_the_thread_not_sent_again(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world({"poll": {"enabled": True}}, private=ig)
    await _poll(w)
    ig.talk.person_messages("are you open today?", user_id="6660003", username="cy")
    await w.jobs.enqueue(POLL_JOB_KIND, agent_id=w.agent_id)
    await w.service.worker.drain()
    [job] = await w.inbound_jobs()
    assert job.state is JobState.SUCCEEDED and ig.talk.sends == 1

    # A second message: the dead worker's run — the turn, the claim, the DM; not its record.
    ig.talk.person_messages("and tomorrow?", user_id="6660003", username="cy")
    client = w.manager.client(w.agent_id, "instagram")
    assert isinstance(client, InstagramClient)
    await client.poll(jobs=w.jobs, now=w.jobs.clock())  # the new DM is a job, not answered yet
    [second] = [j for j in await w.inbound_jobs() if j.payload["text"] == "and tomorrow?"]
    result = await client.runtime.handle(to_message(event_of(second.payload)))
    [reply] = result.replies
    assert await w.store.set_memory_status(
        reply.id, MemoryStatus.SENDING, expect=[MemoryStatus.PENDING]
    )
    talk_api = await client.conversation_api()
    await talk_api.send_message("6660003", reply.content.text)
    assert ig.talk.sends == 2

    await w.service.worker.drain()  # the job runs: the platform shows the DM, nothing more is sent

    assert ig.talk.sends == 2
    done = await w.jobs.get(second.id)
    assert done is not None and done.result is not None and done.result["found_on_platform"] == 1
    assert (await w.store.get_memory(reply.id)).status is MemoryStatus.SENT  # type: ignore[union-attr]


async def test_a_challenge_is_an_operator_action_and_nothing_is_sent(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram(login_outcome="challenge")
    w: World = await make_world({"poll": {"enabled": True}}, private=ig)

    await _poll(w)

    [job] = await w.jobs.list_jobs(kind=POLL_JOB_KIND, limit=None)
    assert job.state is JobState.FAILED
    assert "challenge" in (job.last_error or "").lower()
    assert ig.talk.sends == 0


async def test_approval_holds_an_instagrapi_dm_until_a_human_approves(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world({"poll": {"enabled": True}, "approval": "required"}, private=ig)
    await _poll(w)
    ig.talk.person_messages("can I book a session?", user_id="6660004", username="dee")

    await _poll(w)

    [job] = await w.inbound_jobs()
    assert job.state is JobState.AWAITING_APPROVAL and ig.talk.sends == 0
    await w.jobs.approve(job.id, by="admin")
    await w.service.worker.drain()

    assert [m.text for m in ig.talk.thread_with("6660004")] == ["can I book a session?", DM_REPLY]


async def test_moderation_on_instagrapi_flags_what_it_cannot_hide(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world(
        {"poll": {"enabled": True}}, private=ig, moderation={"action": "hide"}
    )
    media = ig.add_media()
    await _poll(w)
    spam = ig.talk.person_comments(media, "free followers here", user_id="6660005", username="bot")

    await _poll(w)

    [job] = await w.inbound_jobs()
    assert job.state is JobState.SUCCEEDED and job.result is not None
    assert job.result["flagged"] == "spam: contains 'free followers'"
    assert ig.talk.replies_to(spam.pk) == [] and ig.talk.sends == 0
