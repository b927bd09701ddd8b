from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from carrier.settings import load_settings


def test_settings_from_injected_environment_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CARRIER_MODEL", "from/process-env")
    settings = load_settings(
        {"CARRIER_DATA_DIR": str(tmp_path), "CARRIER_RECALL_K": "3", "OTHER": "x"}
    )
    assert settings.data_dir == tmp_path
    assert settings.store_path == tmp_path / "carrier.db"
    assert settings.recall_k == 3
    assert settings.model is None  # the process environment was not read


def test_settings_from_process_environment_and_dotenv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text(
        "CARRIER_MODEL=openai/from-dotenv\nCARRIER_ADMIN_TOKEN=hunter2-correct-horse-battery-staple\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CARRIER_RECENT_MESSAGES", "7")
    settings = load_settings()
    assert settings.model == "openai/from-dotenv"
    assert settings.recent_messages == 7
    assert (
        settings.admin_token is not None
        and settings.admin_token.get_secret_value() == "hunter2-correct-horse-battery-staple"
    )
    assert "hunter2-correct-horse-battery-staple" not in repr(settings)


def test_settings_invalid_value_names_the_variable() -> None:
    with pytest.raises(ValidationError, match="recall_k"):
        load_settings({"CARRIER_RECALL_K": "lots"})


def test_settings_data_dir_expands_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_settings({"CARRIER_DATA_DIR": "~/data"}).data_dir == tmp_path / "data"


def test_settings_connection_lease_shorter_than_3_s_is_refused() -> None:
    with pytest.raises(ValidationError, match="connection_lease_seconds"):
        load_settings({"CARRIER_CONNECTION_LEASE_SECONDS": "1"})
