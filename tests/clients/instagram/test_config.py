"""The clientConfig.instagram model, the caption rules and the client factory."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from carrier.character import Character, load_character
from carrier.clients import ClientUnavailable
from carrier.errors import ConfigError
from carrier.memory.sqlite import SQLiteStore
from clients.instagram import (
    CaptionRejected,
    InstagramClient,
    create_client,
    fernet_key_from_secret,
    parse_config,
)
from clients.instagram.caption import prepare_caption
from clients.instagram.graph import GraphPublisher
from clients.instagram.private import InstagrapiPublisher

ROOT = Path(__file__).resolve().parents[3]
FTP = {
    "host": "ftp.example.com",
    "user": "up",
    "directory": "media/",
    "baseUrl": "https://cdn.example.com/m/",
}


def test_lumen_config_parses_with_defaults() -> None:
    lumen = load_character(ROOT / "characters" / "lumen.yaml")
    config = parse_config(lumen.client_config["instagram"])
    assert config.publisher == "graph" and config.require_approval is True
    assert config.max_hashtags == 5 and config.caption_max_length == 2200
    assert config.fit == "pad" and config.background_rgb == (255, 255, 255)
    assert config.graph_api_version == "v21.0" and config.dry_run is False
    assert config.model_extra == {"timezone": "Europe/Lisbon"}


def test_camel_and_snake_case_keys_are_both_accepted() -> None:
    config = parse_config(
        {
            "publisher": "graph",
            "ig_user_id": "178",
            "graphApiVersion": "v22.0",
            "graphBaseUrl": "http://127.0.0.1:9/",
            "fit": "crop",
            "background": "#000000",
            "cleanup": False,
            "ftp": {**FTP, "cleanup": False},
            "instagrapi": {"delayRange": [2, 5], "cooldownMinutes": 30},
            "dryRun": True,
        }
    )
    assert config.graph_base_url == "http://127.0.0.1:9" and config.ig_user_id == "178"
    assert config.ftp is not None and config.ftp.directory == "/media"
    assert (
        config.ftp.base_url == "https://cdn.example.com/m"
        and config.ftp.delete_after_publish is False
    )
    assert config.instagrapi.delay_range == (2.0, 5.0) and config.dry_run is True


def test_validation_errors_name_every_bad_field() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "publisher": "facebook",
                "graphApiVersion": "21",
                "fit": "stretch",
                "background": "teal-ish",
                "maxHashtags": 31,
                "ftp": {"host": "x", "baseUrl": "ftp://nope"},
                "instagrapi": {"delayRange": [5, 1]},
            }
        )
    message = str(info.value)
    for path in (
        "clientConfig.instagram.publisher",
        "clientConfig.instagram.graphApiVersion: Value error, expected a Graph API version like 'v21.0'",
        "clientConfig.instagram.fit",
        "clientConfig.instagram.background",
        "clientConfig.instagram.maxHashtags",
        "clientConfig.instagram.ftp.baseUrl: Value error, ftp.baseUrl must be an http(s) URL",
        "clientConfig.instagram.instagrapi.delayRange",
    ):
        assert path in message


def test_captions_keep_the_first_hashtags_and_refuse_overlong_text() -> None:
    text = "fog at six.  #35mm #film #35MM #portra #fog #ferry #lisbon\n\n\n\nportra 400 #extra"
    assert prepare_caption(text, max_hashtags=3) == "fog at six. #35mm #film #portra\n\nportra 400"
    assert prepare_caption("no tags & #1 issue", max_hashtags=0) == "no tags & issue"
    with pytest.raises(CaptionRejected, match="2201 characters; Instagram allows at most 2200"):
        prepare_caption("x" * 2201)


def character(**secrets: str) -> Character:
    return Character.model_validate(
        {"name": "Lumen", "settings": {"secrets": {k: f"${k}" for k in secrets}}}
    )


async def test_create_client_builds_the_configured_publisher(tmp_path: Path) -> None:
    async with SQLiteStore(path=tmp_path / "c.db") as store:
        env = {
            "INSTAGRAM_ACCESS_TOKEN": "tok",
            "INSTAGRAM_BUSINESS_ACCOUNT_ID": "178",
            "FTP_PASSWORD": "pw",
            "INSTAGRAM_USERNAME": "lumen",
            "INSTAGRAM_PASSWORD": "pw",
            "CARRIER_SECRET_KEY": "s3cret",
        }
        runtime = SimpleNamespace(character=character(**env), store=store)
        graph = create_client(runtime, {"ftp": FTP}, env)
        assert isinstance(graph, InstagramClient) and isinstance(graph.publisher, GraphPublisher)
        assert "tok" not in repr(graph.publisher.api)
        private = create_client(runtime, {"publisher": "instagrapi"}, env)
        assert isinstance(private.publisher, InstagrapiPublisher)
        await graph.stop()
        await private.stop()


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ({}, {}, "clientConfig.instagram.ftp is missing"),
        ({"ftp": FTP}, {}, "INSTAGRAM_ACCESS_TOKEN is not set"),
        ({"ftp": FTP}, {"INSTAGRAM_ACCESS_TOKEN": "t"}, "INSTAGRAM_BUSINESS_ACCOUNT_ID is not set"),
        ({"ftp": FTP, "igUserId": "1"}, {"INSTAGRAM_ACCESS_TOKEN": "t"}, "FTP_PASSWORD is not set"),
        ({"publisher": "instagrapi"}, {}, "needs CARRIER_SECRET_KEY"),
        ({"publisher": "instagrapi"}, {"CARRIER_SECRET_KEY": "k"}, "INSTAGRAM_USERNAME is not set"),
        ({"publisher": "nope"}, {}, "clientConfig.instagram.publisher"),
    ],
)
async def test_create_client_says_what_is_missing(
    tmp_path: Path, config: dict[str, object], env: dict[str, str], expected: str
) -> None:
    runtime = SimpleNamespace(character=character(), store=SQLiteStore(path=tmp_path / "c.db"))
    with pytest.raises(ClientUnavailable, match=expected):
        create_client(runtime, config, env)


def test_the_session_key_is_derived_stably_from_the_secret() -> None:
    key = fernet_key_from_secret("s3cret")
    assert key == fernet_key_from_secret("s3cret") != fernet_key_from_secret("other")
    assert len(key) == 44
