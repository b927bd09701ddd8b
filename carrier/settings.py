"""Settings from ``CARRIER_*`` environment variables and a ``.env`` file.

Read once at the edge (the CLI, the server start-up) and passed inward; the core never reads the
environment itself. Tests build ``Settings`` directly or with an injected environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "load_settings"]


class Settings(BaseSettings):
    """Process-wide configuration. Every field maps to ``CARRIER_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="CARRIER_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
    )

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".carrier")
    """Embedded store, caches and generated keys."""
    mongodb_uri: SecretStr | None = None
    """Use MongoDB instead of the embedded SQLite store."""
    model: str | None = None
    """Default litellm model string (e.g. ``openai/gpt-4o-mini``) for characters that name none."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible endpoint (a local server, a proxy) used with ``model``."""
    admin_token: SecretStr | None = None
    secret_key: SecretStr | None = None
    characters_dir: Path = Path("characters")
    """Where ``carrier run`` finds personas when none are named."""
    log_level: str = "INFO"
    recent_messages: int = Field(default=20, ge=1, le=500)
    """How many recent room messages go into a prompt."""
    recall_k: int = Field(default=6, ge=0, le=100)
    """How many semantically recalled memories go into a prompt."""
    fact_interval: int = Field(default=4, ge=1)
    """Run fact extraction every N inbound messages per room."""
    summary_threshold: int = Field(default=20, ge=0)
    """Summarize a room's history once this many messages left the recent window (0: never)."""
    memory_tools: bool = False
    """Offer memory_search/memory_write/memory_read to the model as tools (a character may turn
    them on for itself with ``settings.memoryTools: true``). Tools on offer turn off streaming of
    the model's first answer, hence off by default."""
    audit_retention_days: int = Field(default=365, ge=1)
    """Days the audit log keeps an entry; the daily retention job deletes older ones."""
    job_lease_seconds: float = Field(default=10.0, gt=0, le=3600)
    """How long a job worker's claim holds without renewal; the worker renews it every third of
    that while the job runs, so after a worker dies another takes its jobs over within about
    this long."""

    @field_validator("data_dir", "characters_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @property
    def store_path(self) -> Path:
        return self.data_dir / "carrier.db"


def load_settings(
    environ: Mapping[str, str] | None = None, *, env_file: str | None = ".env"
) -> Settings:
    """Build settings from an explicit environment mapping (tests) or the process environment.

    With ``environ`` given, only that mapping is read (no ``.env``), so tests never touch the real
    environment.
    """
    if environ is None:
        return Settings(_env_file=env_file)  # type: ignore[call-arg]
    prefixed = {
        key[len("CARRIER_") :].lower(): value
        for key, value in environ.items()
        if key.startswith("CARRIER_")
    }
    return _InjectedSettings.model_validate(prefixed)


class _InjectedSettings(Settings):
    """Settings read from the given values only: no process environment, no ``.env``."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: Any, *args: Any, **kwargs: Any
    ) -> tuple[Any, ...]:
        return (init_settings,)
