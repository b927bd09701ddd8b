"""A runtime whose character has knowledge: after a sync, a question about a fact that only the
knowledge files hold brings that chunk into the prompt's data message, as a <fragment>."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from carrier.knowledge import sync_character_knowledge, sync_knowledge
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.untrusted import unescape
from tests.knowledge.conftest import make_pdf
from tests.pipeline.conftest import CHARACTER, dm, xml


def prompt_of(request: ModelRequest) -> str:
    return "\n".join(str(m.content) for m in request.messages)


def data_blocks(request: ModelRequest) -> list[str]:
    """The knowledge fragments of the request's data message (never in the system message)."""
    assert "<fragment>" not in str(request.messages[0].content)
    found = re.findall(r"<fragment>(.*?)</fragment>", str(request.messages[1].content), re.DOTALL)
    return [unescape(f.replace("\n  ", "\n")) for f in found]


@pytest.mark.slow
async def test_knowledge_fact_reaches_the_prompt(
    tmp_path: Path, write_character, real_embedder
) -> None:
    fields = {k: v for k, v in CHARACTER.items() if k not in ("name", "bio")}
    character = write_character([{"directory": "knowledge"}], **fields)
    folder = Path(character.source).parent / "knowledge"
    folder.mkdir()
    (folder / "lighthouse.pdf").write_bytes(
        make_pdf(
            [
                ["The Grayhaven lighthouse is kept by Orla Finch.",
                 "She has tended its lamp every night since 1987."],
            ],
            title="Grayhaven lighthouse",
        )
    )  # fmt: skip
    (folder / "bakery.md").write_text(
        "# Bakery\n\nThe bakery on Quay Street sells rye bread and cinnamon buns every morning.",
        encoding="utf-8",
    )
    (folder / "jams.txt").write_text(
        "Game jams on this server run for 48 hours and end with a vote on the best entry.",
        encoding="utf-8",
    )
    model = FunctionModel(lambda r: xml("Orla Finch keeps it."))
    async with SQLiteStore(path=tmp_path / "c.db") as store:
        runtime = AgentRuntime(
            character=character, store=store, embedder=real_embedder, model=model, seed=7
        )
        await runtime.start()  # syncs the character's knowledge
        assert len(runtime.knowledge_report.added) == 3
        again = await sync_knowledge(
            store, real_embedder, agent_id=runtime.agent_id, character=character
        )
        assert len(again.unchanged) == 3 and again.chunks_embedded == 0

        await runtime.handle(dm("Who looks after the lighthouse in Grayhaven?"))

        blocks = data_blocks(model.requests[0])
        assert blocks, prompt_of(model.requests[0])
        assert "Orla Finch" in blocks[0]  # the best match comes first
        assert not any("cinnamon" in b for b in blocks)


async def test_knowledge_sync_for_start_up_reports_mistakes_and_keeps_knowledge(
    tmp_path: Path, write_character, fake_embedder
) -> None:
    character = write_character(["The ferry to Grayhaven leaves at nine."])
    broken = write_character(["The ferry to Grayhaven leaves at nine.", {"path": "gone.md"}])
    model = FunctionModel(lambda r: xml("At nine."))
    async with SQLiteStore(path=tmp_path / "c.db") as store:
        first = await sync_character_knowledge(store, fake_embedder, character)
        assert len(first.added) == 1 and first.error is None

        report = await sync_character_knowledge(store, fake_embedder, broken)
        assert report.error is not None and "gone.md" in report.error
        assert "knowledge not synced" in report.summary()

        runtime = AgentRuntime(
            character=broken, store=store, embedder=fake_embedder, model=model, seed=7
        )
        await runtime.start()
        await runtime.handle(dm("When does the ferry to Grayhaven leave?"))
        assert data_blocks(model.requests[0]) == ["The ferry to Grayhaven leaves at nine."]
