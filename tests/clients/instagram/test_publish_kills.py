"""Job workers killed with SIGKILL while they publish: real worker processes
(``_publish_worker.py``), the loopback fake Graph API with a little latency and its media list
turned off, a real FTP server, SQLite files shared by every process.

Two workers run side by side; 12 times one of them (chosen, and the moment chosen, by a seeded
random generator) is killed while it runs a publish, and started again. Every few kills the
moment is the worst one: the post just went live and its answer is still on the way. Then:
no post is published twice, every post is live and no job failed, crashes were counted as
crashes (not attempts), another worker took over each dead worker's jobs within 15 s of the
kill (from the recorded times), and every live post has its media id and permalink recorded,
found through business discovery when the publish answer was lost.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carrier.character import Character
from carrier.jobs import Job, JobState, SQLiteJobStore
from carrier.jobs.model import HISTORY_LIMIT
from carrier.jobs.transitions import TAKEOVER_NOTE
from carrier.memory.sqlite import SQLiteStore
from clients.instagram.drafts import post_memory_id
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.jobs import PUBLISH_JOB_KIND
from clients.instagram.post import Phase, PublishStates
from tests.clients.instagram._publish_world import CHARACTER, HostConfig, enqueue_post
from tests.clients.instagram.helpers import make_image

ROOT = Path(__file__).resolve().parents[3]
KILLS = 12
LEASE_S = 2.0
TAKEOVER_BOUND = timedelta(seconds=15)  # the bound, from the kill to the next claim
BACKLOG = 3
"""Publishes kept waiting, so the workers always have one to be killed in."""


@dataclass
class Workers:
    """Worker processes by worker id; each start gets a new id (``a1``, ``a2``, ...)."""

    config: Path
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    killed: dict[str, datetime] = field(default_factory=dict)
    starts: Counter[str] = field(default_factory=Counter)

    async def start(self, slot: str) -> str:
        self.starts[slot] += 1
        worker_id = f"{slot}{self.starts[slot]}"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.clients.instagram._publish_worker",
            str(self.config),
            worker_id,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.procs[worker_id] = proc
        return worker_id

    async def ready(self, worker_id: str) -> None:
        stdout = self.procs[worker_id].stdout
        assert stdout is not None
        line = await asyncio.wait_for(stdout.readline(), 120)
        assert line.strip() == b"ready", f"worker {worker_id} did not start: {line!r}"

    async def kill(self, worker_id: str) -> None:
        proc = self.procs.pop(worker_id)
        proc.send_signal(signal.SIGKILL)
        self.killed[worker_id] = datetime.now(UTC)
        await proc.wait()

    async def close(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


async def running(jobs: SQLiteJobStore, alive: dict[str, asyncio.subprocess.Process]) -> list[str]:
    """Live workers running a publish right now. Not one whose job is near its crash budget:
    the budget stops jobs that kill every worker, and these were killed from outside."""
    held = await jobs.list_jobs(states=[JobState.RUNNING], kind=PUBLISH_JOB_KIND, limit=None)
    return sorted(
        {
            job.lease_owner
            for job in held
            if job.lease_owner in alive and job.crashes < job.max_crashes - 2
        }
    )


def takeovers(jobs: list[Job], killed: dict[str, datetime]) -> list[tuple[str, timedelta]]:
    """(lost worker, delay from its kill to the claim that took its job over), per takeover."""
    found = []
    for job in jobs:
        for before, event in zip(job.history, job.history[1:], strict=False):
            if event.note == TAKEOVER_NOTE and before.worker in killed:
                found.append((before.worker, event.at - killed[before.worker]))
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_killed_publishing_workers_never_double_post_or_fail_a_post(
    tmp_path: Path, fake_graph: FakeGraphAPI, ftp_server: tuple[str, int]
) -> None:
    rng = random.Random(15)
    fake_graph.latency_s = 0.01
    fake_graph.publish_answer_delay_s = 0.15
    fake_graph.media_list = "off"  # recovery must go through the container and the caption
    fake_graph.quota_total = 100_000
    data = tmp_path / "data"
    data.mkdir()
    config = HostConfig(
        data_dir=str(data),
        graph_url=fake_graph.url,
        media_url=fake_graph.media_url,
        ig_user_id=fake_graph.ig_user_id,
        ftp_host=ftp_server[0],
        ftp_port=ftp_server[1],
        lease_s=LEASE_S,
        poll_s=0.1,
    )
    workers = Workers(config.dump(tmp_path / "host.json"))
    image = make_image(tmp_path / "frame.jpg", size=(320, 320))
    captions: dict[str, str] = {}
    async with SQLiteJobStore(path=config.jobs_path) as jobs:
        try:
            for slot in "ab":  # the first start creates the agent: one at a time
                await workers.ready(await workers.start(slot))
            agent_id = Character.model_validate(CHARACTER).agent_id
            restarts: list[asyncio.Task[None]] = []

            async def refill() -> None:
                waiting = await jobs.list_jobs(
                    states=[JobState.PENDING], kind=PUBLISH_JOB_KIND, limit=None
                )
                for _ in range(BACKLOG - len(waiting)):
                    key = f"post-{len(captions):03d}"
                    captions[key] = f"frame {len(captions)}: fog at six, the ferry horn.\n#35mm"
                    await enqueue_post(jobs, agent_id, key, image, captions[key])

            async def restart(slot: str) -> None:
                await workers.ready(await workers.start(slot))

            for kill in range(KILLS):
                await refill()
                worst = kill % 4 == 0  # the publish went out; its answer has not come back
                while True:
                    busy = await running(jobs, workers.procs)
                    if busy and (not worst or fake_graph.answering):
                        break
                    await asyncio.sleep(0.01)
                    await refill()
                victims = busy if worst else [rng.choice(busy)]
                if not worst:
                    await asyncio.sleep(rng.uniform(0, 0.3))  # a random point of the publish
                for victim in victims:
                    if victim in workers.procs:
                        await workers.kill(victim)
                        restarts.append(asyncio.create_task(restart(victim[0])))
            await asyncio.gather(*restarts)
            for _ in range(6000):  # wait for the last posts (about a minute at most)
                left = await jobs.list_jobs(
                    states=[JobState.PENDING, JobState.CLAIMED, JobState.RUNNING], limit=None
                )
                if not left:
                    break
                await asyncio.sleep(0.01)
            everything = await jobs.list_jobs(limit=None)
        finally:
            await workers.close()

    assert len(workers.killed) >= KILLS
    # No post went out twice, and every post went out.
    published = Counter(media["caption"] for media in fake_graph.published)
    assert published == Counter(set(captions.values()))
    # No job failed, least of all for the crashes; every publish succeeded; crashes are not
    # attempts.
    publishes = [job for job in everything if job.kind == PUBLISH_JOB_KIND]
    assert len(publishes) == len(captions)
    assert [job.last_error for job in everything if job.state is not JobState.SUCCEEDED] == []
    for job in publishes:
        if len(job.history) < HISTORY_LIMIT:  # the whole story is there
            events = list(zip(job.history, job.history[1:], strict=False))
            retries = sum(1 for _, e in events if (e.note or "").startswith("attempt "))
            taken = sum(1 for _, e in events if e.note == TAKEOVER_NOTE)
            assert (job.attempts, job.crashes) == (1 + retries, taken), job.history
    assert sum(job.crashes for job in publishes) >= 1
    # Each dead worker's jobs were taken over within the bound, measured from the kill.
    delays = takeovers(everything, workers.killed)
    assert delays, "no kill left a job to take over"
    assert all(delay <= TAKEOVER_BOUND for _, delay in delays), delays
    # Every live post has its media id and permalink, in its state and its memory.
    by_caption = {media["caption"]: media for media in fake_graph.published}
    recovered = []
    async with SQLiteStore(path=config.store_path) as store:
        states = PublishStates(store, agent_id)
        for key, caption in captions.items():
            state = await states.load(key)
            live = by_caption[caption]
            assert state is not None and state.phase is Phase.PUBLISHED, key
            assert (state.media_id, state.permalink) == (live["id"], live["permalink"]), key
            memory = await store.get_memory(post_memory_id(agent_id, key))
            assert memory is not None, key
            metadata = memory.content.metadata
            assert (metadata["media_id"], metadata["permalink"]) == (live["id"], live["permalink"])
            if state.found_by is not None:
                recovered.append(state.found_by)
    assert "business discovery" in recovered  # the media list was off: found through discovery
