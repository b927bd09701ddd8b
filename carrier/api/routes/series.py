"""``GET /metrics/series`` (the console's charts) and ``GET /metrics/summary`` (its overview):
the time series of :mod:`carrier.series`, as JSON.

Each agent's summary also says what this process's in-process vector index holds for it (rows,
bytes, whether searches go through its ANN index or are exact, or it is loading), or that it is
not loaded here: the index lives in the process that runs the agent.

The admin token sees every agent; an agent's token sees that agent only (asking for another
is 403; asking for none narrows to it; sums are of its own lines, and the global budget is not
shown). A server without the series (``CARRIER_SERIES=off``, or an API not run by ``carrier
run`` or ``carrier serve``) answers 409 ``series_unavailable``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, StringConstraints

from carrier.agents import AgentNotFound
from carrier.api.auth import Principal, principal
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ID_PATTERN, ErrorBody, IsoDatetime, ProblemOut
from carrier.api.state import ApiState, api_state
from carrier.character import parse_character
from carrier.errors import CarrierError
from carrier.llm.budget import Budget, Budgets, Exceeded, budget_of
from carrier.memory.index.manager import VectorIndex
from carrier.series.model import (
    COST,
    ERRORS,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TURNS,
    Step,
    bucket_start,
)
from carrier.series.query import NAME_PATTERN, read_lines
from carrier.series.recorder import SeriesRecorder

__all__ = ["router"]

router = APIRouter(tags=["metrics"], responses=error_responses(401, 403, 429))

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=64)]
UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "This server keeps no time series."}
}
DEFAULT_SPAN = {Step.MINUTE: 3600, Step.DAY: 30 * 86_400}


class LineOut(BaseModel):
    name: str
    """``turns``, ``cost_usd``, ``latency.generate.p95``..."""
    agent_id: str | None
    """The agent; null for a sum over agents; ``""`` for what belongs to no agent."""
    points: list[tuple[int, float | None]]
    """``[t, value]``: the bucket's start in seconds since the epoch (UTC), oldest first."""


class SeriesOut(BaseModel):
    step: Step
    start: int
    end: int
    lines: list[LineOut]


class BudgetOut(BaseModel):
    day_usd: float | None
    month_usd: float | None
    policy: str
    fallback_model: str | None

    @classmethod
    def of(cls, budget: Budget | None) -> BudgetOut | None:
        if budget is None:
            return None
        return cls(
            day_usd=budget.daily_usd,
            month_usd=budget.monthly_usd,
            policy=str(budget.policy),
            fallback_model=budget.fallback_model,
        )


class ExceededOut(BaseModel):
    scope: str
    period: str
    spent_usd: float
    limit_usd: float
    policy: str
    reason: str

    @classmethod
    def of(cls, exceeded: Exceeded | None) -> ExceededOut | None:
        if exceeded is None:
            return None
        return cls(
            scope=exceeded.scope,
            period=exceeded.period,
            spent_usd=exceeded.spent_usd,
            limit_usd=exceeded.limit_usd,
            policy=str(exceeded.policy),
            reason=exceeded.reason,
        )


class FiguresOut(BaseModel):
    """Today's figures (UTC)."""

    turns: int = 0
    errors: int = 0
    tokens_prompt: int = 0
    tokens_completion: int = 0
    cost_usd: float = 0.0
    """Spent today."""
    month_cost_usd: float = 0.0
    """Spent this calendar month."""


VectorState = Literal["ann", "exact", "building", "loading", "database", "not_loaded"]


class VectorIndexOut(BaseModel):
    """The agent's vectors in this process's in-process index (what recall searches)."""

    state: VectorState
    """``ann``: searches go through the ANN index; ``exact``: exact search (fewer rows than
    ``ann_rows``); ``building``: exact search while its ANN index is made; ``loading``: the
    vectors are being read from the store; ``database``: the store's server searches
    (``$vectorSearch``), nothing is held here; ``not_loaded``: not held in this process (the
    agent does not run here, or has not searched yet)."""
    rows: int | None
    """Vectors held (all kinds; knowledge's own set is not counted twice); null unless loaded."""
    bytes: int
    """Memory held: the rows and any ANN graph."""
    ann_rows: int | None
    """From this many rows a set gets an ANN index; null without an in-process index."""
    note: str
    """The state in words."""


