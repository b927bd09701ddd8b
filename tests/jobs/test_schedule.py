"""Schedule specs: cron (time zones, DST, jitter), jittered intervals, one-off times."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import TypeAdapter, ValidationError

from carrier.jobs import CronSpec, IntervalSpec, OnceSpec, Schedule, ScheduleSpec
from tests.jobs.conftest import T0

RNG = random.Random(7)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_cron_next_times_skip_missed_slots() -> None:
    spec = CronSpec(expr="0 9 * * *")
    first = spec.first(T0, RNG)  # T0 is 1 May 12:00 UTC
    assert first == utc(2024, 5, 2, 9)
    assert spec.following(first, first + timedelta(seconds=5), RNG) == utc(2024, 5, 3, 9)
    # The scheduler was down for days: the next slot after now, no catch-up burst.
    assert spec.following(first, utc(2024, 5, 5, 10), RNG) == utc(2024, 5, 6, 9)


def test_cron_reads_its_time_zone_across_daylight_saving() -> None:
    spec = CronSpec(expr="0 9 * * *", tz="Europe/Paris")
    first = spec.first(utc(2024, 3, 29, 12), RNG)
    assert first == utc(2024, 3, 30, 8)  # 09:00 CET
    assert spec.following(first, first, RNG) == utc(2024, 3, 31, 7)  # 09:00 CEST


def test_cron_weekdays() -> None:
    spec = CronSpec(expr="30 18 * * mon-fri")
    friday = spec.first(utc(2024, 5, 3, 19), RNG)  # Friday evening, after the slot
    assert friday == utc(2024, 5, 6, 18, 30)  # Monday


def test_cron_jitter_stays_within_bounds() -> None:
    spec = CronSpec(expr="0 * * * *", jitter_s=600)
    rng = random.Random(1)
    due = T0
    seen = set()
    for _ in range(200):
        due = spec.following(due, due, rng) or due
        slot = due.replace(minute=0, second=0, microsecond=0)
        assert timedelta(0) <= due - slot <= timedelta(seconds=600)
        seen.add(round((due - slot).total_seconds()))
    assert len(seen) > 100  # really random


def test_bad_cron_or_time_zone_is_refused_with_an_example() -> None:
    with pytest.raises(ValidationError, match=r"not a cron expression.*0 9"):
        CronSpec(expr="every day at nine")
    with pytest.raises(ValidationError, match="unknown time zone"):
        CronSpec(expr="0 9 * * *", tz="Mars/Olympus")


def test_interval_jitter_stays_between_min_and_max() -> None:
    spec = IntervalSpec(min_s=90 * 60, max_s=180 * 60)
    rng = random.Random(42)
    previous = spec.first(T0, rng)
    assert timedelta(minutes=90) <= previous - T0 <= timedelta(minutes=180)
    gaps = []
    for _ in range(500):
        due = spec.following(previous, previous, rng)
        assert due is not None
        gaps.append(due - previous)
        previous = due
    assert min(gaps) >= timedelta(minutes=90) and max(gaps) <= timedelta(minutes=180)
    assert max(gaps) - min(gaps) > timedelta(minutes=80)  # spread over the range
    again = random.Random(42)  # a seeded source gives the same plan
    assert spec.first(T0, again) == T0 + (spec.first(T0, random.Random(42)) - T0)


def test_interval_after_downtime_counts_from_now() -> None:
    spec = IntervalSpec(min_s=60)
    assert spec.following(T0, T0 + timedelta(hours=5), RNG) == T0 + timedelta(hours=5, minutes=1)
    assert spec.following(T0, T0, RNG) == T0 + timedelta(minutes=1)  # max_s defaults to min_s


def test_interval_bounds_are_checked() -> None:
    with pytest.raises(ValidationError, match="below min_s"):
        IntervalSpec(min_s=60, max_s=30)
    with pytest.raises(ValidationError):
        IntervalSpec(min_s=0)


def test_once_happens_once() -> None:
    spec = OnceSpec(at=datetime(2024, 6, 1, 12))  # naive: taken as UTC
    assert spec.at == utc(2024, 6, 1, 12)
    assert spec.first(T0, RNG) == utc(2024, 6, 1, 12)
    assert spec.following(spec.at, spec.at, RNG) is None


def test_specs_round_trip_through_json_by_type() -> None:
    adapter: TypeAdapter[ScheduleSpec] = TypeAdapter(ScheduleSpec)
    for spec in (
        CronSpec(expr="0 9 * * *", tz="Asia/Tokyo"),
        IntervalSpec(min_s=5),
        OnceSpec(at=T0),
    ):
        assert adapter.validate_json(adapter.dump_json(spec)) == spec
    schedule = Schedule.model_validate(
        {"name": "s", "kind": "k", "spec": {"type": "interval", "min_s": 60, "max_s": 120}}
    )
    assert isinstance(schedule.spec, IntervalSpec)
    assert schedule.job_key(T0) == "schedule:s:2024-05-01T12:00:00+00:00"


def test_specs_describe_themselves() -> None:
    assert CronSpec(expr="0 9 * * *", tz="Europe/Paris", jitter_s=600).describe() == (
        "cron '0 9 * * *' (Europe/Paris) + up to 10m"
    )
    assert IntervalSpec(min_s=5400, max_s=10800).describe() == "every 1h30m to 3h"
    assert IntervalSpec(min_s=45).describe() == "every 45s"
    assert OnceSpec(at=T0).describe() == "once at 2024-05-01T12:00:00+00:00"
