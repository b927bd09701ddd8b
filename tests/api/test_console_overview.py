"""The console's overview in headless Chromium, against a real uvicorn serving a manager whose
turns are counted into the time series (as ``carrier serve`` does) with the fake model at
made-up prices: every agent with its state, clients, model, today's figures and budget; the
cost chart grows after turns; a budget that pauses its agent is seen acting (the agent stopped
by ``system``, the budget marked spent); the vector index chart shows each agent's rows and how
it searches. The page stays within 400 px. Screenshots go to
``test-artifacts/console-overview*.png``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from carrier.agents import AgentManager
from carrier.api import ApiSettings, api_server
from carrier.audit.host import open_host_audit
from carrier.llm.fake import FunctionModel
from carrier.series import open_host_series
from carrier.settings import Settings
from tests.api.test_console_browser import (
    ARTIFACTS,
    OVERFLOWING,
    browser,
    expect,
    local_admin,
    loopback_settings,  # noqa: F401 - fixture
    signed_in,
)
from tests.series.test_host import PRICES, answer

PAUSING = {
    "name": "Lighthouse",
    "bio": ["Lighthouse keeps the light on."],
    "settings": {"budget": {"dailyUsd": 0.001, "policy": "pause"}},
    "messageExamples": [
        [
            {"user": "{{user1}}", "content": {"text": "hello"}},
            {"user": "Lighthouse", "content": {"text": "The light is on."}},
        ]
    ],
}


async def bar_total(page: object, figure: str) -> float:
    """The sum of the bars a chart draws (their values, as the chart set them)."""
    values = await page.locator(f"#{figure} svg rect").evaluate_all(  # type: ignore[attr-defined]
        "rects => rects.map(r => Number(r.dataset.value))"
    )
    return float(sum(values))


async def test_console_overview_charts_move_and_budget_pauses(
    make_manager: Callable[..., AgentManager],
    loopback_settings: Settings,  # noqa: F811 - the fixture imported above
    api_settings: ApiSettings,
    tmp_path: Path,
) -> None:
    model = FunctionModel(answer, model="big", prices=PRICES)
    manager = make_manager(
        loopback_settings,
        model_factory=lambda character: model,
        environ={"CARRIER_SERIES_FLUSH_SECONDS": "3600"},  # the test flushes: no waiting
    )
    audit = await open_host_audit(loopback_settings, manager.services)
    series = await open_host_series(loopback_settings, manager)
    assert series.recorder is not None and series.budgets is not None
    try:
        async with (
            api_server(manager, loopback_settings, port=0, api_settings=api_settings) as url,
            httpx.AsyncClient(
                base_url=url, timeout=10, headers=local_admin(loopback_settings)
            ) as http,
            browser(tmp_path) as (page, errors, escaped),
        ):
            ids = {}
            for data in ({"name": "Pilot", "bio": ["Pilot flies."]}, PAUSING):
                created = await http.post("/agents", json=data)
                ids[data["name"]] = created.json()["id"]
                assert (await http.post(f"/agents/{ids[data['name']]}/start")).status_code == 200
            pilot, lighthouse = ids["Pilot"], ids["Lighthouse"]

            await page.goto(signed_in(url, loopback_settings))
            rows = page.locator("#overview-agents tbody tr")
            await expect(rows).to_have_count(2)
            pilot_row = page.locator(f"#overview-{pilot}")
            await expect(pilot_row.locator(".state .badge")).to_have_text("running")
            await expect(pilot_row.locator(".model")).to_contain_text("big")
            await expect(pilot_row.locator(".clients")).to_have_text("no clients")
            await expect(pilot_row.locator("td.budget")).to_have_text("none")
            await expect(page.locator(f"#overview-{lighthouse} td.budget")).to_contain_text(
                "of $0.001 today · pause"
            )
            await expect(page.locator("#overview-line")).to_contain_text("today 0 turns")
            await expect(page.locator("#chart-cost .chart-legend")).to_have_text("No data yet.")
            assert await bar_total(page, "chart-cost") == 0

            # Turns: the figures and the cost chart move.
            for text in ("hello", "how high do we fly?"):
                sent = await http.post(f"/{pilot}/message", json={"text": text})
                assert sent.status_code == 200, sent.text
            await series.recorder.flush()
            await page.get_by_role("button", name="Update figures").click()
            await expect(pilot_row.locator("td.num").first).to_have_text("2")
            await expect(page.locator("#chart-cost .chart-legend")).to_contain_text("Pilot: $")
            first = await bar_total(page, "chart-cost")
            assert first > 0
            await expect(page.locator("#chart-turns .chart-legend")).to_contain_text("turns:")
            await expect(page.locator("#chart-latency-p95 .chart-legend")).to_contain_text(
                "generate:"
            )
            await expect(page.locator("#chart-jobs .chart-legend")).to_contain_text("succeeded: 0")
            # The vector index each agent has in this process: rows, and how it searches.
            vectors = page.locator("#chart-vectors")
            await expect(vectors.locator("figcaption")).to_have_text(
                "Vector index: rows per agent, in this process"
            )
            pilot_vectors = vectors.locator(".chart-legend li[data-label='Pilot']")
            await expect(pilot_vectors).to_contain_text(
                "exact search; an ANN index is made at 20,000 rows"
            )
            await expect(vectors.locator(".chart-legend li")).to_have_count(2)

            sent = await http.post(f"/{pilot}/message", json={"text": "and the wind?"})
            assert sent.status_code == 200
            await series.recorder.flush()
            await page.get_by_role("button", name="Update figures").click()
            await expect(pilot_row.locator("td.num").first).to_have_text("3")
            assert await bar_total(page, "chart-cost") > first
            # The index took the earlier turns in (at this turn's search): its bar grew.
            await expect(pilot_vectors).to_contain_text(" rows · ")
            assert await bar_total(page, "chart-vectors") > 0
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "console-overview.png"), full_page=True)

            # A budget that pauses: the first turn spends it, the next call finds it spent.
            for text in ("hello", "hello again"):
                sent = await http.post(f"/{lighthouse}/message", json={"text": text})
                assert sent.status_code == 200, sent.text
            await series.budgets.settle()
            await series.recorder.flush()
            await page.get_by_role("button", name="Update figures").click()
            row = page.locator(f"#overview-{lighthouse}")
            await expect(row.locator(".state .badge")).to_have_text("stopped")
            await expect(row.locator(".state")).to_contain_text("stopped by system")
            await expect(row.locator(".badge.exceeded")).to_have_text("spent")
            await expect(row.locator("td.budget")).to_contain_text("policy pause")
            await expect(page.locator("#overview-line")).to_contain_text("1 over budget")
            assert (await http.get(f"/agents/{lighthouse}")).json()["status"] == "stopped"
            # Stopped by its budget: what this process still holds of it is shown as it is.
            await expect(
                vectors.locator(".chart-legend li[data-label='Lighthouse']")
            ).to_contain_text("exact search")
            await page.screenshot(
                path=str(ARTIFACTS / "console-overview-budget.png"), full_page=True
            )

            # Readable at 400 px: nothing wider than the screen; the rows are cards.
            await page.set_viewport_size({"width": 400, "height": 900})
            await expect(rows).to_have_count(2)
            assert await page.evaluate("document.scrollingElement.scrollWidth") <= 400
            assert await page.evaluate(OVERFLOWING, 400) == []
            await expect(row.locator("td.cost")).to_be_visible()
            await page.screenshot(path=str(ARTIFACTS / "console-overview-400.png"), full_page=True)
            assert errors == []
            assert escaped == []
    finally:
        await manager.close()
        await series.aclose()
        await audit.aclose()
