"""``carrier agents ...``, run as operators run it: a ``carrier`` subprocess over the store in
``CARRIER_DATA_DIR``, beside agents stored the way the API stores them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from carrier.agents import AgentManager
from carrier.audit.context import cli_actor
from carrier.character import parse_character
from carrier.fleet.model import Desired, DesiredState, Revision
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")

PILOT: dict[str, Any] = {
    "id": "pilot",
    "name": "Pilot",
    "bio": ["Pilot answers questions about flying.", "Pilot logs every flight."],
    "clients": ["discord"],
    "settings": {"secrets": {"DISCORD_API_TOKEN": "$PILOT_DISCORD_TOKEN"}},
}
SECRET_REFS = ("PILOT_DISCORD_TOKEN", "OTHER_DISCORD_TOKEN")


def carrier(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # The autouse fixture in tests/conftest.py points CARRIER_DATA_DIR at a fresh directory.
    return subprocess.run(
        [sys.executable, "-m", "carrier", "agents", *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def with_manager(action: Callable[[AgentManager], Awaitable[T]]) -> T:
    """Work on the store the command reads, as the API does (its manager, a hashing embedder)."""
    settings = load_settings()

    async def main() -> T:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        async with SQLiteStore(path=settings.store_path) as store:
            manager = AgentManager(
                store=store, embedder=HashEmbedder(), settings=settings, environ={}
            )
            try:
                return await action(manager)
            finally:
                await manager.close()

    return asyncio.run(main())


def seed_pilot() -> None:
    """Pilot: revision 1 (created), 2 (bio edited, token reference changed) by the admin."""

    async def seed(manager: AgentManager) -> None:
        await manager.create(parse_character(PILOT), actor="admin")
        edited = {
            **PILOT,
            "bio": ["Pilot answers questions about gliders.", "Pilot logs every flight."],
            "settings": {"secrets": {"DISCORD_API_TOKEN": "$OTHER_DISCORD_TOKEN"}},
            "topics": ["weather"],
        }
        await manager.update("pilot", parse_character(edited), actor="admin")

    with_manager(seed)


def revisions() -> list[Revision]:
    async def read(manager: AgentManager) -> list[Revision]:
        return await manager.revisions("pilot")

    return with_manager(read)


def desired() -> Desired | None:
    async def read(manager: AgentManager) -> Desired | None:
        return await (await manager.fleet()).desired("pilot")

    return with_manager(read)


def no_secret_refs(result: subprocess.CompletedProcess[str]) -> None:
    for ref in SECRET_REFS:
        assert ref not in result.stdout + result.stderr


def test_agents_list_and_show_by_id_or_name() -> None:
    seed_pilot()

    async def more(manager: AgentManager) -> None:
        await manager.create(parse_character({"id": "harbor", "name": "Harbor"}), actor="admin")
        await (await manager.fleet()).set_desired("harbor", DesiredState.RUNNING, actor="admin")

    with_manager(more)

    listed = carrier("list")
    assert listed.returncode == 0, listed.stderr
    lines = [line.split() for line in listed.stdout.splitlines()]
    assert lines[0] == ["ID", "NAME", "DESIRED", "REVISION", "UPDATED", "(UTC)"]
    assert sorted(line[:4] for line in lines[1:3]) == [
        ["harbor", "Harbor", "running", "1"],
        ["pilot", "Pilot", "stopped", "2"],
    ]
    # Harbor should run, and no worker is alive on this store to run it: said once.
    assert "no worker (carrier run) is alive" in listed.stdout
    as_json = [json.loads(line) for line in carrier("list", "--json").stdout.splitlines()]
    assert {(a["id"], a["desired"], a["revision"]) for a in as_json} == {
        ("harbor", "running", 1),
        ("pilot", "stopped", 2),
    }

    shown = carrier("show", "Pilot")
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(None, 1) for line in shown.stdout.splitlines())
    assert fields["id"] == "pilot" and fields["desired"] == "stopped"
    assert fields["revision"].startswith("revision 2 (api by admin, ")
    assert fields["clients"] == "discord" and fields["topics"] == "weather"
    assert fields["secrets"] == "DISCORD_API_TOKEN (names only)"
    assert fields["bio"] == "Pilot answers questions about gliders. (+1 more)"
    no_secret_refs(shown)
    as_yaml = carrier("show", "pilot", "--yaml")
    assert "DISCORD_API_TOKEN: (secret reference, not shown)" in as_yaml.stdout
    no_secret_refs(as_yaml)


def test_agents_unknown_or_ambiguous_agent_is_one_line_and_exit_1() -> None:
    seed_pilot()

    async def twin(manager: AgentManager) -> None:
        await manager.create(parse_character({**PILOT, "id": "pilot-2"}), actor="admin")

    with_manager(twin)

    unknown = carrier("show", "nobody")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1
    assert "no agent with id or name 'nobody'" in unknown.stderr
    assert "Pilot (pilot)" in unknown.stderr  # what there is to name instead
    ambiguous = carrier("revisions", "Pilot")
    assert ambiguous.returncode == 1
    assert "several agents are named 'Pilot' (pilot, pilot-2)" in ambiguous.stderr
    assert carrier("revisions", "pilot-2").returncode == 0


def test_agents_revisions_and_diff_never_show_secret_references() -> None:
    seed_pilot()

    listed = carrier("revisions", "pilot")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split(None, 4) for line in listed.stdout.splitlines()[1:]]
    assert [row[0] for row in rows] == ["2", "1"]
    assert listed.stdout.splitlines()[1].startswith("2 (head)")
    assert all("api" in line and "admin" in line for line in listed.stdout.splitlines()[1:])
    paged = carrier("revisions", "pilot", "--limit", "1")
    assert "older: carrier agents revisions pilot --before 2" in paged.stdout

    diff = carrier("diff", "pilot", "2")
    assert diff.returncode == 0, diff.stderr
    out = diff.stdout
    assert "Pilot (pilot): 3 fields changed from revision 1 to revision 2" in out
    assert (
        '  changed  bio[0]: "Pilot answers questions about flying." -> '
        '"Pilot answers questions about gliders."' in out
    )
    assert "  changed  settings.secrets.DISCORD_API_TOKEN (a secret reference; not shown)" in out
    assert '  added    topics: ["weather"]' in out
    assert "--- revision 1\n+++ revision 2\n" in out
    assert "+  - Pilot answers questions about gliders.\n" in out
    no_secret_refs(diff)

    backwards = carrier("diff", "pilot", "2", "1")
    assert "from revision 2 to revision 1" in backwards.stdout
    assert '  removed  topics: ["weather"]' in backwards.stdout
    first = carrier("diff", "pilot", "1")
    assert "from nothing to revision 1" in first.stdout
    no_secret_refs(first)
    same = carrier("diff", "pilot", "2", "2")
    assert same.stdout.strip() == "Pilot (pilot): revision 2 is the same as revision 2"

    missing = carrier("diff", "pilot", "9")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "agent 'pilot' has no revision 9; list its revisions to see their numbers"
    )
    bad = carrier("diff", "pilot", "two")
    assert bad.returncode == 2 and "N" in bad.stderr


def test_agents_revert_asks_then_stores_a_new_revision_by_the_cli_user() -> None:
    seed_pilot()

    declined = carrier("revert", "pilot", "1", stdin="n\n")
    assert declined.returncode == 1
    assert "bringing revision 1 back over revision 2 changes:" in declined.stdout
    assert "Store revision 1's character as revision 3?" in declined.stdout
    assert "nothing changed (pass --yes to revert without asking)" in declined.stderr
    unanswered = carrier("revert", "pilot", "1")  # stdin closed: nobody to ask
    assert unanswered.returncode == 1 and "nothing changed" in unanswered.stderr
    assert len(revisions()) == 2

    accepted = carrier("revert", "pilot", "1", stdin="y\n")

    assert accepted.returncode == 0, accepted.stderr
    assert "Pilot (pilot): revision 1 brought back as revision 3" in accepted.stdout
    assert "within 2 s" in accepted.stdout
    no_secret_refs(accepted)
    head, *_ = revisions()
    assert (head.number, head.source.value, head.actor, head.note) == (
        3,
        "cli",
        cli_actor(),
        "revert to revision 1",
    )
    assert head.character == revisions()[-1].character  # secret references brought back too

    again = carrier("revert", "pilot", "1", "-y")
    assert again.returncode == 0
    assert "revision 1 is the head's character already (revision 3); nothing to revert" in (
        again.stdout
    )
    forward = carrier("revert", "pilot", "2", "--yes")
    assert forward.returncode == 0 and "brought back as revision 4" in forward.stdout
    assert len(revisions()) == 4


def test_agents_start_stop_set_the_desired_state_and_say_who_applies_it() -> None:
    seed_pilot()

    started = carrier("start", "Pilot")

    assert started.returncode == 0, started.stderr
    assert started.stdout.splitlines() == [
        "Pilot (pilot): desired state set to running; a running carrier applies it within 2 s",
        "no worker (carrier run) is alive on this store: nothing runs Pilot now; start one "
        "with `carrier run` (or `carrier run --no-api` beside `carrier serve --no-clients`)",
    ]
    wanted = desired()
    assert wanted is not None
    assert (wanted.state, wanted.actor) == (DesiredState.RUNNING, cli_actor())

    async def worker_alive(manager: AgentManager) -> None:
        fleet = await manager.fleet()
        assert await fleet.acquire("worker:test-host-1", "test-host-1", ttl_s=300) is not None

    with_manager(worker_alive)
    again = carrier("start", "pilot")
    assert again.stdout.splitlines() == [
        "Pilot (pilot): desired state set to running (it was already); a running carrier "
        "applies it within 2 s"
    ]

    stopped = carrier("stop", "pilot")
    assert stopped.returncode == 0, stopped.stderr
    assert "desired state set to stopped" in stopped.stdout
    wanted = desired()
    assert wanted is not None and wanted.state == DesiredState.STOPPED

    gone = carrier("stop", "nobody")
    assert gone.returncode == 1 and "no agent with id or name 'nobody'" in gone.stderr
