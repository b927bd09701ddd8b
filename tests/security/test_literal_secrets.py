"""Literal secrets are refused everywhere in a character: every key at every depth, lists
included, prose included, URLs with credentials; the error names the path and never the value.
The same check guards files (`carrier validate`), the API's create and update routes and cards."""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from carrier.character import (
    find_secret_problems,
    is_secret_name,
    load_character_text,
    write_card_png,
)
from carrier.character.loader import parse_character
from carrier.errors import CharacterError
from tests.api.conftest import CHARACTER

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "elizaos-characters"

OPENAI = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
GITHUB = "ghp_" + "a1B2c3D4e5" * 4
WEBHOOK = "https://discord.com/api/webhooks/123456789012345678/abcDEF_ghiJKL-mnoPQRstuVWX0123"
MONGO = "mongodb://carrier:hunter2hunter2@db.example:27017/carrier"
PLAIN = "plain-literal-Value-42"
"""A credential with no recognisable shape: only its key's name gives it away."""


def _with(path: str, value: Any) -> dict[str, Any]:
    """The minimal character with ``value`` placed at dotted ``path`` (digits index lists)."""
    data: dict[str, Any] = {"name": "Vault", "bio": ["Vault keeps things."]}
    node: Any = data
    parts = path.split(".")
    for part, after in itertools.pairwise(parts):
        nxt: Any = [] if after.isdigit() else {}
        if isinstance(node, list):
            node.append(nxt)
        else:
            node = node.setdefault(part, nxt)
            continue
        node = nxt
    last = parts[-1]
    if isinstance(node, list):
        node.append(value)
    else:
        node[last] = value
    return data


PLACES = [
    # (where it sits in the file, the literal, what the error must say)
    ("settings.voice.elevenlabs.apiKey", PLAIN, "literal secret"),
    ("clientConfig.discord.webhooks.0.token", PLAIN, "literal secret"),
    ("settings.apiKeys.0", PLAIN, "literal secret"),
    ("OPENAI_API_KEY", PLAIN, "literal secret"),
    ("clientConfig.discord.webhooks.0.url", WEBHOOK, "discord webhook"),
    ("settings.MONGODB_URL", MONGO, "password in its user info"),
    ("system", f"You are Vault. Call the API with {OPENAI}.", "openai key"),
    ("bio.1", f"Vault once pasted {GITHUB} into a chat by mistake.", "github token"),
    ("lore.0", f"Vault's archive lives at {MONGO} (do not share).", "password in its user info"),
    ("settings.api", "https://api.example.com/v1/search?api_key=Zx81kq0pLmN3", "query"),
]


@pytest.mark.parametrize(("path", "literal", "says"), PLACES)
def test_literal_secret_is_refused_with_its_path_and_never_its_value(
    path: str, literal: str, says: str
) -> None:
    data = _with(path, literal)

    problems = find_secret_problems(data)

    assert [p.path for p in problems] == [path]
    assert says in problems[0].message
    with pytest.raises(CharacterError) as info:
        load_character_text(json.dumps(data), fmt="json", source="vault.json")
    assert [p.path for p in info.value.problems] == [path]
    shown = str(info.value)
    assert literal not in shown and "hunter2" not in shown and "Zx81kq0pLmN3" not in shown


@pytest.mark.parametrize(
    "value",
    [
        "$VAULT_TOKEN",
        "${VAULT_TOKEN}",
        {"env": "VAULT_TOKEN"},
        "",
        None,
    ],
)
def test_references_and_empty_values_are_fine_everywhere(value: object) -> None:
    data = {
        "name": "Vault",
        "OPENAI_API_KEY": value,
        "settings": {"voice": {"apiKey": value}, "apiKeys": [value]},
        "clientConfig": {"discord": {"webhooks": [{"token": value, "name": "alerts"}]}},
    }
    assert find_secret_problems(data) == []


def test_urls_referencing_their_credentials_and_ordinary_text_are_fine() -> None:
    data = {
        "name": "Vault",
        "bio": ["Vault answers at https://vault.example/help?topic=keys and keeps no secrets."],
        "settings": {
            "MONGODB_URL": "mongodb://app:${MONGO_PASSWORD}@db.example/app",
            "search": "https://api.example.com/v1?api_key=$SEARCH_KEY&q=tides",
            "maxTokens": "4096",
            "voice": {"model": "en_US-male-medium"},
        },
        "lorebook": [{"keys": ["token", "password"], "content": "Passwords are never spoken."}],
    }
    assert find_secret_problems(data) == []


def test_a_key_shaped_like_a_credential_is_refused_without_echoing_it() -> None:
    problems = find_secret_problems({"name": "Vault", "settings": {OPENAI: True}})
    assert [p.path for p in problems] == ["settings.<a key shaped like an openai key>"]
    assert OPENAI not in str(problems[0])


