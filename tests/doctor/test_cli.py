"""`carrier doctor` end to end: a real subprocess (green, and a model refusing its key, with and
without --json), and a run in process with every client's fake at once (the Discord fake
points discord.py at itself in this process only)."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aioftp
import pytest

from carrier.doctor.render import render_text
from clients.instagram.fake import FakeGraphAPI
from tests.doctor.conftest import World, free_port
from tests.llm.openai_server import FakeOpenAIServer, Reply

with warnings.catch_warnings():
    # discord.py imports the stdlib's audioop (voice support), deprecated since Python 3.11.
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    from clients.discord.fake import FakeDiscord

FTP_USER, FTP_PASSWORD = "carrier", "ftp-doctor-s3cret"
GRAPH_TOKEN = "EAAG-doctor-graph-token"
MODEL_KEY = "sk-doctor-model-key-0123456789"


@pytest.fixture
def ftp_root(tmp_path: Path) -> Path:
    root = tmp_path / "ftp-root"
    (root / "media").mkdir(parents=True)
    return root


@pytest.fixture
async def ftp_server(ftp_root: Path) -> AsyncIterator[tuple[str, int]]:
    server = aioftp.Server([aioftp.User(FTP_USER, FTP_PASSWORD, base_path=ftp_root)])
    await server.start("127.0.0.1", 0)
    try:
        yield "127.0.0.1", server.address[1]
    finally:
        await server.close()


@pytest.fixture
def graph(ftp_root: Path) -> Iterator[FakeGraphAPI]:
    with FakeGraphAPI(token=GRAPH_TOKEN, static_root=ftp_root / "media") as fake:
        yield fake


def instagram_persona(
    world: World, ftp_server: tuple[str, int], graph: FakeGraphAPI, **fields: Any
) -> Path:
    world.env.update(LUMEN_IG_TOKEN=GRAPH_TOKEN, LUMEN_FTP_PASSWORD=FTP_PASSWORD)
    return world.persona(
        "Lumen",
        clients=["instagram"],
        settings={
            "secrets": {
                "INSTAGRAM_ACCESS_TOKEN": "$LUMEN_IG_TOKEN",
                "FTP_PASSWORD": "$LUMEN_FTP_PASSWORD",
            }
        },
        clientConfig={
            "instagram": {
                "igUserId": graph.ig_user_id,
                "graphBaseUrl": graph.url,
                "ftp": {
                    "host": ftp_server[0],
                    "port": ftp_server[1],
                    "user": FTP_USER,
                    "directory": "/media",
                    "baseUrl": graph.media_url,
                },
            }
        },
        **fields,
    )


def model_env(server: FakeOpenAIServer) -> dict[str, str]:
    return {
        "CARRIER_MODEL": "openai/doctor-test",
        "CARRIER_API_BASE": server.base_url,
        "OPENAI_API_KEY": MODEL_KEY,
    }


async def test_carrier_doctor_green_exits_0(
    world: World,
    openai_server: FakeOpenAIServer,
    ftp_server: tuple[str, int],
    graph: FakeGraphAPI,
) -> None:
    world.env.update(model_env(openai_server))
    instagram_persona(world, ftp_server, graph)

    code, out, err = await world.carrier_doctor("--port", str(free_port()), "--timeout", "60")

    assert code == 0, out + err
    checks = [line.strip() for line in out.splitlines() if line.strip()][:-1]  # no summary
    assert all(line.startswith("ok ") or line == "Lumen" for line in checks), out
    for line in (
        "ok   store: SQLite",
        "ok   model: openai/doctor-test at",
        "ok   instagram token: accepted for @fake_account",
        "ok   instagram quota: 0 of 50 posts used in the last 24 h",
        "ok   instagram media URL:",
    ):
        assert line in out
    assert out.strip().splitlines()[-1].startswith("summary: 0 failed, 0 warnings,")
    for secret in (GRAPH_TOKEN, FTP_PASSWORD, MODEL_KEY):
        assert secret not in out + err
    assert openai_server.requests[0].body["max_tokens"] == 1


async def test_carrier_doctor_model_refusing_its_key_exits_1(
    world: World, openai_server: FakeOpenAIServer
) -> None:
    world.env.update(model_env(openai_server))
    world.persona("Ada")
    openai_server.queue(Reply(status=401), Reply(status=401))
    port = str(free_port())

    code, out, err = await world.carrier_doctor("--port", port)
    json_code, json_out, _ = await world.carrier_doctor("--port", port, "--json")

    assert code == 1, out + err
    assert "FAIL model: openai/doctor-test at" in out
    assert "the key was refused (HTTP 401)" in out
    assert "fix: check OPENAI_API_KEY: it may be wrong, revoked" in out
    assert MODEL_KEY not in out + err  # the server quotes the key it got; the doctor does not
    report = json.loads(json_out)
    assert json_code == 1 and report["ok"] is False and report["counts"]["fail"] == 1
    (model,) = [c for c in report["checks"] if c["name"] == "model"]
    assert model["persona"] == "Ada" and model["status"] == "fail"
    assert MODEL_KEY not in json_out


async def test_doctor_every_fake_at_once_is_green(
    world: World,
    openai_server: FakeOpenAIServer,
    ftp_server: tuple[str, int],
    graph: FakeGraphAPI,
) -> None:
    world.env.update(model_env(openai_server))
    instagram_persona(world, ftp_server, graph)
    async with FakeDiscord(bot_name="Harbor") as discord_fake:
        world.env["HARBOR_DISCORD_TOKEN"] = discord_fake.token
        world.persona(
            "Harbor",
            clients=["discord"],
            settings={"secrets": {"DISCORD_API_TOKEN": "$HARBOR_DISCORD_TOKEN"}},
        )

        report = await world.doctor()

    text = render_text(report)
    assert report.exit_code == 0, text
    assert {r.status for r in report.results} == {"ok"}, text
    names = {(r.persona, r.name) for r in report.results}
    assert {("Harbor", "discord token"), ("Harbor", "discord intents")} <= names
    assert {("Lumen", "instagram FTP"), ("Lumen", "instagram media URL")} <= names
    assert discord_fake.token not in text
