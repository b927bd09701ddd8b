"""The series as a host runs them, on SQLite and on MongoDB: every agent's turns counted
through the manager's plugins, the last counts written on close, and nothing opened with
``CARRIER_SERIES=off``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from carrier.agents import AgentManager
from carrier.character import Character
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.series import SeriesRecorder, Step, open_host_series
from carrier.settings import load_settings
from carrier.types import Author, Channel, Message, RoomKind
from tests.series.conftest import SeriesFactory

PRICES = {"big": (2e-4, 4e-4), "small": (1e-6, 1e-6)}
"""Made-up prices in USD per token (litellm's cost map is not reachable in tests)."""


def answer(request: ModelRequest) -> str:
    if request.purpose == "facts":
        return "[]"
    return (
        "<response><thought>t</thought><actions>REPLY</actions>"
        f"<text>Ahoy from {request.model or 'big'}: {request.query}</text></response>"
    )


def said(text: str, user: str = "ana") -> Message:
    return Message(
        platform="api",
        author=Author(platform_id=user, name=user.capitalize()),
        channel=Channel(platform_id=f"api-{user}", kind=RoomKind.API),
        text=text,
    )


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "memory.db") as store:
        yield store


@pytest.fixture
def model() -> FunctionModel:
    return FunctionModel(answer, model="big", prices=PRICES)


@pytest.fixture
def make_manager(
    memory: SQLiteStore, model: FunctionModel, series_factory: SeriesFactory
) -> Callable[..., AgentManager]:
    def make(**environ: str) -> AgentManager:
        env = {**series_factory.settings_env(), **environ}
        return AgentManager(
            store=memory,
            embedder=HashEmbedder(),
            settings=load_settings(env),
            environ=env,
            model_factory=lambda character: model,
            start_clients=False,
        )

    return make


async def test_host_series_counts_every_agents_turns(
    make_manager: Callable[..., AgentManager], series_factory: SeriesFactory
) -> None:
    manager = make_manager(CARRIER_SERIES_FLUSH_SECONDS="3600")  # only the close writes
    host = await open_host_series(manager.settings, manager)
    try:
        ids = []
        for name in ("Pilot", "Skipper"):
            record = await manager.create(
                Character.model_validate({"name": name, "bio": ["answers"]})
            )
            await manager.start(record.id)
            ids.append(record.id)
        for agent_id in ids:
            await manager.runtime(agent_id).handle(said("hello"))
        await manager.runtime(ids[0]).handle(said("again"))
    finally:
        await manager.close()
        await host.aclose()
    async with series_factory.new_store() as store:
        recorder = SeriesRecorder(store)
        now = int(recorder.clock())
        rows = await store.select(Step.DAY, now - 86_400, now + 86_400, names=["turns"])
        assert {r.agent: r.value for r in rows} == {ids[0]: 2, ids[1]: 1}
        await recorder.flush()
        assert recorder.spent(ids[0]).day_usd > 0


async def test_host_series_off_opens_nothing(make_manager: Callable[..., AgentManager]) -> None:
    manager = make_manager(CARRIER_SERIES="off")
    host = await open_host_series(manager.settings, manager)
    assert host.recorder is None
    assert "series" not in manager.services
    await host.aclose()
    await manager.close()
