"""`carrier doctor`'s Instagram checks against the loopback Graph API and a real aioftp server,
whose root the fake Graph API serves over HTTP as the media host's public URL."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from carrier.character import Character
from carrier.doctor import ClientTarget, Result
from carrier.memory.sqlite import SQLiteStore
from clients.instagram.doctor import check
from clients.instagram.factory import fernet_key_from_secret
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.private.session import Cooldown, SessionVault
from tests.clients.instagram.helpers import FTP_PASSWORD, FTP_USER, TOKEN

SECRET_KEY = "a-carrier-secret-key-for-the-doctor-tests"


def character() -> Character:
    return Character.model_validate(
        {
            "name": "Lumen",
            "bio": ["Lumen shoots film."],
            "clients": ["instagram"],
            "settings": {
                "secrets": {
                    "INSTAGRAM_ACCESS_TOKEN": "$LUMEN_IG_TOKEN",
                    "FTP_PASSWORD": "$LUMEN_FTP_PASSWORD",
                    "INSTAGRAM_USERNAME": "$LUMEN_IG_USER",
                    "INSTAGRAM_PASSWORD": "$LUMEN_IG_PASSWORD",
                }
            },
        }
    )


def graph_config(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI, **ftp: Any
) -> dict[str, Any]:
    host, port = ftp_server
    return {
        "publisher": "graph",
        "igUserId": fake_graph.ig_user_id,
        "graphBaseUrl": fake_graph.url,
        "ftp": {
            "host": host,
            "port": port,
            "user": FTP_USER,
            "directory": "/media",
            "baseUrl": fake_graph.media_url,
            **ftp,
        },
    }


def target(
    config: dict[str, Any],
    environ: dict[str, str] | None = None,
    *,
    store: SQLiteStore | None = None,
) -> ClientTarget:
    env = {
        "LUMEN_IG_TOKEN": TOKEN,
        "LUMEN_FTP_PASSWORD": FTP_PASSWORD,
        "CARRIER_SECRET_KEY": SECRET_KEY,
    }
    env.update(environ or {})
    return ClientTarget(
        client="instagram",
        character=character(),
        config=config,
        environ={k: v for k, v in env.items() if v},
        store=store,
        timeout=60.0,
    )


def by_name(results: Sequence[Result]) -> dict[str, Result]:
    return {r.name: r for r in results}


def assert_no_secret(results: Sequence[Result]) -> None:
    text = " ".join(f"{r.detail} {r.fix}" for r in results)
    for secret in (TOKEN, FTP_PASSWORD, SECRET_KEY):
        assert secret not in text


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound but not listening: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


async def test_doctor_graph_all_green_and_the_probe_is_gone(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI, ftp_root: Path
) -> None:
    results = await check(target(graph_config(ftp_server, fake_graph)))

    found = by_name(results)
    assert [r.status for r in results] == ["ok"] * 4, results  # conversations not set up
    assert "@fake_account" in found["instagram token"].detail
    assert found["instagram quota"].detail == "0 of 50 posts used in the last 24 h"
    assert "serves what is uploaded" in found["instagram media URL"].detail
    assert list((ftp_root / "media").iterdir()) == []  # the probe was deleted
    assert ("GET", f"{fake_graph.ig_user_id}/content_publishing_limit") in (
        fake_graph.state.requests
    )
    assert_no_secret(results)


async def test_doctor_graph_token_rejected(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI
) -> None:
    results = await check(
        target(graph_config(ftp_server, fake_graph), {"LUMEN_IG_TOKEN": "EAAG-expired-token"})
    )

    found = by_name(results)
    assert found["instagram token"].status == "fail"
    assert "rejected the token in LUMEN_IG_TOKEN" in found["instagram token"].detail
    assert "set LUMEN_IG_TOKEN" in found["instagram token"].fix
    assert found["instagram quota"].status == "skip"
    assert found["instagram media URL"].status == "ok"  # the media host is checked all the same
    assert "EAAG-expired-token" not in " ".join(r.detail + r.fix for r in results)


async def test_doctor_graph_ftp_refused(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI, closed_port: int
) -> None:
    config = graph_config(ftp_server, fake_graph, port=closed_port)

    found = by_name(await check(target(config)))

    ftp = found["instagram FTP"]
    assert ftp.status == "fail" and f"127.0.0.1:{closed_port}" in ftp.detail
    assert "ConnectionRefusedError" in ftp.detail
    assert "check ftp.host and ftp.port" in ftp.fix
    assert found["instagram media URL"].status == "skip"
    assert found["instagram token"].status == "ok"


async def test_doctor_graph_ftp_login_refused(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI
) -> None:
    results = await check(
        target(graph_config(ftp_server, fake_graph), {"LUMEN_FTP_PASSWORD": "wrong-password"})
    )

    ftp = by_name(results)["instagram FTP"]
    assert ftp.status == "fail" and "refused the login" in ftp.detail
    assert "LUMEN_FTP_PASSWORD" in ftp.fix
    assert "wrong-password" not in ftp.detail + ftp.fix


async def test_doctor_graph_public_url_not_serving_the_probe(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI, ftp_root: Path
) -> None:
    # Uploads go to /outbox, but the public URL serves /media: Instagram would get a 404.
    config = graph_config(ftp_server, fake_graph, directory="/outbox")

    media = by_name(await check(target(config)))["instagram media URL"]

    assert media.status == "fail"
    assert "answered HTTP 404 to the uploaded probe" in media.detail
    assert "must serve ftp.directory (/outbox)" in media.fix
    assert list((ftp_root / "outbox").iterdir()) == []  # deleted all the same


async def test_doctor_graph_names_every_missing_secret_at_once(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI
) -> None:
    config = graph_config(ftp_server, fake_graph)
    del config["igUserId"]

    results = await check(target(config, {"LUMEN_IG_TOKEN": "", "LUMEN_FTP_PASSWORD": ""}))

    assert len(results) == 1 and results[0].status == "fail"
    assert results[0].detail.startswith(
        "LUMEN_IG_TOKEN and INSTAGRAM_BUSINESS_ACCOUNT_ID and LUMEN_FTP_PASSWORD are not set"
    )
    assert "settings.secrets.INSTAGRAM_ACCESS_TOKEN: $LUMEN_IG_TOKEN" in results[0].fix
    assert fake_graph.state.requests == []


async def test_doctor_config_errors_are_the_clients_own() -> None:
    results = await check(target({"publisher": "graph", "graphApiVersion": "21"}))

    assert results[0].name == "instagram config" and results[0].status == "fail"
    assert "graph_api_version" in results[0].detail or "graphApiVersion" in results[0].detail


async def test_doctor_instagrapi_session_absent_readable_or_not(store: SQLiteStore) -> None:
    env = {"LUMEN_IG_USER": "lumen.film", "LUMEN_IG_PASSWORD": "hunter2-but-longer"}
    config = {"publisher": "instagrapi"}

    first = by_name(await check(target(config, env, store=store)))
    assert first["instagram secrets"].status == "ok"
    assert first["instagram session"].status == "ok"
    assert "none saved yet" in first["instagram session"].detail

    agent_id = character().agent_id
    vault = SessionVault(store, agent_id, "lumen.film", fernet_key_from_secret(SECRET_KEY))
    await vault.save({"authorization_data": {"sessionid": "abc"}})
    saved = by_name(await check(target(config, env, store=store)))
    assert saved["instagram session"].detail == "a saved session exists and can be read"

    other_key = by_name(
        await check(target(config, {**env, "CARRIER_SECRET_KEY": "another-key"}, store=store))
    )
    session = other_key["instagram session"]
    assert session.status == "warn" and "cannot be decrypted" in session.detail
    assert "hunter2-but-longer" not in session.detail + session.fix


async def test_doctor_instagrapi_reports_a_cooldown(store: SQLiteStore) -> None:
    from datetime import timedelta

    from carrier.types import utcnow

    env = {"LUMEN_IG_USER": "lumen.film", "LUMEN_IG_PASSWORD": "hunter2-but-longer"}
    await Cooldown(store, character().agent_id, "lumen.film").start(
        utcnow() + timedelta(hours=1), "feedback_required"
    )

    found = by_name(await check(target({"publisher": "instagrapi"}, env, store=store)))

    assert found["instagram cooldown"].status == "warn"
    assert "feedback_required" in found["instagram cooldown"].detail


async def test_doctor_instagrapi_without_credentials_or_store() -> None:
    missing = await check(target({"publisher": "instagrapi"}))
    assert missing[0].status == "fail"
    assert "LUMEN_IG_USER and LUMEN_IG_PASSWORD are not set" in missing[0].detail

    env = {"LUMEN_IG_USER": "lumen.film", "LUMEN_IG_PASSWORD": "hunter2-but-longer"}
    no_store = by_name(await check(target({"publisher": "instagrapi"}, env)))
    assert no_store["instagram session"].status == "skip"


async def test_doctor_warns_of_what_instagrapi_does_instead(store: SQLiteStore) -> None:
    env = {"LUMEN_IG_USER": "lumen.film", "LUMEN_IG_PASSWORD": "hunter2-but-longer"}
    config = {"publisher": "instagrapi", "moderation": {"action": "hide"}}

    hide = by_name(await check(target(config, env, store=store)))["instagram backend"]
    delete = await check(target({**config, "moderation": {"action": "delete"}}, env, store=store))

    assert hide.status == "warn" and "cannot hide comments" in hide.detail
    assert "flagged for review instead" in hide.detail
    assert "instagram backend" not in by_name(delete)


async def test_doctor_says_how_comments_and_dms_arrive(
    ftp_server: tuple[str, int], fake_graph: FakeGraphAPI
) -> None:
    config = graph_config(ftp_server, fake_graph)
    secrets = {"INSTAGRAM_APP_SECRET": "s3cret-app", "INSTAGRAM_WEBHOOK_VERIFY_TOKEN": "v"}

    hooked = by_name(await check(target(config, secrets)))["instagram conversations"]
    polled = by_name(await check(target({**config, "conversations": {"poll": {"enabled": True}}})))
    unset = by_name(await check(target({**config, "conversations": {}})))

    assert hooked.status == "ok" and "/webhooks/instagram" in hooked.detail
    assert "s3cret-app" not in hooked.detail
    assert polled["instagram conversations"].status == "ok"
    assert polled["instagram conversations"].detail == "polled every 300 s"
    assert unset["instagram conversations"].status == "skip"
    assert "INSTAGRAM_APP_SECRET and INSTAGRAM_WEBHOOK_VERIFY_TOKEN not set" in (
        unset["instagram conversations"].detail
    )
