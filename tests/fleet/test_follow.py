"""The follower: what one process changes, another applies — two agent managers on one SQLite
file (a web without clients, a worker with them), as ``carrier serve --no-clients`` and
``carrier run --no-api`` are; the worker's follower runs as a task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from carrier.agents import AgentManager
from carrier.agents.follow import Follower
from carrier.character import parse_character
from carrier.clients import Client
from carrier.fleet.model import ChangeKind
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings

pytestmark = pytest.mark.asyncio

PILOT = {"name": "Pilot", "bio": ["Guides ships."], "clients": ["fake"]}


class FakeClient(Client):
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.stopped = False
        self.queued = 0

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True

    def update_config(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    async def queue_waiting_uploads(self) -> list[str]:
        self.queued += 1
        return ["job"]


class Factory:
    def __init__(self) -> None:
        self.made: list[FakeClient] = []

    def __call__(self, runtime: Any, config: Mapping[str, Any], env: Mapping[str, str]) -> Client:
        client = FakeClient(config)
        self.made.append(client)
        return client


async def until(check: Callable[[], bool], what: str) -> None:
    """Bounded against hanging; not a measure of speed."""
    for _ in range(1200):
        if check():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never: {what}")


@pytest.fixture
async def pair(
    tmp_path: Path,
) -> AsyncIterator[tuple[AgentManager, AgentManager, Factory, asyncio.Task[None]]]:
    settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path / "data")})
    model = FunctionModel(lambda request: "<response><text>ok</text></response>")
    factory = Factory()
    async with (
        SQLiteStore(path=tmp_path / "carrier.db") as web_store,
        SQLiteStore(path=tmp_path / "carrier.db") as worker_store,
    ):

        def manager(store: SQLiteStore, clients: bool) -> AgentManager:
            return AgentManager(
                store=store,
                embedder=HashEmbedder(),
                settings=settings,
                environ={},
                model_factory=lambda character: model,
                client_factories={"fake": factory},
                start_clients=clients,
            )

        web, worker = manager(web_store, False), manager(worker_store, True)
        follower = Follower(worker, wait_s=0.2)
        task = asyncio.create_task(follower.run(after=await follower.mark()))
        try:
            yield web, worker, factory, task
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await web.close()
            await worker.close()


async def test_the_worker_applies_starts_edits_configs_stops_and_deletes(
    pair: tuple[AgentManager, AgentManager, Factory, asyncio.Task[None]],
) -> None:
    web, worker, factory, _ = pair
    record = await web.create(parse_character(PILOT))
    assert (await web.start(record.id)).clients == []  # the web never starts clients
    await until(lambda: len(factory.made) == 1, "the worker runs it, with its client")
    [client] = factory.made

    edited = parse_character({**PILOT, "bio": ["Guides ships at night."]})
    await web.update(record.id, edited)
    await until(
        lambda: worker.runtime(record.id).character.bio == ["Guides ships at night."],
        "the worker's runtime takes the new revision",
    )
    assert (await worker.status(record.id)).revision == 2

    await web.set_client_config(f"{record.id}:fake", {"channels": ["general"]})
    await until(lambda: client.config.get("channels") == ["general"], "the config is pushed")

    # Media uploaded through the web, where no publisher runs: the worker's client queues them.
    await (await web.fleet()).append_change(ChangeKind.UPLOADS, record.id, {"media_id": "m1"})
    await until(lambda: client.queued == 1, "the worker's publisher queues the upload")

    await web.stop(record.id)
    await until(lambda: client.stopped, "the stop reaches the worker")
    assert worker.running_ids() == []

    await web.start(record.id)
    await until(lambda: len(factory.made) == 2, "started again")
    await web.delete(record.id)
    await until(lambda: factory.made[1].stopped, "a deleted agent stops everywhere")
    assert worker.running_ids() == []


async def test_a_sweep_repairs_what_the_log_did_not_say(
    pair: tuple[AgentManager, AgentManager, Factory, asyncio.Task[None]],
) -> None:
    """An agent desired running whose entry was never applied (a crash between a write and its
    entry, a follower that was down), or running though it should not: the sweep repairs."""
    web, worker, _, following = pair
    following.cancel()  # the follower is down
    await asyncio.gather(following, return_exceptions=True)
    record = await web.create(parse_character(PILOT))
    await web.start(record.id)
    other = await web.create(parse_character({**PILOT, "name": "Other"}))
    await worker.run(other.id)  # runs here, though nobody asked it to run
    assert worker.running_ids() == [other.id]
    await Follower(worker).sweep()
    assert worker.running_ids() == [record.id]


async def test_a_placed_agent_runs_only_on_workers_of_its_group(tmp_path: Path) -> None:
    settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path / "data")})
    model = FunctionModel(lambda request: "<response><text>ok</text></response>")
    factory = Factory()
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:

        def manager(clients: bool, group: str | None = None) -> AgentManager:
            return AgentManager(
                store=store,
                embedder=HashEmbedder(),
                settings=settings,
                environ={},
                model_factory=lambda character: model,
                client_factories={"fake": factory},
                start_clients=clients,
                group=group,
            )

        web, eu, anywhere = manager(False), manager(True, "eu"), manager(True)
        try:
            record = await web.create(parse_character(PILOT))
            status = await web.start(record.id, placement="eu")
            assert status.running and status.desired is not None
            assert status.desired.placement == "eu"  # the web runs it for the API all the same
            for worker in (eu, anywhere):
                await Follower(worker).sweep()
            assert (eu.running_ids(), anywhere.running_ids()) == ([record.id], [])

            await web.start(record.id, placement=None)  # any worker again
            await Follower(anywhere).sweep()
            assert anywhere.running_ids() == [record.id]
            await web.start(record.id)  # placement left as it was
            assert (await web.status(record.id)).desired.placement is None  # type: ignore[union-attr]
        finally:
            for m in (web, eu, anywhere):
                await m.close()