class AgentSummaryOut(FiguresOut):
    agent_id: str
    vectors: VectorIndexOut | None = None
    budget: BudgetOut | None = None
    budget_problem: str | None = None
    """Why the character's ``settings.budget`` is not applied (it is not a valid one)."""
    exceeded: ExceededOut | None = None
    """The budget that is spent and the policy acting, or null."""


class SummaryOut(BaseModel):
    day: str
    """Today (UTC), ``YYYY-MM-DD``."""
    agents: list[AgentSummaryOut]
    total: FiguresOut
    global_budget: BudgetOut | None = None
    global_exceeded: ExceededOut | None = None


def _recorder(state: ApiState) -> SeriesRecorder:
    recorder = state.manager.services.get("series")
    if not isinstance(recorder, SeriesRecorder):
        raise ApiError(
            409,
            "series_unavailable",
            "this server keeps no time series; `carrier run` and `carrier serve` keep them "
            "unless CARRIER_SERIES=off",
        )
    return recorder


def _scope(who: Principal, agent_id: str | None) -> list[str] | None:
    """The agents a caller may read: an agent token its own, whatever it asks."""
    if who.admin:
        return [agent_id] if agent_id is not None else None
    if agent_id is not None and agent_id != who.agent_id:
        raise ApiError(
            403,
            "forbidden",
            f"token {who.name!r} is scoped to agent {who.agent_id!r}, not {agent_id!r}",
        )
    return [who.agent_id or ""]


def _seconds(at: datetime) -> int:
    return int(at.timestamp())


@router.get(
    "/metrics/series",
    response_model=SeriesOut,
    summary="Time series for charts",
    responses={**UNAVAILABLE, **error_responses(422)},
)
async def read_series(
    state: Annotated[ApiState, Depends(api_state)],
    who: Annotated[Principal, Depends(principal)],
    name: Annotated[
        list[Name],
        Query(
            min_length=1,
            max_length=20,
            description="turns, errors, tokens.prompt, tokens.completion, cost_usd, redactions, "
            "jobs.<outcome>, or latency.<stage> (read as .p50 and .p95); repeatable.",
        ),
    ],
    agent_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    step: Step = Step.MINUTE,
    start: Annotated[
        IsoDatetime | None,
        Query(
            alias="from",
            description="Inclusive; default an hour (minute) or 30 days (day) before the "
            "step that holds `to`.",
        ),
    ] = None,
    end: Annotated[
        IsoDatetime | None,
        Query(alias="to", description="Exclusive; default the end of the step holding now."),
    ] = None,
    group: Annotated[
        Literal["agent", "total"],
        Query(description="One line per agent, or their sum."),
    ] = "agent",
) -> SeriesOut:
    """Counters per minute or per day, per agent or summed; one point per step."""
    recorder = _recorder(state)
    agents = _scope(who, agent_id)
    if end is not None:
        until = _seconds(end)
        since = _seconds(start) if start is not None else until - DEFAULT_SPAN[step]
    else:
        # Up to the end of the step holding now, and the span before that step: one point more
        # than the span holds (61 minutes, 31 days), whatever the second within the step.
        until = bucket_start(time.time(), step) + step.seconds
        since = _seconds(start) if start is not None else until - DEFAULT_SPAN[step] - step.seconds
    if since >= until:
        raise ApiError(
            422,
            "invalid_range",
            "from must be before to",
            problems=[ProblemOut(path="query.from", message="must be before to")],
        )
    try:
        lines = await read_lines(
            recorder.store,
            names=list(dict.fromkeys(name)),
            step=step,
            start=since,
            end=until,
            agents=agents,
            total=group == "total",
        )
    except ValueError as exc:
        raise ApiError(
            422, "invalid_range", str(exc), problems=[ProblemOut(path="query", message=str(exc))]
        ) from None
    return SeriesOut(
        step=step,
        start=since,
        end=until,
        lines=[LineOut(name=x.name, agent_id=x.agent, points=x.points) for x in lines],
    )


