"""``InstagramConfig``: the ``clientConfig.instagram`` section of a character, validated.

Keys are camelCase in character files and snake_case in code; both are accepted. Secrets are
never here: they are named (``accessTokenSecret: INSTAGRAM_ACCESS_TOKEN``) and resolved through
``Character.resolve_secret`` at the edge::

    clientConfig:
      instagram:
        publisher: graph               # or instagrapi
        igUserId: "17841400000000000"  # or the INSTAGRAM_BUSINESS_ACCOUNT_ID secret
        graphApiVersion: v21.0
        fit: pad                       # crop | pad, for images outside 4:5 .. 1.91:1
        background: "#ffffff"          # what transparent pixels and padding become
        maxHashtags: 5
        plan: {...}                    # a posting plan: see clients/instagram/plan.py
        conversations: {...}           # answering comments and DMs: inbound/policy.py
        moderation: {...}              # hiding or flagging comments: inbound/moderation.py
        ftp:
          host: ftp.example.com
          user: uploader
          directory: /public_html/media
          baseUrl: https://example.com/media
          deleteAfterPublish: true

Nothing here imports aioftp, httpx or instagrapi, so a configuration validates without them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from carrier.errors import ConfigError
from clients.instagram.inbound.moderation import ModerationSettings
from clients.instagram.inbound.policy import ConversationSettings
from clients.instagram.plan import PostingPlan, check_timezone, parse_approval

__all__ = [
    "FtpSettings",
    "InstagramConfig",
    "InstagrapiSettings",
    "parse_colour",
    "parse_config",
]

_VERSION = re.compile(r"^v\d+\.\d+$")
_HEX = re.compile(r"^#?([0-9a-fA-F]{6})$")


def parse_colour(value: str) -> tuple[int, int, int]:
    """``#rrggbb`` (or a few names) as an RGB tuple."""
    names = {"white": "#ffffff", "black": "#000000"}
    match = _HEX.match(names.get(value.strip().lower(), value.strip()))
    if not match:
        raise ValueError(f"expected a colour like '#ffffff', got {value!r}")
    raw = match.group(1)
    return (int(raw[0:2], 16), int(raw[2:4], 16), int(raw[4:6], 16))


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


