from __future__ import annotations

import stat
from pathlib import Path

import pytest

from carrier.secret_key import ensure_secret_key


def test_secret_key_from_environment_is_used_as_is(tmp_path: Path) -> None:
    env = {"CARRIER_SECRET_KEY": "given"}
    assert ensure_secret_key(tmp_path, env) == "given"
    assert not (tmp_path / "secret.key").exists()


def test_secret_key_generated_once_owner_only_and_reused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env: dict[str, str] = {}
    first = ensure_secret_key(tmp_path / "data", env)
    key_file = tmp_path / "data" / "secret.key"
    assert len(first) >= 40 and env["CARRIER_SECRET_KEY"] == first
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert "CARRIER_SECRET_KEY is not set" in caplog.text and first not in caplog.text
    assert ensure_secret_key(tmp_path / "data", {}) == first
