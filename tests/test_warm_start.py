"""An agent reports running only once it can answer at a normal turn's cost: its vector search
loaded and the embedder loaded and warmed up (the model's library is loaded by the runtime's
start). Not timed: each slow step looks, while it works, at whether the agent already says it
runs, and the test checks that it never did."""

from __future__ import annotations

import asyncio
from pathlib import Path

from carrier.agents import AgentManager
from carrier.character import parse_character
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings

LOOKS = 100
"""How many times (10 ms apart) a slow step looks for the agent running before it ends: long
enough for a start that did not wait for it to finish many times over."""


class Watch:
    """What each slow step saw: whether the agent was reported running while it worked."""

    def __init__(self) -> None:
        self.manager: AgentManager | None = None
        self.seen: dict[str, bool] = {}

    async def slow_step(self, name: str) -> None:
        assert self.manager is not None
        running = False
        for _ in range(LOOKS):
            running = bool(self.manager.running_ids())
            if running:
                break
            await asyncio.sleep(0.01)
        self.seen[name] = running


class SlowSearchStore(SQLiteStore):
    """A real SQLite store whose search preparation is slow."""

    def __init__(self, path: Path, watch: Watch) -> None:
        super().__init__(path=path)
        self.watch = watch

    async def prepare_search(self, *, agent_id: str, embedding_model: str, dim: int) -> None:
        await self.watch.slow_step("search")
        await super().prepare_search(agent_id=agent_id, embedding_model=embedding_model, dim=dim)


class SlowLoadingEmbedder(HashEmbedder):
    """An embedder with a model to load, like the real one: slow to load, then one warm-up
    encode."""

    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch
        self.loads = 0
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    async def load(self) -> None:
        self.loads += 1
        await self.watch.slow_step("embedder")
        await self._encode(["warm-up"])
        self._loaded = True


async def test_an_agent_runs_only_once_its_search_is_ready_and_its_embedder_warm(
    tmp_path: Path,
) -> None:
    settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path)})
    watch = Watch()
    embedder = SlowLoadingEmbedder(watch)
    async with SlowSearchStore(settings.store_path, watch) as store:
        manager = watch.manager = AgentManager(
            store=store, embedder=embedder, settings=settings, environ={}
        )
        try:
            record = await manager.create(parse_character({"name": "Warm", "bio": ["ready"]}))
            status = await manager.start(record.id)
            assert status.running
            assert watch.seen == {"search": False, "embedder": False}
            assert embedder.loaded

            # Stopped and started again: the embedder is not loaded twice.
            await manager.stop(record.id)
            assert (await manager.start(record.id)).running
            assert embedder.loads == 1
        finally:
            await manager.close()
