"""Tools on Discord: who counts as a room admin (from the member's permissions, as the client
fills the inbound author), and a parked call decided with the approval buttons the Instagram
drafts use, its result posted back where the person asked. A real discord.py client against the
loopback fake Discord; the tool server, the job store and the audit log are real too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import discord
import pytest

from carrier.agents import AgentManager, AgentStatus
from carrier.audit import AuditFilter, SQLiteAuditLog
from carrier.jobs import SQLiteJobStore, Worker
from carrier.llm.base import ModelRequest, ModelResult
from carrier.runtime import AgentRuntime
from carrier.tool_registry import ToolRegistry
from carrier.tools import ToolPolicy, ToolSpec
from carrier.tools.approvals import NOTICE_JOB_KIND, TOOL_JOB_KIND, ToolJobs
from carrier.types import AgentRecord
from clients.discord.fake import payloads as p
from clients.discord.fake.payloads import MEMBER_PERMISSIONS
from tests.clients.discord.conftest import Harness, xml
from tests.pipeline.conftest import tool_output
from tests.security._tools_world import INTERNAL, KEY, Resolver, ToolServer

MANAGE_GUILD = str(discord.Permissions(manage_guild=True).value | int(MEMBER_PERMISSIONS))


@dataclass
class Desk:
    """The tool side of the harness: server, registry, jobs, audit, and what the model did."""

    h: Harness
    server: ToolServer
    tools: ToolRegistry
    jobs: SQLiteJobStore
    audit: SQLiteAuditLog
    outputs: list[str]

    # What the job handlers ask of the agent manager.
    def runtime(self, agent_id: str) -> AgentRuntime:
        return self.h.runtime

    async def get(self, agent_id: str) -> AgentRecord:
        return AgentRecord(id=agent_id, name="Harbor", character={})

    async def status(self, agent_id: str) -> AgentStatus:
        return AgentStatus(record=await self.get(agent_id), running=True, clients=["discord"])

    def client(self, agent_id: str, name: str) -> Any:
        return self.h.client if name == "discord" else None

    def worker(self) -> Worker:
        worker = Worker(store=self.jobs, clock=self.jobs.clock)
        handlers = ToolJobs(cast(AgentManager, self))
        worker.register(TOOL_JOB_KIND, handlers.call)
        worker.register(NOTICE_JOB_KIND, handlers.notice)
        return worker

    async def add(self, **fields: Any) -> None:
        spec = {
            "name": "book",
            "description": "Book a table.",
            "url": self.server.url("/ok"),
            "method": "POST",
            "headers": {"X-Api-Key": "$TOOL_KEY"},
            **fields,
        }
        await self.tools.add(ToolSpec.model_validate(spec))
        await self.tools.apply(self.h.runtime)

    async def ask(self, who: dict[str, Any], text: str) -> None:
        """``who`` mentions the bot in #general; the model calls ``book`` once."""
        await self.h.fake.post(
            who, f"{self.h.mention()} {text}", channel=self.h.channel("general"),
            mentions=[self.h.fake.bot],
        )  # fmt: skip
        await self.h.settle()


@pytest.fixture
async def desk(harness: Harness, tmp_path: Path) -> AsyncIterator[Desk]:
    h = harness
    server = ToolServer()
    policy = ToolPolicy.of(
        env=[f"TOOL_KEY@{INTERNAL}"],
        internal_hosts=[INTERNAL],
        resolver=Resolver({INTERNAL: ["127.0.0.1"]}),
    )
    tools = ToolRegistry(store=h.store, environ={"TOOL_KEY": KEY}, policy=policy)
    outputs: list[str] = []

    def answer(request: ModelRequest) -> Any:
        done = [m for m in request.messages if m.role == "tool"]
        if done:
            outputs.append(tool_output(done[-1].content))
            return xml("I passed it on.")
        if request.tools:
            call = {"id": "c1", "name": "book", "arguments": {"q": "table for 2"}}
            return ModelResult(text="", model="fake", tool_calls=[call])
        return xml("no tools")

    h.answer = answer
    async with (
        SQLiteJobStore(path=tmp_path / "jobs.db") as jobs,
        SQLiteAuditLog(path=tmp_path / "audit.db") as audit,
    ):
        h.runtime.services.update({"jobs": jobs, "audit": audit})
        try:
            yield Desk(h, server, tools, jobs, audit, outputs)
        finally:
            server.close()


