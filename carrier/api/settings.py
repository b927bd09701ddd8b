"""Settings of the agent API, from ``CARRIER_*`` variables (read at the edge, like Settings)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["ApiSettings", "load_api_settings"]


class ApiSettings(BaseSettings):
    """Limits, CORS and rate limits of the API. Every field maps to ``CARRIER_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="CARRIER_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Origins allowed to call the API from a browser (comma-separated); none by default."""
    max_json_bytes: int = Field(default=1_000_000, ge=1)
    """Largest request body that is not a file upload (JSON, YAML)."""
    max_upload_bytes: int = Field(default=25_000_000, ge=1)
    """Largest multipart request (file uploads)."""
    upload_quota_files: int = Field(default=500, ge=1)
    """Most files one agent's uploads (media to post, files sent with messages) keep on disk."""
    upload_quota_bytes: int = Field(default=1_000_000_000, ge=1)
    """Most bytes one agent's uploads keep on disk (413 ``upload_quota`` beyond)."""
    attachment_text_chars: int = Field(default=20_000, ge=0)
    """How much of an uploaded text file is read into the message."""
    rate_per_minute: float = Field(default=120.0, gt=0)
    """Requests per minute per token (a token bucket refilled at this rate)."""
    rate_burst: int = Field(default=30, ge=1)
    """Requests a token may make at once before the rate applies."""
    token_cache_seconds: float = Field(default=5.0, ge=0)
    """How long per-agent tokens are cached in memory (a token deleted by another process stops
    working after at most this long)."""
    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a client has to send a request's headers (from connecting, or from the previous
    reply on a kept-alive connection) before the server closes the connection."""
    keep_alive_timeout: int = Field(default=5, ge=1)
    """Seconds an idle kept-alive connection stays open."""

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


def load_api_settings(
    environ: Mapping[str, str] | None = None, *, env_file: str | None = ".env"
) -> ApiSettings:
    """From an explicit environment mapping (tests; no ``.env``) or the process environment."""
    if environ is None:
        return ApiSettings(_env_file=env_file)  # type: ignore[call-arg]
    prefixed = {
        key[len("CARRIER_") :].lower(): value
        for key, value in environ.items()
        if key.startswith("CARRIER_")
    }
    return ApiSettings.model_validate(prefixed)
