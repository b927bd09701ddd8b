"""Schedules: when a recurring job is due. Cron expressions, jittered intervals, one-off times.

A :class:`Schedule` names a job template (kind, agent, payload) and a spec; the
:class:`~carrier.jobs.scheduler.Scheduler` turns each next occurrence into a job. Specs are pure:
given the previous occurrence, ``now`` and a random source, they say when the next one is due::

    Schedule(name="ig-posts", kind="instagram.publish", spec=IntervalSpec(min_s=90 * 60, max_s=180 * 60))
    Schedule(name="digest", kind="digest", spec=CronSpec(expr="0 9 * * mon-fri", tz="Europe/Paris"))
    Schedule(name="launch", kind="announce", spec=OnceSpec(at=datetime(2025, 3, 1, 12, tzinfo=UTC)))
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from carrier.types import utcnow

__all__ = ["CronSpec", "IntervalSpec", "OnceSpec", "Schedule", "ScheduleSpec", "schedule_job_key"]


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _duration(seconds: float) -> str:
    """``5400`` → ``1h30m``; ``45`` → ``45s``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts) or "0s"


class CronSpec(BaseModel):
    """A cron expression (5 fields, or 6 with seconds) read in time zone ``tz``, each occurrence
    pushed later by up to ``jitter_s`` random seconds (keep it below the cron period)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["cron"] = "cron"
    expr: str
    tz: str = "UTC"
    jitter_s: float = Field(default=0.0, ge=0)

    @field_validator("expr")
    @classmethod
    def _valid_expr(cls, value: str) -> str:
        if not croniter.is_valid(value):
            raise ValueError(f"not a cron expression: {value!r}; expected e.g. '0 9 * * mon-fri'")
        return value

    @field_validator("tz")
    @classmethod
    def _valid_tz(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}; expected e.g. 'Europe/Paris'") from None
        return value

    def _after(self, when: datetime, rng: random.Random) -> datetime:
        local = when.astimezone(ZoneInfo(self.tz))
        slot = croniter(self.expr, local).get_next(datetime)
        jitter = rng.uniform(0, self.jitter_s) if self.jitter_s else 0.0
        return _aware(slot) + timedelta(seconds=jitter)

    def describe(self) -> str:
        jitter = f" + up to {_duration(self.jitter_s)}" if self.jitter_s else ""
        return f"cron '{self.expr}' ({self.tz}){jitter}"

    def first(self, now: datetime, rng: random.Random) -> datetime:
        return self._after(now, rng)

    def following(self, previous: datetime, now: datetime, rng: random.Random) -> datetime | None:
        """The next slot after the previous occurrence; missed slots (the scheduler was down) are
        skipped, not caught up."""
        return self._after(max(previous, now), rng)


class IntervalSpec(BaseModel):
    """Every ``min_s`` to ``max_s`` seconds, drawn at random each time (ElizaOS's post loops:
    ``IntervalSpec(min_s=90 * 60, max_s=180 * 60)``); ``max_s`` defaults to ``min_s``."""

    model_config = ConfigDict(frozen=True)

    type: Literal["interval"] = "interval"
    min_s: float = Field(gt=0)
    max_s: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> IntervalSpec:
        if self.max_s is not None and self.max_s < self.min_s:
            raise ValueError(f"max_s ({self.max_s}) is below min_s ({self.min_s})")
        return self

    def _gap(self, rng: random.Random) -> timedelta:
        high = self.min_s if self.max_s is None else self.max_s
        return timedelta(seconds=rng.uniform(self.min_s, high))

    def describe(self) -> str:
        if self.max_s is None or self.max_s == self.min_s:
            return f"every {_duration(self.min_s)}"
        return f"every {_duration(self.min_s)} to {_duration(self.max_s)}"

    def first(self, now: datetime, rng: random.Random) -> datetime:
        return now + self._gap(rng)

    def following(self, previous: datetime, now: datetime, rng: random.Random) -> datetime | None:
        """One gap after the previous occurrence, or after ``now`` if that is already past."""
        due = previous + self._gap(rng)
        return due if due > now else now + self._gap(rng)


class OnceSpec(BaseModel):
    """Once, at ``at`` (a naive time is taken as UTC)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["once"] = "once"
    at: datetime

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return _aware(value)

    def describe(self) -> str:
        return f"once at {self.at.isoformat()}"

    def first(self, now: datetime, rng: random.Random) -> datetime:
        return self.at

    def following(self, previous: datetime, now: datetime, rng: random.Random) -> datetime | None:
        return None


ScheduleSpec = Annotated[CronSpec | IntervalSpec | OnceSpec, Field(discriminator="type")]


def schedule_job_key(name: str, due: datetime) -> str:
    """The idempotency key of a schedule's job due at ``due``: two schedulers that materialize
    the same occurrence create one job."""
    return f"schedule:{name}:{_aware(due).isoformat()}"


class Schedule(BaseModel):
    """A recurring (or one-off) job, persisted in the job store under its unique ``name``."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    kind: str
    """The kind of the jobs it creates."""
    spec: ScheduleSpec
    agent_id: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    max_attempts: int = Field(default=3, ge=1)
    timeout_s: float | None = Field(default=None, gt=0)
    enabled: bool = True
    next_at: datetime | None = None
    """The occurrence materialized as a job last (set by the scheduler)."""
    finished: bool = False
    """A one-off schedule whose occurrence has come (set by the scheduler)."""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    def definition(self) -> dict[str, Any]:
        """What the user defined; a schedule stored again with the same definition keeps its
        progress (``next_at``, ``finished``)."""
        return self.model_dump(
            mode="json", exclude={"next_at", "finished", "created_at", "updated_at"}
        )

    def job_key(self, due: datetime) -> str:
        return schedule_job_key(self.name, due)
