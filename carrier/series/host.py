"""The series as a host runs them (``carrier run``, ``carrier serve``): the store opened beside
the others, the recorder's hook given to every agent, the budgets in ``services``, the last
counts written on close::

    series = await open_host_series(settings, manager)
    try:
        ...
    finally:
        await series.aclose()

``CARRIER_SERIES=off`` opens nothing (no charts, no budgets): :func:`open_host_series` returns
a :class:`HostSeries` whose ``recorder`` is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from carrier.audit.base import audit_from
from carrier.audit.context import acting
from carrier.llm.budget import Budgets, Exceeded, global_budget
from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin
from carrier.series.base import SeriesStore
from carrier.series.config import SeriesConfig
from carrier.series.recorder import SeriesRecorder

if TYPE_CHECKING:
    from carrier.agents import AgentManager
    from carrier.settings import Settings

__all__ = ["BUDGET_EXCEEDED", "HostSeries", "open_host_series"]

BUDGET_EXCEEDED = "budget.exceeded"
"""The audit event of a budget found spent (once per agent, budget and limit)."""
BUDGET_ACTOR = "system"


@dataclass
class HostSeries:
    recorder: SeriesRecorder | None
    budgets: Budgets | None

    async def aclose(self) -> None:
        """Write the last counts, then close the store (after the agents stopped)."""
        if self.recorder is None:
            return
        try:
            if self.budgets is not None:
                await self.budgets.settle()
            await self.recorder.aclose()
        finally:
            await self.recorder.store.close()


async def open_host_series(settings: Settings, manager: AgentManager) -> HostSeries:
    """Open the series store the settings name, count every agent's turns into it
    (``services["series"]``) and enforce the budgets (``services["budgets"]``). Call it before
    any agent starts."""
    config = SeriesConfig.from_environ(manager.environ)
    if not config.enabled:
        return HostSeries(recorder=None, budgets=None)
    global_ = global_budget(manager.environ)  # a bad value stops the host before anything opens
    store = SeriesStore.from_settings(settings)
    await store.open()
    recorder = SeriesRecorder(store, config=config)
    try:
        await recorder.start()
    except BaseException:
        await store.close()
        raise

    async def pause(agent_id: str, why: str) -> None:
        with acting(BUDGET_ACTOR):
            await manager.stop(agent_id)

    async def notice(agent_id: str, exceeded: Exceeded) -> None:
        await audit_from(manager.services).record(
            BUDGET_EXCEEDED,
            actor=BUDGET_ACTOR,
            agent_id=agent_id,
            action=str(exceeded.policy),
            detail={
                "scope": exceeded.scope,
                "period": exceeded.period,
                "spent_usd": round(exceeded.spent_usd, 6),
                "limit_usd": exceeded.limit_usd,
                "fallback_model": exceeded.fallback_model,
                "reason": exceeded.reason,
            },
        )

    budgets = Budgets(recorder, global_=global_, pause=pause, notice=notice)
    manager.services["series"] = recorder
    manager.services["budgets"] = budgets
    manager.add_plugin(recorder.plugin())
    manager.add_plugin(_budget_guard())
    return HostSeries(recorder=recorder, budgets=budgets)


def _budget_guard() -> Plugin:
    """Keeps every agent's model behind its budgets: an edit swaps the model for a new one
    (:meth:`AgentManager._apply`), and this puts it back behind them before the turn's first
    model call (:func:`carrier.assemble.guard_model`; nothing to do when it is already)."""
    from carrier.assemble import guard_model

    async def guard(point: HookPoint, turn: Turn) -> HookResult | None:
        guard_model(turn.runtime, strict=False)
        return None

    return Plugin(
        name="carrier-budgets",
        hooks=[(HookPoint.BEFORE_INBOUND, guard)],
        description="Keeps each agent's model behind its budgets after an edit.",
    )
