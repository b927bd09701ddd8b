"""Settings from ``CARRIER_*`` environment variables and a ``.env`` file.

Read once at the edge (the CLI, the server start-up) and passed inward; the core never reads the
environment itself. Tests build ``Settings`` directly or with an injected environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from carrier.errors import ConfigError

__all__ = ["ADMIN_TOKEN_MIN", "MAKE_TOKEN", "Settings", "explain_settings", "load_settings"]

ADMIN_TOKEN_MIN = 24
"""The shortest ``CARRIER_ADMIN_TOKEN`` accepted: it guards everything, so it must not be
guessable (a token from :data:`MAKE_TOKEN` has 43 characters)."""
MAKE_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'
"""The command the error messages suggest for making an admin token."""


class Settings(BaseSettings):
    """Process-wide configuration. Every field maps to ``CARRIER_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="CARRIER_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        # A rejected value may be a secret (the admin token, a MongoDB URL with a password):
        # errors name the setting, never repeat what it was set to.
        hide_input_in_errors=True,
    )

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".carrier")
    """Embedded store, caches and generated keys."""
    mongodb_uri: SecretStr | None = None
    """Use MongoDB instead of the embedded SQLite store."""
    model: str | None = None
    """Default litellm model string (e.g. ``openai/gpt-4o-mini``) for characters that name none."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible endpoint (a local server, a proxy) used with ``model``."""
    model_timeout: float = Field(default=20.0, gt=0, le=600)
    """Seconds one model call attempt may take before it is abandoned (and retried, or handed to
    a fallback model). A character's ``settings.modelTimeout`` overrides it."""
    turn_deadline: float = Field(default=45.0, gt=0, le=3600)
    """Seconds a turn's model calls may take in all, retries and fallbacks included; then the
    turn ends failed and the person reads a short apology. A character's
    ``settings.turnDeadline`` overrides it."""
    model_direct: bool = True
    """Send a plain ``openai/`` chat call (a model litellm passes on unchanged, a local
    OpenAI-compatible server) straight over HTTP instead of through litellm, at a tenth of the
    CPU (:mod:`carrier.llm._direct`); false sends every call through litellm."""
    admin_token: SecretStr | None = None
    """The API's admin bearer token, at least :data:`ADMIN_TOKEN_MIN` characters. Unset: a local
    token is minted into the data dir (:mod:`carrier.local_token`) and the API binds to
    loopback only."""
    public_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Host names the API answers to besides the address it listens on and, on loopback,
    ``localhost``/``127.0.0.1``/``[::1]`` (comma-separated; ``name`` or ``name:port``): the
    names of a reverse proxy in front of it. Any other ``Host`` is refused (DNS rebinding)."""
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
    tool_env: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Environment variables registered tools may send in headers (comma-separated ``NAME``,
    ``NAME@host`` or a pattern like ``WEATHER_*``); none by default. ``CARRIER_*``, provider keys
    and platform credentials only by exact name (see :mod:`carrier.tools.policy`)."""
    tool_internal_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Hosts tools may reach although they are (or resolve to) loopback, private or link-local
    addresses (comma-separated names or addresses); none by default."""
    tool_calls_per_hour: int = Field(default=20, ge=1, le=100_000)
    """How many calls of one tool one person may set off in an hour (a tool may set its own)."""
    reply_recovery_seconds: float = Field(default=120.0, gt=0, le=86400)
    """How long after it was written a reply a stopped process left unsent is still sent when
    the agent starts again; an older one is marked failed (``not delivered within N s``)."""
    gate_store: int = Field(default=0, ge=0, le=10_000)
    """Per agent: turns storing their message at once (0: no bound, the default: a message
    waiting before its first write would not be saved yet); see
    :class:`carrier.limits.TurnLimits`."""
    gate_message: int = Field(default=64, ge=0, le=10_000)
    """Per agent: turns in the message stage (hooks, embedding) at once (0: no bound)."""
    gate_state: int = Field(default=8, ge=0, le=10_000)
    """Per agent: turns composing their state (recent messages, recall) at once (0: no bound)."""
    gate_evaluate: int = Field(default=8, ge=0, le=10_000)
    """Per agent: turns recording their replies at once (0: no bound)."""
    model_concurrency: int = Field(default=0, ge=0, le=10_000)
    """Per agent: answers being asked of the model at once (0: no cap)."""
    overload_wait: float = Field(default=5.0, gt=0, le=3600)
    """Seconds a new message may be expected to queue before an agent counts as overloaded:
    the API then answers 429 with ``Retry-After`` (storing nothing); Discord shows the typing
    indicator and pauses the turn briefly."""
    embed_threads: int | None = Field(default=None, ge=0, le=1024)
    """Intra-op threads for the embedding model, torch's or the numpy engine's BLAS threads (0:
    the library's default, one per core; unset: :data:`carrier.memory.sentence.DEFAULT_THREADS`,
    measured for serving)."""
    embed_engine: Literal["auto", "numpy", "torch"] = "auto"
    """What runs the embedding model: ``numpy`` (:mod:`carrier.memory.bert`: loads in a fraction
    of a second, all-MiniLM-L6-v2 and other BERT models with mean pooling), ``torch``
    (sentence-transformers, every model) or ``auto`` (numpy where it can). Both make the same
    vectors."""
    background_workers: int = Field(default=2, ge=1, le=64)
    """Per agent: fact extractions and summaries running at once, after their turns."""
    background_backlog: int = Field(default=64, ge=1, le=100_000)
    """Per agent: background jobs waiting (one per evaluator and room); beyond it the oldest
    is dropped, and caught up by its room's next turn."""
    background_patience: float = Field(default=2.0, ge=0, le=3600)
    """Per agent: seconds a background job waits for turns to leave their stages of CPU work
    (storing, embedding, recall, recording) before it starts anyway (0: at once)."""
    connection_lease_seconds: float = Field(default=15.0, ge=3, le=600)
    """How long a platform connection's lease (one per bot token, or per shard) holds unrenewed:
    after a worker dies, another connects within about this long. The holder renews it every
    third of that and stops its client when a renewal cannot be confirmed for two thirds of it;
    the worker presence leases (``carrier health --worker``) last as long. Shorter takes over
    sooner; longer rides out slower stores."""
    job_lease_seconds: float = Field(default=10.0, gt=0, le=3600)
    """How long a job worker's claim holds without renewal; the worker renews it every third of
    that while the job runs, so after a worker dies another takes its jobs over within about
    this long."""

    @field_validator("data_dir", "characters_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("admin_token", mode="after")
    @classmethod
    def _strong_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        token = value.get_secret_value()
        if not token.strip():
            raise ValueError(
                "CARRIER_ADMIN_TOKEN is set but blank: unset it (a local token is then minted "
                f"into the data dir) or set it to a long random string ({MAKE_TOKEN})"
            )
        if token != token.strip():
            raise ValueError(
                "CARRIER_ADMIN_TOKEN starts or ends with whitespace, which no client sends "
                "back: remove it"
            )
        if len(token) < ADMIN_TOKEN_MIN:
            raise ValueError(
                f"CARRIER_ADMIN_TOKEN is too short ({len(token)} characters; at least "
                f"{ADMIN_TOKEN_MIN}): make one with {MAKE_TOKEN}"
            )
        return value

    @field_validator("tool_env", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            return [str(part).strip() for part in value if str(part).strip()]
        return value

    @field_validator("public_hosts", "tool_internal_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            return [str(part).strip().lower() for part in value if str(part).strip()]
        return value

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


def explain_settings(exc: ValidationError) -> ConfigError:
    """A :class:`ConfigError` naming each invalid ``CARRIER_*`` variable and what is wrong with
    it (never its value), for the commands to print instead of a traceback."""
    lines = []
    for error in exc.errors():
        name = "CARRIER_" + "_".join(str(part) for part in error["loc"]).upper()
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(message if message.startswith(name) else f"{name}: {message}")
    return ConfigError("invalid settings: " + "; ".join(lines))


class _InjectedSettings(Settings):
    """Settings read from the given values only: no process environment, no ``.env``."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: Any, *args: Any, **kwargs: Any
    ) -> tuple[Any, ...]:
        return (init_settings,)
