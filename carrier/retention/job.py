"""The daily retention job: every agent's ``settings.retention`` applied, and the audit log's own
age limit (``CARRIER_AUDIT_RETENTION_DAYS``).

``carrier run`` registers the handler and the schedule (:data:`SCHEDULE`, daily at 03:30 UTC
give or take half an hour, so several installs do not all run at once) before its worker starts::

    await schedule_retention(service, manager, audit_days=settings.audit_retention_days)

Each agent's run is one ``memory.prune`` audit event with its counts, by ``system``; the audit
log's expiry is one more (no agent), with how many entries went. An agent whose character does
not load is skipped (logged and recorded as a failed run); the others still run. A run is safe to
repeat: deleting what is old finds nothing the second time, summaries are stored once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from carrier.agents import AgentManager, AgentNotRunning
from carrier.audit.base import AuditLog, audit_from
from carrier.audit.context import acting
from carrier.audit.model import AuditKind, AuditResult
from carrier.errors import CarrierError
from carrier.jobs.handler import JobContext
from carrier.jobs.model import Job
from carrier.jobs.schedule import CronSpec, Schedule
from carrier.jobs.service import JobService
from carrier.retention.apply import apply_policy
from carrier.runtime import AgentRuntime

__all__ = ["JOB_KIND", "SCHEDULE", "SYSTEM", "RetentionJob", "schedule_retention"]

log = logging.getLogger(__name__)

JOB_KIND = "carrier.retention"
SCHEDULE = Schedule(
    name="carrier:retention",
    kind=JOB_KIND,
    spec=CronSpec(expr="30 3 * * *", tz="UTC", jitter_s=1800),
    max_attempts=3,
)
"""Daily, between 03:30 and 04:00 UTC."""
SYSTEM = "system"


class RetentionJob:
    """The handler, bound to the agent manager (its store, data dir, agents and audit log)."""

    def __init__(self, manager: AgentManager, *, audit_days: int) -> None:
        self.manager = manager
        self.audit_days = audit_days
        self._built: list[AgentRuntime] = []
        """Runtimes built for one run (agents not running here), closed at its end."""

    def register(self, service: JobService) -> None:
        """Register the handler on ``service``'s worker (one run at a time, across workers)."""
        service.worker.register(JOB_KIND, self.run, max_concurrent=1)

    @property
    def audit(self) -> AuditLog:
        return audit_from(self.manager.services)

    async def run(self, job: Job, ctx: JobContext) -> Mapping[str, Any]:
        with acting(SYSTEM):
            return await self.run_at(ctx.now())

    async def run_at(self, now: datetime) -> dict[str, Any]:
        """One run as of ``now``: every agent's policy, then the audit log's expiry."""
        try:
            agents = await self._agents(now)
        finally:
            for runtime in self._built:
                await runtime.model.aclose()
            self._built = []
        expired = await self.audit.expire(now - timedelta(days=self.audit_days), now=now)
        await self.audit.record(
            AuditKind.MEMORY_PRUNE,
            actor=SYSTEM,
            action="audit retention",
            detail={"audit_entries": expired, "keep_days": self.audit_days},
        )
        return {"agents": agents, "audit_entries": expired}

    async def _agents(self, now: datetime) -> dict[str, Any]:
        agents: dict[str, Any] = {}
        for record in await self.manager.list():
            try:
                character = await self.manager.character(record.id)
            except CarrierError as exc:
                log.warning("retention: agent %s skipped: %s", record.id, exc)
                await self.audit.record(
                    AuditKind.MEMORY_PRUNE,
                    actor=SYSTEM,
                    agent_id=record.id,
                    action="retention",
                    result=AuditResult.FAILED,
                    detail={"error": str(exc)},
                )
                continue
            policy = character.settings.retention
            if policy is None:
                continue
            report = await apply_policy(
                store=self.manager.store,
                data_dir=self.manager.settings.data_dir,
                agent_id=record.id,
                policy=policy,
                now=now,
                runtime=partial(self._runtime, record.id),
                audit=self.audit,
            )
            agents[record.id] = report.detail(policy)
        return agents

    # -- a runtime to summarize with -------------------------------------------------------
    async def _runtime(self, agent_id: str) -> AgentRuntime:
        """The running agent's runtime; one built for the run (not started: no clients, no
        status change) when the agent does not run in this process."""
        try:
            return self.manager.runtime(agent_id)
        except AgentNotRunning:
            pass
        from carrier.assemble import build_runtime

        character = await self.manager.character(agent_id)
        factory = self.manager.model_factory
        runtime, _ = build_runtime(
            character,
            settings=self.manager.settings,
            store=self.manager.store,
            embedder=self.manager.embedder,
            environ=self.manager.environ,
            model=factory(character) if factory is not None else None,
        )
        self._built.append(runtime)
        return runtime


async def schedule_retention(
    service: JobService, manager: AgentManager, *, audit_days: int
) -> RetentionJob:
    """Register the retention handler on ``service``'s worker and store its daily schedule
    (the job store must be open). Returns the handler."""
    handler = RetentionJob(manager, audit_days=audit_days)
    handler.register(service)
    await service.scheduler.add(SCHEDULE)
    return handler