def _http_url(value: str, what: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError(f"{what} must be an http(s) URL, got {value!r}")
    return value.rstrip("/")


class FtpSettings(_Model):
    """Where Graph API media is put so Instagram can fetch it by URL."""

    host: str
    port: int = Field(default=21, ge=1, le=65535)
    user: str | None = Field(default=None, validation_alias=AliasChoices("user", "username"))
    """Login name; when unset, the ``FTP_USER`` secret."""
    password_secret: str = "FTP_PASSWORD"
    """Name of the secret (environment reference) holding the password."""
    directory: str = "/"
    """Remote directory the files go to (created when missing)."""
    base_url: str
    """Public URL of ``directory``: a file ``x.jpg`` is served at ``{base_url}/x.jpg``."""
    tls: bool = False
    """Explicit FTPS (AUTH TLS) after connecting."""
    delete_after_publish: bool = Field(
        default=True, validation_alias=AliasChoices("deleteAfterPublish", "cleanup")
    )
    check_url: bool = True
    """Check that each public URL answers 200 with the right content type before publishing."""

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        return _http_url(value, "ftp.baseUrl")

    @field_validator("directory")
    @classmethod
    def _directory(cls, value: str) -> str:
        return "/" + value.strip("/") if value.strip("/") else "/"


class InstagrapiSettings(_Model):
    """Options of the private-API publisher."""

    delay_range: tuple[float, float] = (1.0, 3.0)
    """Random pause (seconds) instagrapi takes before each request, like a person would."""
    configure_timeout: float = Field(default=10.0, ge=0)
    """Seconds instagrapi waits between attempts to configure an uploaded album or clip."""
    cooldown_minutes: float = Field(default=60.0, gt=0)
    """How long the account rests after 'please wait a few minutes' or a rate limit."""
    feedback_cooldown_hours: float = Field(default=24.0, gt=0)
    """How long the account rests after Instagram's 'feedback_required' (an action block)."""

    @field_validator("delay_range")
    @classmethod
    def _range(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if low < 0 or high < low:
            raise ValueError("expected [min, max] seconds with 0 <= min <= max")
        return value


class InstagramConfig(_Model):
    """The whole ``clientConfig.instagram`` section. Unknown keys are kept."""

    publisher: Literal["graph", "instagrapi"] = "graph"
    ig_user_id: str | None = None
    """Instagram professional account id; when unset, the ``INSTAGRAM_BUSINESS_ACCOUNT_ID`` secret."""
    graph_api_version: str = Field(
        default="v21.0", validation_alias=AliasChoices("graphApiVersion", "apiVersion")
    )
    graph_base_url: str = Field(
        default="https://graph.facebook.com",
        validation_alias=AliasChoices("graphBaseUrl", "graphUrl", "apiBaseUrl"),
    )
    """``https://graph.facebook.com`` (Facebook Login) or ``https://graph.instagram.com``."""
    request_timeout: float = Field(default=30.0, gt=0)
    poll_interval: float = Field(default=2.0, gt=0)
    """First wait between container status checks; doubles up to ``poll_max_interval``."""
    poll_max_interval: float = Field(default=30.0, gt=0)
    poll_timeout: float = Field(default=600.0, gt=0)
    """After this long a container still IN_PROGRESS is left for a later run of the job."""
    daily_limit: int = Field(
        default=50, ge=1, validation_alias=AliasChoices("dailyLimit", "dailyPublishLimit")
    )
    """Posts per rolling 24 h counted locally (the API's own limit is checked as well)."""
    fit: Literal["crop", "pad"] = Field(
        default="pad", validation_alias=AliasChoices("fit", "aspect", "aspectMode")
    )
    background: str = "#ffffff"
    max_hashtags: int = Field(default=5, ge=0, le=30)
    caption_max_length: int = Field(default=2200, ge=1, le=2200)
    dry_run: bool = False
    """Check and convert media, build the caption, but upload and publish nothing."""
    require_approval: bool = Field(
        default=False, validation_alias=AliasChoices("requireApproval", "approval")
    )
    """Drafts wait for a human (``true`` / ``required``); a plan's ``approval`` overrides it."""
    plan: PostingPlan | None = None
    """When and what to post (see :mod:`clients.instagram.plan`)."""
    ftp: FtpSettings | None = None
    instagrapi: InstagrapiSettings = Field(default_factory=InstagrapiSettings)
    conversations: ConversationSettings = Field(default_factory=ConversationSettings)
    """Whom the persona answers (comments, mentions, DMs): see
    :mod:`clients.instagram.inbound.policy`."""
    moderation: ModerationSettings = Field(default_factory=ModerationSettings)
    """Comments hidden or flagged by rules: see :mod:`clients.instagram.inbound.moderation`."""

    @field_validator("graph_api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _VERSION.match(value):
            raise ValueError(f"expected a Graph API version like 'v21.0', got {value!r}")
        return value

    @field_validator("require_approval", mode="before")
    @classmethod
    def _approval_words(cls, value: Any) -> Any:
        return parse_approval(value)

    @model_validator(mode="after")
    def _known_timezone(self) -> InstagramConfig:
        try:
            check_timezone(self.timezone)
        except ValueError as exc:
            raise ValueError(f"timezone: {exc}") from None
        return self

    @property
    def timezone(self) -> str | None:
        """The account's time zone (``timezone``, kept as an extra key), for plans."""
        value = (self.model_extra or {}).get("timezone")
        return str(value) if value else None

    @field_validator("graph_base_url")
    @classmethod
    def _base(cls, value: str) -> str:
        return _http_url(value, "graphBaseUrl")

    @field_validator("background")
    @classmethod
    def _background(cls, value: str) -> str:
        parse_colour(value)
        return value

    @property
    def background_rgb(self) -> tuple[int, int, int]:
        return parse_colour(self.background)


def parse_config(config: Mapping[str, Any] | None) -> InstagramConfig:
    """Validate ``clientConfig.instagram``; a :class:`ConfigError` names every bad field."""
    try:
        parsed = InstagramConfig.model_validate(dict(config or {}))
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = "".join(f".{p}" for p in error["loc"])
            lines.append(f"  - clientConfig.instagram{where}: {error['msg']}")
        raise ConfigError("invalid Instagram configuration:\n" + "\n".join(lines)) from None
    return parsed
