"""``carrier memory ...``: the typer sub-app over the store the settings name."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from carrier.character import load_character
from carrier.cli.memory import memory_app
from carrier.memory.fake import HashEmbedder
from carrier.memory.rights import entity_id_for
from carrier.memory.sqlite import SQLiteStore
from carrier.types import AgentRecord, Content, Entity, Memory, MemoryKind, stable_id


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


def person(agent_id: str, platform: str, platform_id: str, *names: str) -> Entity:
    return Entity(
        id=entity_id_for(agent_id, platform, platform_id),
        agent_id=agent_id,
        platform=platform,
        platform_id=platform_id,
        names=list(names),
    )


def add_people(*people: Entity) -> None:
    async def write() -> None:
        async with SQLiteStore(path=db()) as store:
            for entity in people:
                await store.upsert_entity(entity)

    asyncio.run(write())


def seed(agent_id: str) -> dict[str, Memory]:
    """Ana (discord 111, also "ana_b") said one thing and has a fact; the agent replied to her;
    Bob (instagram bob.sails) said one thing."""
    embedder = HashEmbedder()
    ana = person(agent_id, "discord", "111", "Ana", "ana_b")
    bob = person(agent_id, "instagram", "bob.sails", "Bob")
    add_people(ana, bob)

    async def fill() -> dict[str, Memory]:
        async with SQLiteStore(path=db()) as store:
            await store.upsert_agent(AgentRecord(id=agent_id, name="Harbor", character={}))
            made = {}
            rows = [
                ("cat", ana.id, MemoryKind.MESSAGE, "My cat is called Miso.", "Ana"),
                ("reply", stable_id(agent_id, "agent"), MemoryKind.MESSAGE, "Lovely!", "Harbor"),
                ("fact", ana.id, MemoryKind.FACT, "Ana has a cat named Miso.", None),
                ("bob", bob.id, MemoryKind.MESSAGE, "I sail on weekends.", "Bob"),
            ]
            for i, (key, entity, kind, text, speaker) in enumerate(rows):
                memory = Memory(
                    agent_id=agent_id,
                    room_id="room-1",
                    entity_id=entity,
                    kind=kind,
                    content=Content(
                        text=text,
                        in_reply_to=made["cat"].id if key == "reply" else None,
                        metadata={"speaker": speaker} if speaker else {},
                    ),
                    embedding=(await embedder.embed_one(text)).tolist(),
                    embedding_model=embedder.model_id,
                )
                memory.created_at = memory.created_at.replace(microsecond=i)
                made[key] = await store.add_memory(memory)
            return made

    return asyncio.run(fill())


def ids_listed(agent: str) -> list[str]:
    return [
        json.loads(line)["id"] for line in run("list", "-a", agent, "--json").stdout.splitlines()
    ]


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


def test_list_shows_who_by_name_and_entity_id(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    seed(agent_id)
    ana = entity_id_for(agent_id, "discord", "111")
    result = run("list", "-a", "harbor")
    assert result.exit_code == 0, result.output
    rows = result.stdout
    assert ana in rows and entity_id_for(agent_id, "instagram", "bob.sails") in rows
    fact_row = rows[rows.index("Ana has a cat") - 200 : rows.index("Ana has a cat")]
    assert "Ana" in fact_row  # a fact has no speaker: the name comes from her entity record


def test_list_and_people_are_readable_in_100_columns(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    seed(agent_id)
    ana = entity_id_for(agent_id, "discord", "111")
    for args in (("list", "-a", "harbor"), ("people", "-a", "harbor")):
        result = CliRunner().invoke(memory_app, list(args), env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.stdout.splitlines()) <= 100
        assert ana in result.stdout  # whole, on one line, to copy into `forget`
    assert "My cat is called Miso." in run("list", "-a", "harbor").stdout


def test_people_lists_names_platform_ids_and_counts(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    seed(agent_id)
    result = run("people", "-a", "harbor", "--json")
    assert result.exit_code == 0, result.output
    people = [json.loads(line) for line in result.stdout.splitlines()]
    assert people == [
        {
            "entity_id": entity_id_for(agent_id, "discord", "111"),
            "names": ["Ana", "ana_b"],
            "platform": "discord",
            "platform_id": "111",
            "messages": 1,
            "memories": 2,
        },
        {
            "entity_id": entity_id_for(agent_id, "instagram", "bob.sails"),
            "names": ["Bob"],
            "platform": "instagram",
            "platform_id": "bob.sails",
            "messages": 1,
            "memories": 1,
        },
    ]
    table = run("people", "-a", "harbor").stdout
    assert "Ana, ana_b" in table and "discord" in table and "bob.sails" in table
    only = run("people", "ANA_B", "-a", "harbor", "--json").stdout.splitlines()
    assert [json.loads(line)["names"] for line in only] == [["Ana", "ana_b"]]
    assert run("people", "-a", "harbor", "--platform", "api").stdout == "nobody yet\n"


def test_forget_by_name_asks_naming_the_person_found(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    ana = entity_id_for(agent_id, "discord", "111")
    result = run("forget", "ana", "--agent", "harbor", input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.output  # asked, and told no
    assert f"remembers of Ana / ana_b (discord 111, entity {ana})?" in result.output
    assert len(ids_listed(agent_id)) == 4

    result = run("forget", "ana", "--agent", "harbor", input="y\n")
    assert result.exit_code == 0, result.output
    assert f"forgot Ana ({ana}): 3 memories (1 messages, 1 facts, 1 replies" in result.stdout
    assert "their entity record (names, platform id) too" in result.stdout
    assert ids_listed(agent_id) == [made["bob"].id]


def test_forget_by_username_and_by_platform_id_on_any_platform(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    result = run("forget", "@ANA_B", "-a", "harbor", "-y")  # a username, any case, with an @
    assert result.exit_code == 0, result.output
    assert "forgot Ana (" in result.stdout and "3 memories" in result.stdout
    result = run("forget", "bob.sails", "-a", "harbor", "-y")  # an Instagram id, no --platform
    assert result.exit_code == 0, result.output
    assert "forgot Bob (" in result.stdout and "1 memories (1 messages" in result.stdout
    assert made["bob"].id not in ids_listed(agent_id) and ids_listed(agent_id) == []


def test_forget_by_entity_id_and_by_platform_id_on_one_platform(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    add_people(person(agent_id, "instagram", "111", "Someone else"))
    result = run("forget", "111", "--platform", "discord", "-a", "harbor", "--yes")
    assert result.exit_code == 0, result.output
    ana = entity_id_for(agent_id, "discord", "111")
    assert f"forgot Ana ({ana}): 3 memories" in result.stdout
    bob = entity_id_for(agent_id, "instagram", "bob.sails")
    result = run("forget", bob, "-a", "harbor", "--yes")
    assert result.exit_code == 0 and f"forgot Bob ({bob}): 1 memories" in result.stdout
    assert made["bob"].id not in ids_listed(agent_id)


def test_forget_several_matches_asks_which_one(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    other = person(agent_id, "instagram", "ana.photos", "ana")
    add_people(other)
    result = run("forget", "Ana", "-a", "harbor", input="3\n2\ny\n")  # 3 is out of range
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2 people match 'Ana':" in out and other.id in out and "ana.photos" in out
    assert "Which one (1-2" in out and "'3': answer with a number from 1 to 2" in out
    assert f"remembers of ana (instagram ana.photos, entity {other.id})?" in out
    assert f"forgot ana ({other.id}): 0 memories" in out
    assert len(ids_listed(agent_id)) == len(made)  # the other Ana is untouched


def test_forget_several_matches_with_yes_deletes_nothing(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    other = person(agent_id, "instagram", "111", "Anna")
    add_people(other)
    result = run("forget", "111", "-a", "harbor", "-y")
    assert result.exit_code == 1
    ana = entity_id_for(agent_id, "discord", "111")
    assert "2 people match '111':" in result.stderr
    assert ana in result.stderr and other.id in result.stderr
    assert "nothing was deleted: pass the entity id of the one to forget" in result.stderr
    assert len(ids_listed(agent_id)) == len(made)


def test_forget_nobody_exits_1_and_says_how_to_list_people(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    made = seed(agent_id)
    result = run("forget", "alice", "-a", "harbor", "-y")
    assert result.exit_code == 1
    assert "nobody called 'alice'" in result.stderr
    assert "carrier memory people -a harbor" in result.stderr
    result = run("forget", "111", "--platform", "instagram", "-a", "harbor", "-y")
    assert result.exit_code == 1  # Ana is on discord
    assert len(ids_listed(agent_id)) == len(made)


def test_forget_memories_without_an_entity_record(character_file: Path) -> None:
    agent_id = load_character(character_file).agent_id
    seed(agent_id)

    async def drop_record() -> None:
        async with SQLiteStore(path=db()) as store:
            await store.delete_entity(entity_id_for(agent_id, "discord", "111"))

    asyncio.run(drop_record())
    result = run("forget", "111", "--platform", "discord", "-a", "harbor", "-y")
    assert result.exit_code == 0, result.output
    assert "3 memories (1 messages, 1 facts, 1 replies" in result.stdout


def test_forget_nobody_through_the_command(character_file: Path, tmp_path: Path) -> None:
    seed(load_character(character_file).agent_id)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "carrier", "memory", "forget", "alice", "-a", "Harbor", "-y"],
        capture_output=True,
        text=True,
        env=env,  # CARRIER_DATA_DIR: the seeded store
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert (
        "nobody called 'alice'" in done.stderr and "carrier memory people -a Harbor" in done.stderr
    )
    assert done.stdout == ""


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


class LoadingEmbedder(HashEmbedder):
    """The hashing embedder with a model to load first, like the default one; counts loads."""

    loads = 0

    def __init__(self) -> None:
        super().__init__()
        self.loaded = False

    async def load(self) -> None:
        type(self).loads += 1
        self.loaded = True


def test_commands_that_embed_say_the_model_is_loading(
    character_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("carrier.assemble.default_embedder", LoadingEmbedder)
    monkeypatch.setattr(LoadingEmbedder, "loads", 0)
    agent_id = load_character(character_file).agent_id
    seed(agent_id)
    result = run("search", "cat", "-a", "harbor", "--json")
    assert result.exit_code == 0, result.output
    assert "Loading the embedding model (hash)..." in result.stderr and LoadingEmbedder.loads == 1
    assert all(json.loads(line) for line in result.stdout.splitlines())  # stdout stays JSON

    # Nothing to re-embed, or every line has its vector: no model is loaded, nothing is said.
    assert "Loading" not in run("reindex", "-a", "harbor").stderr
    out, bare = tmp_path / "all.jsonl", tmp_path / "bare.jsonl"
    assert run("export", "-a", "harbor", "-o", str(out), "--embeddings").exit_code == 0
    assert run("export", "-a", "harbor", "-o", str(bare)).exit_code == 0
    monkeypatch.setenv("CARRIER_DATA_DIR", str(tmp_path / "with-vectors"))
    assert "Loading" not in run("import", str(out), "-a", str(character_file)).stderr
    assert LoadingEmbedder.loads == 1

    monkeypatch.setenv("CARRIER_DATA_DIR", str(tmp_path / "without-vectors"))
    result = run("import", str(bare), "-a", str(character_file))
    assert result.exit_code == 0, result.output
    assert "embedded 4" in result.stdout and "Loading the embedding model" in result.stderr
    assert LoadingEmbedder.loads == 2

    async def age() -> None:  # one memory from an older model: reindex has work, and says so
        async with SQLiteStore(path=db()) as store:
            (memory,) = await store.get_memories(agent_id=agent_id, limit=1)
            memory.embedding, memory.embedding_model = [1.0, 0.0, 0.0], "old-model:3"
            await store.update_memory(memory)

    asyncio.run(age())
    result = run("reindex", "-a", str(character_file))
    assert result.exit_code == 0 and "re-embedded 1 memory" in result.stdout
    assert "Loading the embedding model" in result.stderr and LoadingEmbedder.loads == 3
