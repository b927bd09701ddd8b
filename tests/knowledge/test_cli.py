"""``carrier knowledge ...`` through typer's runner, on the store `carrier run` would open (the test's
own data dir) and a hashing embedder passed in as the commands' dependencies."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner, Result

from carrier.assemble import open_store
from carrier.cli.knowledge import KnowledgeCliDeps, knowledge_app
from carrier.knowledge import list_knowledge
from carrier.memory.fake import HashEmbedder
from carrier.settings import load_settings
from carrier.types import AgentRecord
from tests.knowledge.conftest import make_pdf, words_text

DEPS = KnowledgeCliDeps(embedder=HashEmbedder)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(knowledge_app, list(args), obj=DEPS)


def record_agent(agent_id: str, name: str) -> None:
    async def write() -> None:
        store = await open_store(load_settings())
        try:
            await store.upsert_agent(AgentRecord(id=agent_id, name=name, character={"name": name}))
        finally:
            await store.close()

    asyncio.run(write())


def stored_sources(agent_id: str) -> list[str]:
    async def read() -> list[str]:
        store = await open_store(load_settings())
        try:
            return [d.source for d in await list_knowledge(store, agent_id)]
        finally:
            await store.close()

    return asyncio.run(read())


def test_cli_add_list_remove_with_a_character_file(tmp_path: Path, write_character) -> None:
    character = write_character([])
    library = tmp_path / "library"
    (library / "manuals").mkdir(parents=True)
    for i in range(5):
        (library / f"notes{i}.txt").write_text(words_text(3, tag=f"n{i}w"), encoding="utf-8")
    (library / "manuals" / "light.pdf").write_bytes(make_pdf([["Orla Finch keeps the light."]]))
    (library / "cover.jpg").write_bytes(b"\xff\xd8")

    result = invoke("add", str(library), "--agent", str(character.source))
    assert result.exit_code == 0, result.output
    assert f"Harbor ({character.agent_id}): 6 added" in result.output
    assert "1 file(s) of other types skipped" in result.output
    assert "Embedding chunks" in result.output  # the progress bars, rendered once when not a tty
    assert len(stored_sources(character.agent_id)) == 6

    again = invoke("add", str(library), "--agent", character.agent_id)
    assert again.exit_code == 0, again.output
    assert "0 added, 0 updated, 0 removed, 6 unchanged" in again.output

    record_agent(character.agent_id, "Harbor")  # as `carrier run` would
    listed = invoke("list", "--agent", "harbor")  # a stored agent's name works too
    assert listed.exit_code == 0, listed.output
    assert "6 document(s)" in listed.output and "light.pdf" in listed.output

    pdf = library / "manuals" / "light.pdf"
    removed = invoke("remove", str(pdf), "--agent", character.agent_id)
    assert removed.exit_code == 0, removed.output
    assert f"forgot {pdf.as_posix()}" in removed.output
    assert len(stored_sources(character.agent_id)) == 5

    missing = invoke("remove", str(pdf), "--agent", character.agent_id)
    assert missing.exit_code == 1 and "has no document" in missing.output


def test_cli_sync_a_character_and_report_errors(tmp_path: Path, write_character) -> None:
    character = write_character([{"path": "faq.md"}, "The harbor opens at dawn."])
    (Path(character.source).parent / "faq.md").write_text("# FAQ\n\nFerry at nine.", "utf-8")
    result = invoke("sync", str(character.source))
    assert result.exit_code == 0, result.output
    assert "2 added" in result.output
    assert sorted(stored_sources(character.agent_id))[0] == "faq.md"

    (Path(character.source).parent / "faq.md").unlink()
    failed = invoke("sync", str(character.source))
    assert failed.exit_code == 1
    assert str(character.source) in failed.output and "knowledge.0.path" in failed.output

    nobody = invoke("list", "--agent", "nobody-at-all")
    assert nobody.exit_code == 1 and "no agent with id or name 'nobody-at-all'" in nobody.output
    bad_path = invoke("add", str(tmp_path / "nope.txt"), "--agent", str(character.source))
    assert bad_path.exit_code == 1 and "nope.txt: not found" in bad_path.output
