"""Posting plans: when an agent posts on Instagram, what it posts, and the rules for its captions.

A plan is the ``plan`` section of ``clientConfig.instagram`` (camelCase or snake_case keys;
unknown keys are refused, so a typo does not silently turn a rule off)::

    clientConfig:
      instagram:
        timezone: Europe/Lisbon        # the plan's default time zone
        plan:
          schedule:                    # exactly one of cron / interval / at
            cron: "0 9 * * mon-fri"
            jitter: 20m                # cron only: each post up to 20 minutes later
            # interval: {min: 90m, max: 3h}   (or interval: 6h)
            # at: ["2025-06-01T09:00", "2025-06-03 18:30"]   (naive times in the time zone)
          media:
            library: media/lumen       # a folder (relative to the character file); each file once
            order: sequential          # or random
          caption:
            maxHashtags: 5             # default: clientConfig.instagram.maxHashtags
            maxLength: 2200
            similarity: 0.9            # refuse captions this close (cosine) to a recent post
            recentPosts: 20
          approval: required           # or none (default: clientConfig.instagram.requireApproval)
          approvalExpiry: 24h          # an unapproved draft is cancelled after this
          dryRun: false                # default: clientConfig.instagram.dryRun

Media uploaded through ``POST /{agent_id}/media`` needs no plan entry: each upload becomes its
own job, due at its ``publish_at`` (or at once), under the same caption and approval rules.
Durations are seconds or strings like ``90m``, ``1h30m``, ``2d``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from carrier.jobs.schedule import CronSpec, IntervalSpec, OnceSpec, Schedule, ScheduleSpec

__all__ = [
    "PLAN_JOB_KIND",
    "CaptionRules",
    "IntervalSettings",
    "MediaSource",
    "PostingPlan",
    "ScheduleSettings",
    "check_timezone",
    "parse_approval",
    "parse_duration",
    "plan_schedule_prefix",
]

PLAN_JOB_KIND = "instagram.post"
"""The job kind a plan's schedule creates (see :mod:`clients.instagram.jobs`)."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_duration(value: Any) -> Any:
    """``90`` / ``"90"`` → 90.0 seconds; ``"90m"``, ``"1h30m"``, ``"2d"`` → seconds. Anything
    else is passed on for pydantic to refuse."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return value
    text = value.strip().lower().replace(" ", "")
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"expected a duration like 90, '90m', '1h30m' or '2d', got {value!r}")
    return float(sum(float(n) * _UNITS[u] for n, u in parts))


Seconds = Annotated[float, BeforeValidator(parse_duration)]


def check_timezone(value: str | None) -> str | None:
    """``value`` if it names a time zone (or is None); else a ValueError saying what to write."""
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r}; expected e.g. 'Europe/Lisbon'") from None
    return value


class _Plan(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class IntervalSettings(_Plan):
    """Every ``min`` to ``max`` (drawn at random each time); ``max`` defaults to ``min``."""

    min: Seconds = Field(gt=0)
    max: Seconds | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _single(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else {"min": value}

    @model_validator(mode="after")
    def _ordered(self) -> IntervalSettings:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"interval max ({self.max:g} s) is below min ({self.min:g} s)")
        return self


class ScheduleSettings(_Plan):
    """When the plan posts: a cron expression, a jittered interval, or one-off times."""

    cron: str | None = None
    interval: IntervalSettings | None = None
    at: list[datetime] | None = None
    """One-off times; naive ones are read in ``timezone``."""
    timezone: str | None = None
    """Time zone of ``cron`` and of naive ``at`` times (default: the instagram ``timezone``, else UTC)."""
    jitter: Seconds = Field(default=0.0, ge=0)
    """Cron only: each occurrence up to this much later, at random."""

    @field_validator("at", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | datetime) else value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and not croniter.is_valid(value):
            raise ValueError(f"not a cron expression: {value!r}; expected e.g. '0 9 * * mon-fri'")
        return value

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str | None) -> str | None:
        return check_timezone(value)

    @model_validator(mode="after")
    def _one_kind(self) -> ScheduleSettings:
        given = [k for k in ("cron", "interval", "at") if getattr(self, k) not in (None, [])]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(f"give exactly one of cron, interval or at (found: {found})")
        if self.jitter and self.cron is None:
            raise ValueError("jitter applies to cron schedules only; use interval min/max instead")
        return self

    def specs(self, default_tz: str | None) -> list[ScheduleSpec]:
        """The job schedule specs: one for cron or interval, one per one-off time."""
        tz = self.timezone or default_tz or "UTC"
        if self.cron is not None:
            return [CronSpec(expr=self.cron, tz=tz, jitter_s=self.jitter)]
        if self.interval is not None:
            return [IntervalSpec(min_s=self.interval.min, max_s=self.interval.max)]
        zone = ZoneInfo(tz)
        return [
            OnceSpec(at=when if when.tzinfo is not None else when.replace(tzinfo=zone))
            for when in sorted(self.at or [], key=lambda w: w.replace(tzinfo=w.tzinfo or zone))
        ]


class MediaSource(_Plan):
    """Where a scheduled post takes its media from."""

    library: str | None = None
    """A folder of images (and MP4/MOV videos, posted as reels); each file is posted once.
    Relative paths are read from the character file's folder."""
    order: Literal["sequential", "random"] = "sequential"
    """``sequential``: by file name; ``random``: any unused file."""