def test_yaml_aliases_are_walked_once_and_a_self_nesting_list_ends() -> None:
    text = "name: Vault\na: &a [x, y, z]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"
    text += "loop: &loop [*loop]\n"
    data = yaml.safe_load(text)
    assert find_secret_problems(data) == []


@pytest.mark.parametrize(
    ("path", "literal"),
    [
        ("data.system_prompt", f"Remember the key {OPENAI}."),
        ("data.creator_notes", f"Webhook for feedback: {WEBHOOK}"),
    ],
)
def test_cards_are_checked_in_their_own_spelling(tmp_path: Path, path: str, literal: str) -> None:
    card: dict[str, Any] = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Vault", "description": "Vault keeps things.", "first_mes": "Hello."},
    }
    card["data"][path.split(".")[1]] = literal
    with pytest.raises(CharacterError) as info:
        parse_character(card, source="vault.json")
    assert [p.path for p in info.value.problems] == [path]
    assert literal not in str(info.value)

    png = write_card_png(card, tmp_path / "vault.png")
    result = _carrier("import-card", str(png), "-o", str(tmp_path / "out.yaml"), cwd=tmp_path)
    assert result.returncode != 0
    assert path in result.stdout + result.stderr
    assert OPENAI not in result.stdout + result.stderr and "abcDEF" not in result.stderr
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures is not beside the repository")
def test_carrier_validate_keeps_the_elizaos_fixtures_and_examples_valid(tmp_path: Path) -> None:
    result = _carrier("validate", str(FIXTURES), str(ROOT / "characters"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 with problems" in result.stdout


def test_carrier_validate_refuses_a_pasted_key_and_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "vault.yaml"
    path.write_text(yaml.safe_dump(_with("settings.voice.elevenlabs.apiKey", PLAIN)))
    result = _carrier("validate", str(path), cwd=tmp_path)
    assert result.returncode != 0
    assert "settings.voice.elevenlabs.apiKey" in result.stdout
    assert PLAIN not in result.stdout + result.stderr


async def test_api_create_and_update_refuse_literal_secrets(client: httpx.AsyncClient) -> None:
    leaky = {**CHARACTER, "system": f"Use {OPENAI}.", "settings": {"apiKeys": [PLAIN]}}
    created = await client.post("/agents", json=leaky)
    assert created.status_code == 422, created.text
    paths = sorted(p["path"] for p in created.json()["problems"])
    assert paths == ["settings.apiKeys.0", "system"]
    assert OPENAI not in created.text and PLAIN not in created.text
    assert (await client.get("/agents")).json() == []

    as_yaml = await client.post(
        "/agents",
        content=yaml.safe_dump(_with("clientConfig.discord.webhooks.0.token", PLAIN)),
        headers={"Content-Type": "application/yaml"},
    )
    assert as_yaml.status_code == 422 and PLAIN not in as_yaml.text

    agent_id = (await client.post("/agents", json=CHARACTER)).json()["id"]
    update = {**CHARACTER, "bio": [f"Pilot's notes: {MONGO}"]}
    replaced = await client.put(f"/agents/{agent_id}", json=update)
    assert replaced.status_code == 422, replaced.text
    assert [p["path"] for p in replaced.json()["problems"]] == ["bio.0"]
    assert "hunter2" not in replaced.text
    shown = (await client.get(f"/agents/{agent_id}")).json()
    assert shown["character"]["bio"] == CHARACTER["bio"]  # the stored character is unchanged


async def test_api_card_upload_refuses_a_card_with_a_pasted_key(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Vault", "description": "Vault.", "system_prompt": f"Key: {OPENAI}"},
    }
    png = write_card_png(card, tmp_path / "vault.png").read_bytes()
    response = await client.post(
        "/agents", files={"file": ("vault.png", io.BytesIO(png), "image/png")}
    )
    assert response.status_code == 422, response.text
    assert [p["path"] for p in response.json()["problems"]] == ["data.system_prompt"]
    assert OPENAI not in response.text
    assert base64.b64encode(OPENAI.encode()).decode()[:20] not in response.text


async def test_api_client_config_refuses_a_literal_inside_a_list(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/clients/discord/config", json={"webhooks": [{"name": "alerts", "token": PLAIN}]}
    )
    assert response.status_code == 422, response.text
    assert PLAIN not in response.text
    assert "webhooks.0.token" in response.text


def _carrier(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARRIER_")}
    env.update({"CARRIER_DATA_DIR": str(cwd / "data"), "HF_HUB_OFFLINE": "1"})
    return subprocess.run(
        [sys.executable, "-m", "carrier", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=240,
    )


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("apiKeys", True),
        ("accessTokens", True),
        ("passwords", True),
        ("keys", False),
        ("secondary_keys", False),
        ("maxTokens", False),
    ],
)
def test_plural_credential_names_count_only_after_a_qualifier(key: str, secret: bool) -> None:
    assert is_secret_name(key) is secret
