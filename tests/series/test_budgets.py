"""Budgets with the fake model and made-up prices: a budget is read from the character (or the
environment for the whole process) with clear errors, and once spent its policy acts before
the next model call: warn (audited once, calls go on), fallback (the cheaper model answers),
offline (the offline provider answers), pause (the agent is stopped, audited)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from carrier.agents import AgentManager
from carrier.audit.host import open_host_audit
from carrier.audit.model import AuditFilter
from carrier.character import Character, parse_character
from carrier.errors import CharacterError, ConfigError
from carrier.llm.budget import Budget, budget_of, global_budget
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import TurnResult
from carrier.series import open_host_series
from carrier.series.host import BUDGET_EXCEEDED
from carrier.settings import load_settings
from tests.series.test_host import PRICES, answer, said

QUESTION = "what is the weather like out at sea today?"
"""Priced at more than $0.001 by the big model: one turn spends a budget of $0.001."""


def character(budget: dict[str, Any] | None = None) -> Character:
    data: dict[str, Any] = {
        "name": "Pilot",
        "bio": ["flies"],
        "messageExamples": [
            [
                {"user": "{{user1}}", "content": {"text": "weather?"}},
                {"user": "Pilot", "content": {"text": "Clear skies from the examples."}},
            ]
        ],
    }
    if budget is not None:
        data["settings"] = {"budget": budget}
    return Character.model_validate(data)


def test_budget_read_from_character_and_environment() -> None:
    assert budget_of(character()) is None
    budget = budget_of(character({"dailyUsd": 2, "policy": "fallback", "fallbackModel": "small"}))
    assert budget == Budget(daily_usd=2, policy="fallback", fallback_model="small")
    assert global_budget({}) is None
    assert global_budget({"CARRIER_BUDGET_MONTH_USD": "30", "CARRIER_BUDGET_POLICY": "pause"}) == (
        Budget(monthly_usd=30, policy="pause")
    )
    with pytest.raises(ConfigError, match="CARRIER_BUDGET_DAY_USD"):
        global_budget({"CARRIER_BUDGET_DAY_USD": "lots"})


@pytest.mark.parametrize(
    ("budget", "path", "says"),
    [
        ({"dailyUsd": -1}, "settings.budget.dailyUsd", "greater than 0"),
        ({"dailyUsd": "a lot"}, "settings.budget.dailyUsd", "number"),
        ({"dailyUsd": 1, "policy": "fallback"}, "settings.budget", "fallbackModel"),
        ({"dailyUsd": 1, "policy": "panic"}, "settings.budget.policy", "warn"),
        ({"dailyUSD": 1}, "settings.budget.dailyUSD", ""),
    ],
)
def test_budget_invalid_is_refused_with_its_path(
    budget: dict[str, Any], path: str, says: str
) -> None:
    data = {"name": "Pilot", "bio": ["flies"], "settings": {"budget": budget}}
    with pytest.raises(CharacterError) as caught:
        parse_character(data)
    [problem] = [p for p in caught.value.problems if p.path.startswith("settings.budget")]
    assert problem.path == path
    assert says in problem.message


class Host:
    def __init__(self, manager: AgentManager, model: FunctionModel) -> None:
        self.manager, self.model = manager, model

    async def agent(self, c: Character) -> str:
        record = await self.manager.create(c)
        await self.manager.start(record.id)
        return record.id

    async def say(self, agent_id: str, text: str = QUESTION) -> TurnResult:
        return await self.manager.runtime(agent_id).handle(said(text))

    async def events(self, kind: str) -> list[Any]:
        # A budget found spent is audited in a task of its own: wait for it, not for luck.
        await self.manager.services["budgets"].settle()
        page = await self.manager.audit.list_events(AuditFilter(kinds=(kind,)))
        return list(page.items)


@pytest.fixture
def make_host(tmp_path: Path) -> Callable[..., Any]:
    def make(**environ: str) -> Any:
        return _host(tmp_path, environ)

    return make


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    async for h in _host(tmp_path, {}):
        yield h


async def _host(tmp_path: Path, extra: dict[str, str]) -> AsyncIterator[Host]:
    env = {"CARRIER_DATA_DIR": str(tmp_path / "data"), **extra}
    settings = load_settings(env)
    model = FunctionModel(answer, model="big", prices=PRICES)
    async with SQLiteStore(path=tmp_path / "memory.db") as store:
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ=env,
            model_factory=lambda c: model,
            start_clients=False,
        )
        audit = await open_host_audit(settings, manager.services)
        series = await open_host_series(settings, manager)
        try:
            yield Host(manager, model)
        finally:
            await manager.close()
            await series.aclose()
            await audit.aclose()


def models_asked(model: FunctionModel) -> list[str | None]:
    return [r.model for r in model.requests if r.purpose == "response"]


async def test_budget_warn_lets_calls_go_on_and_says_so_once(host: Host) -> None:
    agent_id = await host.agent(character({"dailyUsd": 0.001}))
    first = await host.say(agent_id)
    assert first.usage.cost_usd > 0.001
    for _ in range(2):
        assert "Ahoy from big" in (await host.say(agent_id)).text
    [event] = await host.events(BUDGET_EXCEEDED)
    assert event.agent_id == agent_id
    assert event.action == "warn"
    assert event.detail["period"] == "day"
    assert event.detail["limit_usd"] == 0.001


async def test_budget_fallback_switches_to_the_cheaper_model(host: Host) -> None:
    agent_id = await host.agent(
        character({"dailyUsd": 0.001, "policy": "fallback", "fallbackModel": "small"})
    )
    assert "Ahoy from big" in (await host.say(agent_id)).text
    later = await host.say(agent_id)
    assert "Ahoy from small" in later.text
    assert later.usage.cost_usd < 0.001
    assert models_asked(host.model) == [None, "small"]


async def test_budget_offline_answers_from_the_examples(host: Host) -> None:
    agent_id = await host.agent(character({"monthlyUsd": 0.001, "policy": "offline"}))
    await host.say(agent_id)
    later = await host.say(agent_id, "weather?")
    assert later.offline
    assert "Clear skies from the examples." in later.text
    assert later.usage.cost_usd == 0
    assert len(models_asked(host.model)) == 1


async def test_budget_pause_stops_the_agent_audited(host: Host) -> None:
    agent_id = await host.agent(character({"dailyUsd": 0.001, "policy": "pause"}))
    await host.say(agent_id)
    answered = await host.say(agent_id, "weather?")  # found out here: answered offline
    assert answered.offline
    budgets = host.manager.services["budgets"]
    await budgets.settle()
    status = await host.manager.status(agent_id)
    assert not status.should_run
    assert not status.running
    assert status.desired is not None and status.desired.actor == "system"
    [stop] = [e for e in await host.events("agent.stop") if e.agent_id == agent_id]
    assert stop.actor == "system"
    [event] = await host.events(BUDGET_EXCEEDED)
    assert event.action == "pause"


async def test_budget_global_applies_to_every_agent(make_host: Callable[..., Any]) -> None:
    async for host in make_host(CARRIER_BUDGET_DAY_USD="0.001", CARRIER_BUDGET_POLICY="offline"):
        pilot = await host.agent(character())
        skipper = await host.agent(Character.model_validate({"name": "Skipper", "bio": ["x"]}))
        assert not (await host.say(pilot)).offline
        assert (await host.say(skipper)).offline  # the process's spending, not the agent's
        [event] = await host.events(BUDGET_EXCEEDED)
        assert event.detail["scope"] == "global"


async def test_budget_guards_a_model_swapped_in_by_an_edit_before_any_turn(host: Host) -> None:
    from carrier.llm.budget import BudgetedProvider

    agent_id = await host.agent(character({"dailyUsd": 0.001}))
    assert isinstance(host.manager.runtime(agent_id).model, BudgetedProvider)
    edited = (await host.manager.character(agent_id)).model_copy(update={"bio": ["Edited."]})
    await host.manager.update(agent_id, edited)
    # The edit chose the model again; it is behind the budgets before any turn (a caption
    # written by a job between the edit and the next turn is checked too).
    assert isinstance(host.manager.runtime(agent_id).model, BudgetedProvider)