class CaptionRules(_Plan):
    max_hashtags: int | None = Field(default=None, ge=0, le=30)
    """Default: ``clientConfig.instagram.maxHashtags`` (5)."""
    max_length: int = Field(default=2200, ge=1, le=2200)
    similarity: float = Field(default=0.9, gt=0, le=1)
    """A caption whose cosine similarity to a recent post reaches this is written again once,
    then refused."""
    recent_posts: int = Field(default=20, ge=0, le=500)
    """How many recent posts a new caption is compared with."""
    instructions: str | None = None
    """Extra instructions for the caption writer (appended to the prompt)."""


def parse_approval(value: Any) -> Any:
    """``required`` / ``none`` (and yes/no words) as booleans; anything else is passed on."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("required", "require", "yes", "true", "on"):
            return True
        if word in ("none", "no", "off", "false", "not required", "never"):
            return False
        raise ValueError(f"expected 'required' or 'none', got {value!r}")
    return value


Approval = Annotated[bool, BeforeValidator(parse_approval)]


class PostingPlan(_Plan):
    """The ``clientConfig.instagram.plan`` section."""

    enabled: bool = True
    schedule: ScheduleSettings | None = None
    """When to post from the library; without one, only uploads are posted."""
    media: MediaSource = Field(default_factory=MediaSource)
    caption: CaptionRules = Field(default_factory=CaptionRules)
    approval: Approval | None = None
    """``required``: every draft waits for a human; default: ``requireApproval``."""
    approval_expiry: Seconds = Field(default=24 * 3600.0, gt=0)
    dry_run: bool | None = None
    """Do everything but publish, and record what would have gone out."""

    @model_validator(mode="after")
    def _schedule_needs_media(self) -> PostingPlan:
        if self.schedule is not None and not self.media.library:
            raise ValueError(
                "a schedule needs media to post: set media.library to a folder "
                "(uploads through POST /{agent_id}/media need no schedule)"
            )
        return self

    def schedules(self, agent_id: str, *, default_tz: str | None = None) -> list[Schedule]:
        """The job schedules this plan needs (none when disabled or without a schedule)."""
        if not self.enabled or self.schedule is None:
            return []
        prefix = plan_schedule_prefix(agent_id)
        specs = self.schedule.specs(default_tz)
        out = []
        for spec in specs:
            name = prefix if not isinstance(spec, OnceSpec) else f"{prefix}:{spec.at.isoformat()}"
            out.append(
                Schedule(
                    name=name,
                    kind=PLAN_JOB_KIND,
                    spec=spec,
                    agent_id=agent_id,
                    payload={"source": "plan"},
                    max_attempts=3,
                )
            )
        return out


def plan_schedule_prefix(agent_id: str) -> str:
    """Every schedule of an agent's plan is named with this prefix."""
    return f"instagram:{agent_id}:plan"
