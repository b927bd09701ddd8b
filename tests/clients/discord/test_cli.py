"""``carrier discord sync`` (the typer app the core CLI mounts from the entry point)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from clients.discord.cli import app
from clients.discord.fake import FakeDiscord
from tests.clients.discord.conftest import CHARACTER


@pytest.fixture
def character_file(tmp_path: Path) -> Path:
    path = tmp_path / "harbor.yaml"
    path.write_text(yaml.safe_dump(CHARACTER))
    return path


@pytest.fixture
def fake_in_thread() -> Iterator[FakeDiscord]:
    """The fake Discord on its own loop, so the command can run ``asyncio.run`` itself."""
    loop = asyncio.new_event_loop()
    fake = FakeDiscord()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(10)
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_cli_sync_to_a_guild(
    character_file: Path, fake_in_thread: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISCORD_API_TOKEN", fake_in_thread.token)
    result = CliRunner().invoke(app, ["sync", str(character_file), "--guild", "1234"])
    assert result.exit_code == 0, result.output
    assert "Harbor: synced /ask /persona /forget /mute /unmute to server 1234" in result.output
    assert [c["name"] for c in fake_in_thread.synced["1234"]] == [
        "ask",
        "persona",
        "forget",
        "mute",
        "unmute",
    ]


def test_cli_sync_without_a_token_says_what_to_set(
    character_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DISCORD_API_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    result = CliRunner().invoke(app, ["sync", str(character_file)])
    assert result.exit_code == 1
    assert "DISCORD_API_TOKEN is not set" in result.output
