"""``carrier memory ...``: the typer sub-app over the store the settings name."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from carrier.character import load_character
from carrier.cli.memory import memory_app
from carrier.memory.fake import HashEmbedder
from carrier.memory.rights import entity_id_for
from carrier.memory.sqlite import SQLiteStore
from carrier.types import AgentRecord, Content, Memory, MemoryKind, stable_id


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    # The edge's embedder, swapped for the hashing one so no model loads.
    monkeypatch.setattr("carrier.assemble.default_embedder", lambda: HashEmbedder())


@pytest.fixture
def character_file(tmp_path: Path) -> Path:
    path = tmp_path / "harbor.json"
    path.write_text(json.dumps({"name": "Harbor", "bio": ["Harbor hosts a game-dev server."]}))
    return path


def db() -> Path:
    # The autouse fixture in tests/conftest.py points CARRIER_DATA_DIR at a fresh directory.
    return Path(os.environ["CARRIER_DATA_DIR"]) / "carrier.db"


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(memory_app, list(args), input=input, env={"COLUMNS": "250"})


def seed(agent_id: str) -> dict[str, Memory]:
    embedder = HashEmbedder()

    async def fill() -> dict[str, Memory]:
        async with SQLiteStore(path=db()) as store:
            await store.upsert_agent(AgentRecord(id=agent_id, name="Harbor", character={}))
            made = {}
            ana = entity_id_for(agent_id, "discord", "111")
            rows = [
                ("cat", ana, MemoryKind.MESSAGE, "My cat is called Miso."),
                ("reply", stable_id(agent_id, "agent"), MemoryKind.MESSAGE, "Lovely name!"),
                ("fact", ana, MemoryKind.FACT, "Ana has a cat named Miso."),
                ("bob", "ent-bob", MemoryKind.MESSAGE, "I sail on weekends."),
            ]
            for i, (key, entity, kind, text) in enumerate(rows):
                memory = Memory(
                    agent_id=agent_id,
                    room_id="room-1",
                    entity_id=entity,
                    kind=kind,
                    content=Content(
                        text=text,
                        in_reply_to=made["cat"].id if key == "reply" else None,
                        metadata={"speaker": key},
                    ),
                    embedding=(await embedder.embed_one(text)).tolist(),
                    embedding_model=embedder.model_id,
                )
                memory.created_at = memory.created_at.replace(microsecond=i)
                made[key] = await store.add_memory(memory)
            return made

    return asyncio.run(fill())


def test_list_by_character_file_name_and_id(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    for agent in (str(character_file), "harbor", agent_id):
        result = run("list", "--agent", agent)
        assert result.exit_code == 0, result.output
        assert made["cat"].id in result.output and "My cat is called Miso." in result.output
    result = run("list", "--agent", agent_id, "--kind", "fact", "--json")
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == [made["fact"].id]
    assert "embedding" not in result.stdout


def test_unknown_agent_and_bad_kind_are_explained(character_file: Path) -> None:
    seed(load_character(character_file).agent_id)
    result = run("list", "--agent", "nobody")
    assert result.exit_code == 1
    assert "no agent with id or name 'nobody'" in result.stderr and "Harbor (" in result.stderr
    result = run("list", "--agent", "harbor", "--kind", "dream")
    assert result.exit_code == 2 and "use one of message, fact" in result.stderr
    result = run("list", "--agent", "missing.yaml")
    assert result.exit_code == 1 and "missing.yaml: no such character file" in result.stderr


def test_search_by_meaning(character_file: Path) -> None:
    made = seed(load_character(character_file).agent_id)
    result = run("search", "cat called Miso", "--agent", str(character_file), "-k", "2", "--json")
    assert result.exit_code == 0, result.output
    ids = [json.loads(line)["id"] for line in result.stdout.splitlines()]
    assert ids[0] == made["cat"].id and len(ids) == 2


def test_export_then_import_into_another_store(
    character_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = seed(load_character(character_file).agent_id)
    out = tmp_path / "harbor.jsonl"
    result = run("export", "--agent", str(character_file), "-o", str(out), "--embeddings")
    assert result.exit_code == 0, result.output
    assert "exported 4 memories" in result.stderr and len(out.read_text().splitlines()) == 4
    assert not out.with_name("harbor.jsonl.partial").exists()
    assert run("export", "--agent", "harbor", "-o", str(out)).exit_code == 1  # no overwrite

    monkeypatch.setenv("CARRIER_DATA_DIR", str(tmp_path / "elsewhere"))
    result = run("import", str(out), "--agent", str(character_file))
    assert result.exit_code == 0, result.output
    assert "imported 4, already there 0, embedded 0, bad lines 0" in result.stdout
    result = run("import", str(out), "--agent", str(character_file))
    assert "imported 0, already there 4" in result.stdout
    listed = run("list", "--agent", str(character_file), "--json").stdout.splitlines()
    assert sorted(json.loads(line)["id"] for line in listed) == sorted(m.id for m in made.values())

    bad = tmp_path / "bad.jsonl"
    lines = out.read_text().splitlines()
    bad.write_text("\n".join(["oops", *lines[:1], "{}"]) + "\n")
    result = run("import", str(bad), "--agent", str(character_file), "--no-embed")
    assert result.exit_code == 1
    assert "already there 1, embedded 0, bad lines 2" in result.stdout
    assert f"{bad}:line 1: not JSON" in result.stderr
    assert f"{bad}:line 3: agent_id: Field required" in result.stderr


def test_forget_by_platform_id(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    result = run("forget", "111", "--platform", "discord", "--agent", "harbor", input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.output  # asked, and told no
    result = run("forget", "111", "--platform", "discord", "--agent", "harbor", "--yes")
    assert result.exit_code == 0, result.output
    ana = entity_id_for(agent_id, "discord", "111")
    assert f"forgot {ana}: 3 memories (1 messages, 1 facts, 1 replies" in result.stdout
    listed = run("list", "--agent", agent_id, "--json").stdout.splitlines()
    assert [json.loads(line)["id"] for line in listed] == [made["bob"].id]


def test_reindex_re_embeds_memories_of_another_model(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    seed(agent_id)  # embedded with the hashing model, which the CLI uses too: nothing to do
    result = run("reindex", "--agent", str(character_file))
    assert result.exit_code == 0, result.output
    assert "re-embedded 0 memories with hash:256" in result.stdout

    async def age() -> None:  # pretend two memories came from an older model
        async with SQLiteStore(path=db()) as store:
            for memory in await store.get_memories(agent_id=agent_id, limit=2):
                memory.embedding, memory.embedding_model = [1.0, 0.0, 0.0], "old-model:3"
                await store.update_memory(memory)

    asyncio.run(age())
    result = run("reindex")
    assert result.exit_code == 0, result.output
    assert "re-embedded 2 memories with hash:256" in result.stdout

    async def models() -> set[str | None]:
        async with SQLiteStore(path=db()) as store:
            return {m.embedding_model for m in await store.get_memories(agent_id=agent_id)}

    assert asyncio.run(models()) == {"hash:256"}
