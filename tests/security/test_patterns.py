"""Secret shapes: recognised by vendor prefix and random tail; prose and identifiers are not."""

from __future__ import annotations

import pytest

from carrier.safety.patterns import (
    find_secret_shapes,
    looks_like_secret,
    mask_url,
    url_credentials,
)

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----"

SECRETS = {
    "openai key": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "anthropic key": "sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w",
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "github token": "ghp_" + "a1B2c3D4e5" * 4,
    "slack token": "xoxb-1234567890-abcdefghij",
    "google api key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "pem private key": PEM,
    "discord bot token": "MTA5NzY1NDMyMTA5ODc2NTQzMg.GhIjKl.abcdefghijklmnopqrstuvwxyz0123",
    "discord webhook": "https://discord.com/api/webhooks/123456789/abcDEF_ghiJKL-mnoPQRstuVWX",
    "json web token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "carrier api token": "crr_" + "Q" * 43,
    "url credentials": "mongodb://carrier:hunter2hunter2@db.example:27017/carrier",
}


@pytest.mark.parametrize(("kind", "secret"), SECRETS.items())
def test_patterns_find_each_shape_inside_prose(kind: str, secret: str) -> None:
    text = f"Sure! Here it is: {secret} — keep it safe."
    spans = find_secret_shapes(text)
    assert [k for _, _, k in spans] == [kind]
    start, end, _ = spans[0]
    assert text[start:end] in secret and len(text[start:end]) >= 12
    assert looks_like_secret(secret) == kind


@pytest.mark.parametrize(
    "text",
    [
        "Ask in #help-desk with your Unity version.",
        "max_tokens and keywords are settings, not secrets",
        "task-list-item-for-sprint-12 and sk-short",
        "https://example.com/docs?page=2&lang=en",
        "an AKIA mention without the key",
        "user@example.com wrote: see https://user@example.com/x",
    ],
)
def test_patterns_leave_ordinary_text_alone(text: str) -> None:
    assert find_secret_shapes(text) == []
    assert looks_like_secret(text) is None


def test_patterns_url_credentials_and_their_masking() -> None:
    assert url_credentials("https://user:pw@api.example/v1")
    assert url_credentials("https://api.example/v1?key=abc123&x=1")
    assert not url_credentials("https://api.example/v1?key=&x=1")
    assert not url_credentials("http://127.0.0.1:8080/v1")
    assert mask_url("https://user:pw@api.example/v1?api_key=abc&q=1") == (
        "https://user:***@api.example/v1?api_key=%2A%2A%2A&q=1"
    )
    assert mask_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert mask_url("not a url") == "not a url"
