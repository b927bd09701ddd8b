"""Budgets: what a model may cost per day and per month, and what happens past it.

A budget is set per agent in its character (``settings.budget``) and for the whole process in
the environment, in US dollars as litellm prices the calls (``Usage.cost_usd``)::

    settings:
      budget: {dailyUsd: 2.5, monthlyUsd: 40, policy: fallback, fallbackModel: openai/gpt-4o-mini}

    CARRIER_BUDGET_DAY_USD=20  CARRIER_BUDGET_MONTH_USD=300  CARRIER_BUDGET_POLICY=offline

Once spent (today, or this calendar month, UTC) reaches a budget, its policy acts before every
further model call: ``warn`` (logged and audited once, the call goes on), ``fallback`` (the call
goes to the cheaper ``fallbackModel``), ``offline`` (the offline provider answers from the
character's examples) or ``pause`` (the agent's desired state becomes stopped, audited; the
call in flight is answered offline). When both the agent's and the process's budgets are
spent, the stricter policy acts.

:class:`BudgetedProvider` wraps the model every runtime gets (:func:`carrier.assemble.
guard_model`); it reads what was spent from the host's :class:`Budgets`
(``services["budgets"]``), which reads it from the time series (:mod:`carrier.series`) in
memory: a check costs no I/O. Without a host's budgets (``carrier chat``, library use) nothing
is checked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import ValidationError

from carrier.character.parts import BudgetPolicy
from carrier.errors import ConfigError
from carrier.llm.base import ModelProvider, ModelRequest, ModelResult, WrappedProvider
from carrier.llm.failures import StreamInterrupted

__all__ = [
    "Budget",
    "BudgetedProvider",
    "Budgets",
    "Exceeded",
    "Policy",
    "SpendSource",
    "budget_of",
    "global_budget",
]

log = logging.getLogger(__name__)

EXAMPLE = "{dailyUsd: 2.5, monthlyUsd: 40, policy: fallback, fallbackModel: openai/gpt-4o-mini}"


class Policy(StrEnum):
    WARN = "warn"
    FALLBACK = "fallback"
    OFFLINE = "offline"
    PAUSE = "pause"

    @property
    def severity(self) -> int:
        return list(Policy).index(self)


Budget = BudgetPolicy
"""A budget: limits in USD (either may be left out) and the policy past them; the character's
``settings.budget`` model (:class:`carrier.character.parts.BudgetPolicy`), so a character with an
invalid one is refused where it is read (``carrier validate``, the API), with the field's path."""


class SpendSource(Protocol):
    """What was spent (:class:`carrier.series.recorder.SeriesRecorder`)."""

    def spent(self, agent: str | None = None) -> Any:
        """An object with ``day_usd`` and ``month_usd``; ``agent`` None: every agent."""


@dataclass(frozen=True)
class Exceeded:
    """A budget that is spent, and what its policy does."""

    scope: str
    """``agent`` or ``global``."""
    period: str
    """``day`` or ``month``."""
    spent_usd: float
    limit_usd: float
    policy: Policy
    fallback_model: str | None = None

    @property
    def reason(self) -> str:
        whose = "the agent's" if self.scope == "agent" else "the global"
        span = "today" if self.period == "day" else "this month"
        period = "daily" if self.period == "day" else "monthly"
        return (
            f"{whose} {period} budget is spent: ${self.spent_usd:.4f} of "
            f"${self.limit_usd:g} {span}; policy {self.policy}"
        )


def _parse(raw: Any, where: str, fix: str) -> Budget:
    try:
        return Budget.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in (where, *first["loc"]))
        raise ConfigError(f"{path}: {first['msg']}; {fix}") from None


def budget_of(character: Any) -> Budget | None:
    """The character's ``settings.budget``, or None; :class:`ConfigError` with the field path
    and an example when it is not one (a character read without validation)."""
    settings = getattr(character, "settings", None)
    raw = getattr(settings, "budget", None)
    if raw is None:
        raw = (getattr(settings, "model_extra", None) or {}).get("budget")
    if raw is None or isinstance(raw, Budget):
        return raw
    if not isinstance(raw, Mapping):
        raise ConfigError(f"settings.budget: expected a mapping like {EXAMPLE}")
    return _parse(dict(raw), "settings.budget", f"for example budget: {EXAMPLE}")


def global_budget(environ: Mapping[str, str]) -> Budget | None:
    """The process's budget from ``CARRIER_BUDGET_DAY_USD``, ``CARRIER_BUDGET_MONTH_USD``,
    ``CARRIER_BUDGET_POLICY`` and ``CARRIER_BUDGET_FALLBACK_MODEL``; None when no limit is set."""
    names = {
        "dailyUsd": "CARRIER_BUDGET_DAY_USD",
        "monthlyUsd": "CARRIER_BUDGET_MONTH_USD",
        "policy": "CARRIER_BUDGET_POLICY",
        "fallbackModel": "CARRIER_BUDGET_FALLBACK_MODEL",
    }
    raw = {key: environ[var].strip() for key, var in names.items() if environ.get(var, "").strip()}
    if "dailyUsd" not in raw and "monthlyUsd" not in raw:
        return None
    try:
        return Budget.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        var = names.get(str(first["loc"][0]), "CARRIER_BUDGET_*") if first["loc"] else "a budget"
        raise ConfigError(
            f"{var}: {first['msg']}; e.g. CARRIER_BUDGET_DAY_USD=20 "
            "CARRIER_BUDGET_POLICY=warn|fallback|offline|pause"
        ) from None


def _over(budget: Budget | None, spend: Any, scope: str) -> Exceeded | None:
    if budget is None:
        return None
    for period, limit, spent in (
        ("day", budget.daily_usd, spend.day_usd),
        ("month", budget.monthly_usd, spend.month_usd),
    ):
        if limit is not None and spent >= limit:
            policy = Policy(budget.policy)
            return Exceeded(scope, period, spent, limit, policy, budget.fallback_model)
    return None


