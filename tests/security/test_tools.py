"""Tools that cannot be turned against the host: header secrets only as the operator allows,
no loopback, private or metadata targets (also through a name that resolves to one), error
bodies redacted and cut, who may set a tool off and how often, every call audited.

The tool server is real (loopback HTTP), so "nothing was sent" is what it saw; names resolve
through an injected resolver only (see ``_tools_world``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpcore
import pytest

from carrier.safety.egress import EgressRefused, GuardedBackend, literal_address
from carrier.tools import ToolCallError, ToolPolicy, ToolSpec, call_tool
from carrier.tools.rules import CallLimiter
from carrier.types import MemoryKind
from tests.security._tools_world import (
    ADMIN_VALUE,
    AKIA,
    INTERNAL,
    KEY,
    Resolver,
    ToolServer,
    World,
)

# -- header secrets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ("CARRIER_ADMIN_TOKEN", "Carrier's own secrets"),
        ("CARRIER_SECRET_KEY", "Carrier's own secrets"),
        ("OPENAI_API_KEY", "a model provider's key"),
        ("DISCORD_API_TOKEN", "platform credential"),
        ("UNLISTED_KEY", "has not allowed tools to send UNLISTED_KEY"),
    ],
)
async def test_tools_header_secret_refused_at_registration(
    world: World, env: str, says: str
) -> None:
    response = await world.register(headers={"Authorization": f"${env}"})

    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "tool_not_allowed"
    [problem] = body["problems"]
    assert problem["path"] == "body.headers.Authorization"
    assert says in problem["message"] and "CARRIER_TOOL_ENV" in problem["message"]
    assert (await world.client.get("/tools")).json() == []


async def test_tools_header_secret_bound_to_its_host(world: World) -> None:
    """TOOL_KEY may go to tools.internal only: a tool aimed elsewhere cannot carry it away."""
    response = await world.register(url="https://collector.example/steal")
    assert response.status_code == 422
    assert "allows TOOL_KEY only for tools.internal, not collector.example" in response.text
    assert (await world.client.get("/tools")).json() == []


def test_tools_patterns_never_grant_protected_names() -> None:
    policy = ToolPolicy.of(env=["*", "CARRIER_*", "*_API_KEY", "DISCORD_*"])
    for name in ("CARRIER_ADMIN_TOKEN", "CARRIER_SECRET_KEY", "OPENAI_API_KEY", "GROQ_API_KEY"):
        assert "names it exactly" in (policy.env_problem(name, "api.example") or "")
    assert policy.env_problem("WEATHER_TOKEN", "api.example") is None  # an ordinary name
    granted = ToolPolicy.of(env=["CARRIER_ADMIN_TOKEN@api.example"])  # the exact name grants it
    assert granted.env_problem("CARRIER_ADMIN_TOKEN", "api.example") is None
    assert granted.env_problem("CARRIER_ADMIN_TOKEN", "other.example") is not None
    with pytest.raises(ValueError, match="not NAME, NAME@host"):
        ToolPolicy.of(env=["TWO WORDS"])


async def test_tools_header_secret_refused_at_call_time(world: World) -> None:
    """A spec stored before the rules (or by another process) still cannot send the admin
    token: the call is refused before anything is sent, and the model is told why."""
    await world.store_spec(headers={"Authorization": "$CARRIER_ADMIN_TOKEN"})

    reply = await world.say("look it up")

    assert world.server.requests == []
    [output] = world.tool_outputs()
    assert "header Authorization not sent" in output and "CARRIER_TOOL_ENV" in output
    assert ADMIN_VALUE not in json.dumps(reply)
    [event] = await world.events("tool.call")
    assert event.result == "failed" and event.detail["status"] == "failed"
    assert "CARRIER_ADMIN_TOKEN" in event.detail["error"]


# -- where tools may go -----------------------------------------------------------------------

LOOPBACK_FORMS = ["127.0.0.1", "2130706433", "0x7f.1", "127.1", "[::1]", "[::ffff:127.0.0.1]"]


@pytest.mark.parametrize(
    ("host", "why"),
    [
        *((h, "loopback") for h in LOOPBACK_FORMS),
        ("169.254.169.254", "cloud metadata"),
        ("10.1.2.3", "private"),
        ("100.64.0.7", "shared"),
        ("[fd00::1]", "private"),
        ("[fe80::1]", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("localhost", "loopback name"),
    ],
)
async def test_tools_internal_targets_refused_at_registration(
    world: World, host: str, why: str
) -> None:
    response = await world.register(url=world.server.url("/ok", host=host), headers={})

    assert response.status_code == 422, response.text
    [problem] = response.json()["problems"]
    assert problem["path"] == "body.url"
    assert why in problem["message"] and "CARRIER_TOOL_INTERNAL_HOSTS" in problem["message"]
    assert (await world.client.get("/tools")).json() == []


@pytest.mark.parametrize("host", [*LOOPBACK_FORMS, "169.254.169.254", "localhost"])
async def test_tools_internal_targets_refused_at_call_time(host: str) -> None:
    """Straight to the call, past any registration: nothing reaches the server on loopback."""
    server = ToolServer()
    try:
        spec = ToolSpec(name="t", description="d", url=server.url("/ok", host=host), method="GET")
        with pytest.raises(ToolCallError, match="not sent") as caught:
            await call_tool(spec, {}, environ={}, policy=ToolPolicy())
        assert "tools may reach public addresses only" in str(caught.value)
        assert server.requests == []
    finally:
        server.close()


async def test_tools_name_resolving_to_loopback_refused(world: World) -> None:
    """A name is checked by what it resolves to, when the connection is made: registration
    cannot know (and does not resolve), the call is refused and nothing is sent."""
    world.resolver.table["sneaky.example"] = ["127.0.0.1"]
    response = await world.register(url=world.server.url("/ok", host="sneaky.example"), headers={})
    assert response.status_code == 201, response.text

    await world.say("look it up")

    assert world.server.requests == []
    assert world.resolver.asked == ["sneaky.example"]
    [output] = world.tool_outputs()
    assert "not sent: sneaky.example (127.0.0.1) is a loopback address" in output
    [event] = await world.events("tool.call")
    assert event.detail["status"] == "failed" and "loopback" in event.detail["error"]


class Recording(httpcore.AsyncNetworkBackend):
    """Stands in for the socket layer: records where it was asked to connect, connects nowhere."""

    def __init__(self) -> None:
        self.connected: list[str] = []

    async def connect_tcp(self, host: str, port: int, **_: Any) -> httpcore.AsyncNetworkStream:
        self.connected.append(host)
        raise httpcore.ConnectError("not in tests")


async def test_tools_every_address_checked_and_the_checked_one_connected() -> None:
    mixed = GuardedBackend(resolver=Resolver({"mixed.example": ["93.184.216.34", "127.0.0.1"]}))
    inner = Recording()
    mixed._inner = inner
    with pytest.raises(EgressRefused, match=r"mixed.example \(127.0.0.1\) is a loopback"):
        await mixed.connect_tcp("mixed.example", 80)
    assert inner.connected == []  # one bad answer taints the name: nothing is tried

    answers = iter([["93.184.216.34"], ["127.0.0.1"]])  # DNS rebinding: public, then loopback

    async def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    guarded = GuardedBackend(resolver=rebinding, inner=inner)
    with pytest.raises(httpcore.ConnectError):
        await guarded.connect_tcp("rebind.example", 80)
    assert inner.connected == ["93.184.216.34"]  # the address checked, never the name again
    with pytest.raises(EgressRefused, match="loopback"):
        await guarded.connect_tcp("rebind.example", 80)
    assert inner.connected == ["93.184.216.34"]
    with pytest.raises(EgressRefused, match="local socket"):
        await guarded.connect_unix_socket("/run/docker.sock")
    for literal in ("2130706433", "::ffff:169.254.169.254", "64:ff9b::a00:1", "2002:7f00:1::"):
        with pytest.raises(EgressRefused):  # addresses as written are checked, not resolved
            await guarded.connect_tcp(literal, 80)
    assert inner.connected == ["93.184.216.34"]


def test_tools_numeric_hosts_read_as_the_resolver_reads_them() -> None:
    for text in ("2130706433", "0x7f.1", "0177.0.0.1", "127.1", "0x7f000001"):
        assert str(literal_address(text)) == "127.0.0.1", text
    assert str(literal_address("[::1]")) == "::1"
    assert literal_address("deadbeef.example") is None
    assert literal_address("cafe") is None


async def test_tools_internal_host_works_with_its_name_kept(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator named tools.internal: it is reached (on loopback), the Host header keeps
    the name, the allowed key is sent, and a proxy in the environment is not used."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # would fail if it were used
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    assert (await world.register()).status_code == 201

    reply = await world.say(
        "look it up", calls=[{"id": "c", "name": "lookup", "arguments": {"q": "x"}}]
    )

    [request] = world.server.requests
    assert request["host"] == f"{INTERNAL}:{world.server.port}"
    assert request["key"] == KEY and request["query"] == {"q": ["x"]}
    assert reply["reply"] == 'Tool said: {"ran": "/ok", "n": 1}'
    [event] = await world.events("tool.call")
    assert (event.result, event.detail["status"]) == ("ok", "ran")


# -- error bodies -----------------------------------------------------------------------------


async def test_tools_error_body_redacted_cut_and_never_logged(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    assert (await world.register(url=world.server.url("/echo"))).status_code == 201

    with caplog.at_level(logging.INFO):
        reply = await world.say("look it up")
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("carrier"))

    [request] = world.server.requests
    assert request["key"] == KEY  # sent, and echoed back by the endpoint
    [output] = world.tool_outputs()
    assert output.startswith("error: tool lookup: the endpoint answered HTTP 401: bad key ")
    body = output.split("HTTP 401: ", 1)[1]
    assert len(body) <= 300 and body.endswith("\u2026")
    assert KEY not in output and AKIA not in output
    assert "HTTP 401" in ours and "bad key" not in ours  # the reason, never the body
    assert KEY not in caplog.text and AKIA not in caplog.text
    assert KEY not in json.dumps(reply) and AKIA not in json.dumps(reply)
    stored = await world.manager.store.get_memories(
        agent_id=world.agent_id, kinds=[MemoryKind.MESSAGE], limit=50
    )
    assert stored and not any(KEY in m.content.text or AKIA in m.content.text for m in stored)
    [event] = await world.events("tool.call")
    assert "bad key" not in json.dumps(event.detail) and event.detail["error"].endswith("HTTP 401")


# -- who may set a tool off -------------------------------------------------------------------


async def test_tools_default_trigger_by_method(world: World) -> None:
    assert (await world.register()).status_code == 201
    assert (await world.register(name="book", method="POST")).status_code == 201
    listed = {t["name"]: t["trigger"] for t in (await world.client.get("/tools")).json()}
    assert listed == {"book": "room_admins", "lookup": "everyone"}


async def test_tools_room_admins_only(world: World) -> None:
    assert (await world.register(name="book", method="POST")).status_code == 201
    book = [{"id": "b", "name": "book", "arguments": {"q": "table for 2"}}]
    async with await world.helper_client() as helper:
        await world.say("book it", calls=book, as_client=helper)

    assert world.server.requests == []
    [output] = world.tool_outputs()
    assert "not allowed for this person" in output and "room's admins" in output
    await world.say("book it", calls=book)  # the admin token: a room admin
    assert [r["body"] for r in world.server.requests] == [{"q": "table for 2"}]
    refused, ran = await world.events("tool.call")
    assert (refused.result, refused.detail["status"]) == ("refused", "not_allowed")
    assert refused.actor == "api:ana (ana)" and refused.detail["via"] == "token:helper"
    assert (ran.result, ran.detail["status"], ran.detail["via"]) == ("ok", "ran", "admin")


async def test_tools_listed_users_only(world: World) -> None:
    created = await world.register(trigger="users", users=["api:bob"])
    assert created.status_code == 201, created.text
    await world.say("look", user="ana")
    assert world.server.requests == []
    assert "not allowed for this person" in world.tool_outputs()[0]
    await world.say("look", user="bob")
    assert len(world.server.requests) == 1


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"trigger": "users"}, "needs the list of users"),
        ({"trigger": "everyone", "users": ["api:bob"]}, "users is read only with"),
        ({"trigger": "users", "users": ["bob"]}, 'is not "platform:id"'),
        ({"name": "approvals"}, "reserved name"),
    ],
)
async def test_tools_trigger_spec_errors(world: World, fields: dict[str, Any], says: str) -> None:
    response = await world.register(**fields)
    assert response.status_code == 422
    assert says in " ".join(p["message"] for p in response.json()["problems"])


# -- how often --------------------------------------------------------------------------------


async def test_tools_per_person_limit(world: World) -> None:
    assert (await world.register(calls_per_hour=2)).status_code == 201
    for _ in range(3):
        await world.say("again", user="ana")
    assert len(world.server.requests) == 2
    [output] = world.tool_outputs()
    assert "limit reached for this person (2 calls an hour)" in output
    await world.say("me too", user="bob")  # another person has their own count
    assert len(world.server.requests) == 3
    statuses = [e.detail["status"] for e in await world.events("tool.call")]
    assert statuses == ["ran", "ran", "limited", "ran"]


def test_tools_limit_window_is_an_hour() -> None:
    now = [0.0]
    limiter = CallLimiter(clock=lambda: now[0])
    assert limiter.take("a", "t", "api:ana", limit=1) is None
    assert limiter.take("a", "t", "api:ana", limit=1) == pytest.approx(3600)
    now[0] = 3599.0
    assert limiter.take("a", "t", "api:ana", limit=1) == pytest.approx(1)
    now[0] = 3600.0
    assert limiter.take("a", "t", "api:ana", limit=1) is None


# -- audit ------------------------------------------------------------------------------------


async def test_tools_audit_holds_argument_names_never_values(world: World) -> None:
    assert (await world.register()).status_code == 201
    secret_arg = "my-home-address-42-elm-street"
    await world.say("look", calls=[{"id": "c", "name": "lookup", "arguments": {"q": secret_arg}}])
    [event] = await world.events("tool.call")
    assert event.action == "lookup" and event.agent_id == world.agent_id
    assert event.detail["arguments"] == ["q"]
    assert secret_arg not in json.dumps(event.model_dump(mode="json"))
