"""Durable jobs and schedules: leases, retries with backoff, approvals, cron and jittered intervals.

A :class:`JobStore` (SQLite by default) holds jobs and schedules; :class:`Worker` claims due jobs
atomically and runs the handler registered for their kind; :class:`Scheduler` turns schedules
into jobs. Several workers and schedulers, in any processes, may share one store.

Names load on first use, so importing the package costs nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from carrier.jobs.backoff import Backoff
    from carrier.jobs.base import JobStore
    from carrier.jobs.clock import Clock, ManualClock, system_clock
    from carrier.jobs.errors import (
        AwaitApproval,
        Defer,
        JobNotFound,
        JobSignal,
        JobStateError,
        LeaseLost,
        PermanentFailure,
    )
    from carrier.jobs.handler import Handler, JobContext
    from carrier.jobs.model import Job, JobEvent, JobState
    from carrier.jobs.schedule import CronSpec, IntervalSpec, OnceSpec, Schedule, ScheduleSpec
    from carrier.jobs.scheduler import Scheduler
    from carrier.jobs.service import JobService
    from carrier.jobs.sqlite import SQLiteJobStore
    from carrier.jobs.worker import Worker, WorkerStats

_WHERE = {
    "Backoff": "backoff",
    "JobStore": "base",
    "Clock": "clock",
    "ManualClock": "clock",
    "system_clock": "clock",
    "AwaitApproval": "errors",
    "Defer": "errors",
    "JobNotFound": "errors",
    "JobSignal": "errors",
    "JobStateError": "errors",
    "LeaseLost": "errors",
    "PermanentFailure": "errors",
    "Handler": "handler",
    "JobContext": "handler",
    "Job": "model",
    "JobEvent": "model",
    "JobState": "model",
    "CronSpec": "schedule",
    "IntervalSpec": "schedule",
    "OnceSpec": "schedule",
    "Schedule": "schedule",
    "ScheduleSpec": "schedule",
    "Scheduler": "scheduler",
    "JobService": "service",
    "SQLiteJobStore": "sqlite",
    "Worker": "worker",
    "WorkerStats": "worker",
}

__all__ = [
    "AwaitApproval",
    "Backoff",
    "Clock",
    "CronSpec",
    "Defer",
    "Handler",
    "IntervalSpec",
    "Job",
    "JobContext",
    "JobEvent",
    "JobNotFound",
    "JobService",
    "JobSignal",
    "JobState",
    "JobStateError",
    "JobStore",
    "LeaseLost",
    "ManualClock",
    "OnceSpec",
    "PermanentFailure",
    "SQLiteJobStore",
    "Schedule",
    "ScheduleSpec",
    "Scheduler",
    "Worker",
    "WorkerStats",
    "system_clock",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