Pause = Callable[[str, str], Awaitable[None]]
"""Stops an agent (its desired state), given its id and why: the host's."""
Notice = Callable[[str, Exceeded], Awaitable[None]]
"""Records that a budget of an agent was found spent (the audit log): the host's."""


class Budgets:
    """The host's budgets: the global one, what was spent, and what a policy does to the host
    (pause an agent, record the event). In ``services["budgets"]``."""

    def __init__(
        self,
        spend: SpendSource,
        *,
        global_: Budget | None = None,
        pause: Pause | None = None,
        notice: Notice | None = None,
    ) -> None:
        self.spend = spend
        self.global_ = global_
        self._pause = pause
        self._notice = notice
        self._noticed: set[tuple[str, str, str, float, str]] = set()
        self._pausing: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def check(self, agent_id: str, budget: Budget | None) -> Exceeded | None:
        """The budget of ``agent_id`` (its own or the global one) that is spent, with the
        stricter policy when both are, and its policy's effect on the host (said once, the
        agent paused); None while neither is. No I/O."""
        worst = self.status(agent_id, budget)
        if worst is not None:
            self._act(agent_id, worst)
        return worst

    def status(self, agent_id: str | None, budget: Budget | None) -> Exceeded | None:
        """What :meth:`check` finds, without acting on it (the overview); ``agent_id`` None
        checks the global budget only."""
        found = [
            e
            for e in (
                _over(budget, self.spend.spent(agent_id), "agent") if agent_id else None,
                _over(self.global_, self.spend.spent(None), "global"),
            )
            if e is not None
        ]
        return max(found, key=lambda e: e.policy.severity) if found else None

    def _act(self, agent_id: str, exceeded: Exceeded) -> None:
        """Say it once per agent, budget, limit and period (today, this month); pause the agent
        whenever it runs past a pausing budget (restarted by hand while still over, it is
        paused again at its next call). The pause runs in the background: the turn that found
        it out still runs, and a stop waits for it."""
        now = datetime.now(UTC)
        when = now.strftime("%Y-%m-%d" if exceeded.period == "day" else "%Y-%m")
        key = (agent_id, exceeded.scope, exceeded.period, exceeded.limit_usd, when)
        if key not in self._noticed:
            # What was said on other days or months will not be asked again.
            self._noticed = {
                k
                for k in self._noticed
                if k[4] in (now.strftime("%Y-%m-%d"), now.strftime("%Y-%m"))
            }
            self._noticed.add(key)
            log.warning("agent %s: %s", agent_id, exceeded.reason)
            if self._notice is not None:
                self._spawn(self._notice(agent_id, exceeded))
        if (
            exceeded.policy is Policy.PAUSE
            and self._pause is not None
            and agent_id not in self._pausing
        ):
            self._pausing.add(agent_id)
            self._spawn(self._pause(agent_id, exceeded.reason), done=agent_id)

    def _spawn(self, work: Awaitable[None], *, done: str | None = None) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("budget policy action failed")
            finally:
                self._pausing.discard(done or "")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait for the policy actions under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


class BudgetedProvider(WrappedProvider):
    """``inner``, with the agent's budgets checked before each call (see the module).

    ``budget`` gives the agent's current budget (its character may be edited while it runs);
    ``services`` is the runtime's (the host puts its :class:`Budgets` there); ``offline``
    makes the provider that answers when a policy says offline or pause; ``current`` gives the
    model the runtime uses now, so that closing this wrapper after a swap leaves the model
    alone if it is swapped in again."""

    def __init__(
        self,
        inner: ModelProvider,
        *,
        agent_id: str,
        budget: Callable[[], Budget | None],
        services: Mapping[str, Any],
        offline: Callable[[], ModelProvider],
        current: Callable[[], ModelProvider] | None = None,
    ) -> None:
        self.inner = inner
        self.agent_id = agent_id
        self._budget = budget
        self._services = services
        self._make_offline = offline
        self._offline: ModelProvider | None = None
        self._current = current
        self.last_result: ModelResult | None = None
        self.last_exceeded: Exceeded | None = None

    def _route(self, request: ModelRequest) -> tuple[ModelProvider, ModelRequest]:
        budgets = self._services.get("budgets")
        if not isinstance(budgets, Budgets) or self.inner.offline:
            return self.inner, request
        exceeded = budgets.check(self.agent_id, self._budget())
        self.last_exceeded = exceeded
        if exceeded is None or exceeded.policy is Policy.WARN:
            return self.inner, request
        if exceeded.policy is Policy.FALLBACK and exceeded.fallback_model:
            return self.inner, request.model_copy(update={"model": exceeded.fallback_model})
        if self._offline is None:
            self._offline = self._make_offline()
        return self._offline, request

    async def generate(self, request: ModelRequest) -> ModelResult:
        provider, request = self._route(request)
        return await provider.generate(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        provider, request = self._route(request)
        async for piece in self._relay(provider, lambda: provider.stream(request)):
            yield piece

    async def _relay(
        self, provider: ModelProvider, open_: Callable[[], AsyncIterator[str]]
    ) -> AsyncIterator[str]:
        self.last_result = None
        try:
            async for piece in open_():
                yield piece
        except StreamInterrupted as exc:
            resume = exc.resume  # a resumed stream reports its result here too
            if resume is not None:
                exc.resume = lambda: self._relay(provider, resume)
            raise
        self.last_result = provider.last_result

    async def aclose(self) -> None:
        if self._current is None or self._current() is not self.inner:
            await self.inner.aclose()
        if self._offline is not None:
            await self._offline.aclose()