async def test_tools_discord_room_admins_from_member_permissions(desk: Desk) -> None:
    """Ana holds a role with Manage Server; Bob is an ordinary member. A tool for room admins
    runs for Ana only; Bob's call is refused and the model told so."""
    h = desk.h
    admins = h.fake.ids()
    h.guild.roles.append(p.role(admins, "Admins", permissions=MANAGE_GUILD))
    h.guild.members[int(h.ana["id"])]["roles"] = [str(admins)]
    await desk.add()  # POST: room admins by default
    await h.start({})

    await desk.ask(h.bob, "book a table")
    assert desk.server.requests == []
    assert "not allowed for this person" in desk.outputs[-1]

    await desk.ask(h.ana, "book a table")
    assert [r["body"] for r in desk.server.requests] == [{"q": "table for 2"}]
    events = (await desk.audit.list_events(AuditFilter(kinds=("tool.call",)))).items
    actors = sorted((e.actor or "", e.detail["status"]) for e in events)
    assert actors == [
        (f"discord:ana ({h.ana['id']})", "ran"),
        (f"discord:bob ({h.bob['id']})", "not_allowed"),
    ]


async def test_tools_discord_buttons_approve_and_the_result_comes_back(desk: Desk) -> None:
    h = desk.h
    await desk.add(trigger="everyone", approval="required")
    await h.start({"approvalChannel": "showcase"})
    worker = desk.worker()

    await desk.ask(h.bob, "book a table")
    assert desk.server.requests == []
    in_general = [s for s in h.fake.sent if s.channel_id == h.channel("general")]
    assert in_general[-1].content.startswith("(Waiting for approval: book for bob")
    [job] = await desk.jobs.list_jobs(kind=TOOL_JOB_KIND)

    await worker.drain()  # the notice job posts the call in the approval channel
    posted = h.fake.sent[-1]
    assert posted.channel_id == h.channel("showcase")
    assert posted.content.startswith(
        f"**Tool call awaiting approval** from Harbor \u00b7 job `{job.id}`"
    )
    assert "book: POST tools.internal" in posted.content and '"q": "table for 2"' in posted.content
    assert f"Asked by bob (discord `{h.bob['id']}`) in #general" in posted.content
    [row] = posted.payload["components"]
    assert [b["custom_id"] for b in row["components"]] == [
        f"carrier:approve:{job.id}",
        f"carrier:reject:{job.id}",
    ]

    message = {**posted.message, "components": posted.payload["components"]}
    refused = await click(h, h.bob, message, f"carrier:approve:{job.id}", MEMBER_PERMISSIONS)
    assert "Manage Server permission" in refused["data"]["content"]
    clicked = await click(h, h.ana, message, f"carrier:approve:{job.id}", MANAGE_GUILD)
    assert clicked["data"]["content"].endswith("**Approved** by ana")
    await worker.drain()  # the approved call runs, and its result goes back to #general

    assert [r["body"] for r in desk.server.requests] == [{"q": "table for 2"}]
    result = h.fake.sent[-1]
    assert result.channel_id == h.channel("general")
    assert result.content.startswith("The request to use book for bob was approved and it ran:")
    assert result.payload["allowed_mentions"]["parse"] == []
    [approval] = (await desk.audit.list_events(AuditFilter(kinds=("tool.approval",)))).items
    assert (
        approval.actor == f"discord:ana ({h.ana['id']})"
        and approval.detail["decision"] == "approved"
    )


async def test_tools_discord_button_rejects(desk: Desk) -> None:
    h = desk.h
    await desk.add(trigger="everyone", approval="required")
    await h.start({"approvalChannel": "showcase"})
    worker = desk.worker()
    await desk.ask(h.bob, "book a table")
    await worker.drain()
    [job] = await desk.jobs.list_jobs(kind=TOOL_JOB_KIND)
    posted = h.fake.sent[-1]
    message = {**posted.message, "components": posted.payload["components"]}

    clicked = await click(h, h.ana, message, f"carrier:reject:{job.id}", MANAGE_GUILD)
    assert clicked["data"]["content"].endswith("**Rejected** by ana")
    await worker.drain()

    assert desk.server.requests == []
    told = h.fake.sent[-1]
    assert told.channel_id == h.channel("general")
    assert told.content == "The request to use book for bob was not approved."
    [event] = (await desk.audit.list_events(AuditFilter(kinds=("tool.approval",)))).items
    assert (event.actor, event.result) == (f"discord:ana ({h.ana['id']})", "refused")


async def click(h: Harness, user: Any, message: Any, custom_id: str, permissions: str) -> Any:
    """``user`` clicks a button of ``message`` (as in the Instagram drafts' tests)."""
    data = h.fake.make_interaction(
        user, "-", channel=int(message["channel_id"]), options=None, permissions=permissions
    )
    data["type"] = 3
    data["data"] = {"custom_id": custom_id, "component_type": 2}
    data["message"] = message
    h.fake.rest.remember_interaction(data)
    count = len(h.fake.interaction_responses)
    await h.fake.dispatch("INTERACTION_CREATE", data, guild_id=h.guild.id)
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) > count)
    return h.fake.interaction_responses[-1]