@router.get(
    "/metrics/summary",
    response_model=SummaryOut,
    summary="Today's figures and budgets, per agent",
    responses=UNAVAILABLE,
)
async def read_summary(
    state: Annotated[ApiState, Depends(api_state)],
    who: Annotated[Principal, Depends(principal)],
) -> SummaryOut:
    """Each agent's turns, errors, tokens and cost today, its spending this month, its budget
    and whether a budget is spent (and which policy acts); the same summed."""
    recorder = _recorder(state)
    budgets = state.manager.services.get("budgets")
    now = time.time()
    today = int(now // 86_400 * 86_400)
    if who.admin:
        ids = [record.id for record in await state.manager.list()]
    else:
        ids = [who.agent_id or ""]
    rows = await recorder.store.select(
        Step.DAY,
        today,
        today + 86_400,
        names=[TURNS, ERRORS, TOKENS_PROMPT, TOKENS_COMPLETION, COST],
        agents=None if who.admin else ids,
    )
    figures: dict[str, dict[str, float]] = {}
    for row in rows:
        figures.setdefault(row.agent, {})[row.name] = row.value
    vector_stats = state.manager.store.vector_stats()
    running = set(state.manager.running_ids())
    agents = []
    for agent_id in ids:
        budget, problem = await _budget(state, agent_id)
        spend = recorder.spent(agent_id)
        exceeded = budgets.status(agent_id, budget) if isinstance(budgets, Budgets) else None
        agents.append(
            AgentSummaryOut(
                agent_id=agent_id,
                **_figures(figures.get(agent_id, {}), spend.day_usd, spend.month_usd).model_dump(),
                budget=BudgetOut.of(budget),
                budget_problem=problem,
                exceeded=ExceededOut.of(exceeded),
                vectors=_vectors(state, agent_id, vector_stats, running=agent_id in running),
            )
        )
    summed: dict[str, float] = {}
    for agent_id, values in figures.items():
        if who.admin or agent_id in ids:
            for key, value in values.items():
                summed[key] = summed.get(key, 0.0) + value
    total_spend = recorder.spent(None) if who.admin else recorder.spent(ids[0])
    out = SummaryOut(
        day=datetime.fromtimestamp(today, UTC).date().isoformat(),
        agents=agents,
        total=_figures(summed, total_spend.day_usd, total_spend.month_usd),
    )
    if who.admin and isinstance(budgets, Budgets):
        out.global_budget = BudgetOut.of(budgets.global_)
        out.global_exceeded = ExceededOut.of(budgets.status(None, None))
    return out


def _figures(values: dict[str, float], day_usd: float, month_usd: float) -> FiguresOut:
    return FiguresOut(
        turns=int(values.get(TURNS, 0)),
        errors=int(values.get(ERRORS, 0)),
        tokens_prompt=int(values.get(TOKENS_PROMPT, 0)),
        tokens_completion=int(values.get(TOKENS_COMPLETION, 0)),
        cost_usd=round(day_usd, 6),
        month_cost_usd=round(month_usd, 6),
    )


async def _budget(state: ApiState, agent_id: str) -> tuple[Budget | None, str | None]:
    """The agent's budget as its stored character says, or why it is not one."""
    try:
        record = await state.manager.get(agent_id)
        return budget_of(parse_character(record.character)), None
    except AgentNotFound:
        return None, None
    except CarrierError as exc:
        return None, str(exc)


def _vectors(
    state: ApiState, agent_id: str, stats: list[dict[str, object]], *, running: bool
) -> VectorIndexOut:
    """What this process's vector index holds for the agent (``stats``:
    :meth:`~carrier.memory.base.Store.vector_stats`)."""
    index = getattr(state.manager.store, "vectors", None)
    ann_rows = index.ann_rows if isinstance(index, VectorIndex) else None
    sets = [e for e in stats if e.get("agent_id") == agent_id]
    size = sum(_int(e.get("bytes")) + _int(e.get("ann_bytes")) for e in sets)
    main = [e for e in sets if e.get("set") == "main"] or sets

    def out(state: VectorState, note: str, rows: int | None = None) -> VectorIndexOut:
        return VectorIndexOut(state=state, rows=rows, bytes=size, ann_rows=ann_rows, note=note)

    if not sets:
        if not running:
            return out("not_loaded", "not loaded here: the index lives in the process that runs it")
        if ann_rows is None:
            return out("database", "searched by the store's server ($vectorSearch)")
        return out("not_loaded", "not loaded yet: it loads at the agent's first search")
    if any(e.get("rows") is None for e in main):
        return out("loading", "loading from the store; searches read the database meanwhile")
    rows = sum(_int(e.get("rows")) for e in main)
    if all(e.get("ann") for e in main):
        return out("ann", "ANN index ready", rows)
    if ann_rows is not None and rows >= ann_rows:
        return out("building", "exact search while its ANN index is made", rows)
    limit = f"; an ANN index is made at {ann_rows:,} rows" if ann_rows is not None else ""
    return out("exact", f"exact search{limit}", rows)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0
