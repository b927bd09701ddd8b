"""The ``instagram.publish`` job once its post is live: it never fails (a later failure ends it
succeeded, with a warning, and the post recorded as the job's committed progress), it needs its
media files no more, and a post whose media no list shows yet hands on to
``instagram.permalink``, which records the media id and permalink once one does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from carrier.jobs import JobState
from carrier.memory.fake import HashEmbedder
from clients.instagram.drafts import post_memory_id
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.jobs import PERMALINK_JOB_KIND, PUBLISH_JOB_KIND
from clients.instagram.post import Phase
from tests.clients.instagram._publish_world import Host, HostConfig, enqueue_post, open_host
from tests.clients.instagram.helpers import make_image

CAPTION = "fog came in at six and never left.\n#35mm"


class BrokenEmbedder(HashEmbedder):
    """The embedding model failing (after the post went out: recording it needs a vector)."""

    broken = True

    async def _encode(self, texts: list[str]) -> np.ndarray:
        if self.broken:
            raise RuntimeError("the embedding model crashed")
        return await super()._encode(texts)


@pytest.fixture
def host_config(
    tmp_path: Path, fake_graph: FakeGraphAPI, ftp_server: tuple[str, int]
) -> HostConfig:
    data = tmp_path / "data"
    data.mkdir()
    return HostConfig(
        data_dir=str(data),
        graph_url=fake_graph.url,
        media_url=fake_graph.media_url,
        ig_user_id=fake_graph.ig_user_id,
        ftp_host=ftp_server[0],
        ftp_port=ftp_server[1],
    )


@pytest.fixture
async def host(host_config: HostConfig) -> AsyncIterator[Host]:
    async with open_host(host_config, worker_id="w1") as opened:
        yield opened


async def test_a_failure_after_the_post_went_live_never_fails_the_job(
    host_config: HostConfig, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    broken = BrokenEmbedder()
    async with open_host(host_config, worker_id="w1", embedder=broken) as host:
        image = make_image(tmp_path / "a.jpg")
        job = await enqueue_post(host.jobs, host.agent_id, "k", image, CAPTION, max_attempts=1)
        await host.service.worker.drain()

        done = await host.jobs.get(job.id)
        [live] = fake_graph.published
        assert done is not None and done.state is JobState.SUCCEEDED  # not failed: it is live
        assert done.committed and done.progress is not None
        assert done.progress["media_id"] == live["id"]
        assert done.result is not None and "embedding model crashed" in done.result["warning"]
        assert fake_graph.publish_calls == 1


async def test_a_live_post_is_retried_for_what_is_left_and_never_posted_again(
    host_config: HostConfig, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    broken = BrokenEmbedder()
    async with open_host(host_config, worker_id="w1", embedder=broken) as host:
        job = await enqueue_post(
            host.jobs, host.agent_id, "retried", make_image(tmp_path / "a.jpg"), CAPTION
        )
        await host.service.worker.drain()
        retrying = await host.jobs.get(job.id)
        assert retrying is not None and retrying.state is JobState.PENDING
        assert retrying.committed  # live: no later failure may fail it
        broken.broken = False
        await asyncio.sleep(0.3)  # the backoff of the test host: 0.2 s
        await host.service.worker.drain()

        done = await host.jobs.get(job.id)
        [live] = fake_graph.published
        assert done is not None and done.state is JobState.SUCCEEDED
        assert done.result is not None and "warning" not in done.result
        assert done.result["media_id"] == live["id"] and fake_graph.publish_calls == 1
        memory = await host.store.get_memory(post_memory_id(host.agent_id, "retried"))
        assert memory is not None and memory.content.metadata["permalink"] == live["permalink"]


async def test_a_live_post_needs_its_media_files_no_more(
    host: Host, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    image = make_image(tmp_path / "a.jpg")
    first = await enqueue_post(host.jobs, host.agent_id, "k", image, CAPTION)
    await host.service.worker.drain()
    image.unlink()  # the library file is gone afterwards
    again = await host.jobs.enqueue(
        PUBLISH_JOB_KIND, agent_id=host.agent_id, payload=first.payload
    )  # the same post handed on once more (a replayed hand-on)
    await host.service.worker.drain()
    done = await host.jobs.get(again.id)
    assert done is not None and done.state is JobState.SUCCEEDED, done.last_error
    assert fake_graph.publish_calls == 1


async def test_a_live_post_no_list_shows_gets_its_permalink_from_a_follow_up_job(
    host: Host, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    fake_graph.publish_faults = ["drop_after_publish"]  # live, and the answer is lost
    fake_graph.media_list = "off"
    fake_graph.business_discovery = False
    job = await enqueue_post(
        host.jobs, host.agent_id, "unseen", make_image(tmp_path / "a.jpg"), CAPTION
    )
    await host.service.worker.drain()

    done = await host.jobs.get(job.id)
    assert done is not None and done.state is JobState.SUCCEEDED  # live: never failed
    assert done.result is not None and done.result["media_id"] is None
    assert "not known yet" in done.result["warning"]
    [follow] = await host.jobs.list_jobs(kind=PERMALINK_JOB_KIND)
    assert follow.id == done.result["permalink_job_id"]
    assert follow.state is JobState.PENDING and follow.attempts == 1  # not found yet: retried

    fake_graph.business_discovery = True  # discovery answers now
    await asyncio.sleep(0.3)  # the backoff of the test host: 0.2 s
    await host.service.worker.drain()

    [live] = fake_graph.published
    found = await host.jobs.get(follow.id)
    assert found is not None and found.state is JobState.SUCCEEDED
    assert found.result == {
        "media_id": live["id"],
        "permalink": live["permalink"],
        "found_by": "business discovery",
    }
    state = await host.client.states.load("unseen")
    assert state is not None and state.phase is Phase.PUBLISHED
    assert (state.media_id, state.permalink) == (live["id"], live["permalink"])
    memory = await host.store.get_memory(post_memory_id(host.agent_id, "unseen"))
    assert memory is not None
    assert memory.content.metadata["media_id"] == live["id"]
    assert memory.content.metadata["permalink"] == live["permalink"]
    assert fake_graph.publish_calls == 1
