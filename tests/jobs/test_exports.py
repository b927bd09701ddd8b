"""carrier.jobs's public names, and that importing it (or its CLI) stays light."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import carrier.jobs


def test_jobs_exports_the_documented_names() -> None:
    assert set(carrier.jobs.__all__) == {
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
    }
    from carrier.jobs import sqlite, worker

    assert carrier.jobs.SQLiteJobStore is sqlite.SQLiteJobStore
    assert carrier.jobs.Worker is worker.Worker
    assert all(getattr(carrier.jobs, name) is not None for name in carrier.jobs.__all__)
    assert set(carrier.jobs.__all__) <= set(dir(carrier.jobs))
    with pytest.raises(AttributeError, match="Nope"):
        importlib.import_module("carrier.jobs").Nope  # noqa: B018


def test_importing_jobs_or_its_cli_loads_no_store_code() -> None:
    code = (
        "import sys, carrier.jobs, carrier.cli.jobs\n"
        "heavy = {'carrier.jobs.sqlite', 'croniter', 'rich.table', 'pydantic'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
