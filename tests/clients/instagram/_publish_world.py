"""A publishing host as ``carrier run`` builds one, for the recovery and kill tests: an
AgentManager with one Instagram agent whose Graph publisher talks to the loopback fake Graph API
and the loopback FTP server, and a JobService with the Instagram handlers, over SQLite files.

The same :func:`open_host` runs in the test process (driven by hand) and in worker processes
(``tests/clients/instagram/_publish_worker.py``), so every process shares the stores on disk.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from carrier.agents import AgentManager
from carrier.character import Character
from carrier.jobs import Backoff, Job, JobService, JobStore, SQLiteJobStore, Worker
from carrier.jobs.clock import Clock, system_clock
from carrier.llm.fake import FunctionModel
from carrier.memory.embedder import Embedder
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from clients.instagram import InstagramClient, parse_config
from clients.instagram.drafts import Draft
from clients.instagram.ftp import FtpMediaHost
from clients.instagram.graph import GraphAPI, GraphPublisher
from clients.instagram.jobs import PUBLISH_JOB_KIND, register_instagram_jobs
from clients.instagram.post import PostKind
from clients.instagram.quota import PublishCounter
from tests.clients.instagram.helpers import FTP_PASSWORD, FTP_USER, TOKEN

CHARACTER: dict[str, Any] = {
    "name": "Lumen",
    "bio": ["Lumen shoots film and travels slowly."],
    "clients": ["instagram"],
    "clientConfig": {"instagram": {"publisher": "graph"}},
}


@dataclass(frozen=True)
class HostConfig:
    """Where a host finds everything; written as JSON for worker processes."""

    data_dir: str
    graph_url: str
    media_url: str
    ig_user_id: str
    ftp_host: str
    ftp_port: int
    lease_s: float = 10.0
    poll_s: float = 0.2

    @property
    def store_path(self) -> Path:
        return Path(self.data_dir) / "carrier.db"

    @property
    def jobs_path(self) -> Path:
        return Path(self.data_dir) / "jobs.db"

    def dump(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self)), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Path) -> HostConfig:
        return cls(**json.loads(path.read_text(encoding="utf-8")))


@dataclass
class Host:
    manager: AgentManager
    service: JobService
    store: SQLiteStore
    agent_id: str

    @property
    def jobs(self) -> JobStore:
        return self.service.store

    @property
    def client(self) -> InstagramClient:
        client = self.manager.client(self.agent_id, "instagram")
        assert isinstance(client, InstagramClient)
        return client


def publisher(config: HostConfig, store: SQLiteStore, agent_id: str) -> GraphPublisher:
    api = GraphAPI(
        access_token=TOKEN, ig_user_id=config.ig_user_id, base_url=config.graph_url, timeout=10
    )
    media_host = FtpMediaHost(
        host=config.ftp_host,
        port=config.ftp_port,
        user=FTP_USER,
        password=FTP_PASSWORD,
        directory="/media",
        base_url=config.media_url,
        timeout=10,
        check_delay=0.1,
    )
    counter = PublishCounter(store, f"instagram:{agent_id}:published", limit=100_000)
    return GraphPublisher(
        api=api, host=media_host, counter=counter, poll_interval=0.05, poll_max_interval=0.2
    )


@asynccontextmanager
async def open_host(
    config: HostConfig,
    *,
    worker_id: str,
    clock: Clock = system_clock,
    embedder: Embedder | None = None,
) -> AsyncIterator[Host]:
    """Open the stores, start the agent (creating it the first time) and register the
    handlers; the worker is not running (call ``service.start()`` or drain it by hand)."""
    async with SQLiteStore(path=config.store_path) as store:
        settings = load_settings({"CARRIER_DATA_DIR": config.data_dir})

        def factory(runtime: Any, client_config: Any, environ: Any) -> InstagramClient:
            return InstagramClient(
                runtime=runtime,
                config=parse_config(client_config),
                environ=environ,
                publisher=publisher(config, store, str(runtime.character.agent_id)),
            )

        manager = AgentManager(
            store=store,
            embedder=embedder or HashEmbedder(),
            settings=settings,
            environ={},
            model_factory=lambda character: FunctionModel(lambda request: "unused"),
            client_factories={"instagram": factory},
        )
        jobs = SQLiteJobStore(path=config.jobs_path, clock=clock)
        worker = Worker(
            store=jobs,
            worker_id=worker_id,
            clock=clock,
            lease_s=config.lease_s,
            poll_s=config.poll_s,
            backoff=Backoff(base_s=0.2, cap_s=1.0),
        )
        service = JobService(store=jobs, worker=worker)
        register_instagram_jobs(service, manager)
        character = Character.model_validate(CHARACTER)
        if await store.get_agent(character.agent_id) is None:
            await manager.create(character)
        await jobs.open()
        try:
            status = await manager.start(character.agent_id)
            assert status.clients == ["instagram"], status.skipped
            yield Host(manager=manager, service=service, store=store, agent_id=character.agent_id)
        finally:
            await service.stop(grace_s=0)
            await manager.close()


async def enqueue_post(
    jobs: JobStore, agent_id: str, key: str, image: Path, caption: str, *, max_attempts: int = 5
) -> Job:
    """An ``instagram.publish`` job as a post job hands it on (keyed by the post's key)."""
    draft = Draft(
        post_key=key, kind=PostKind.PHOTO, media=[str(image)], caption=caption, source="upload"
    )
    return await jobs.enqueue(
        PUBLISH_JOB_KIND,
        agent_id=agent_id,
        payload={"draft": draft.model_dump(mode="json"), "post_job_id": key},
        idempotency_key=f"instagram:publish:{key}",
        max_attempts=max_attempts,
    )
