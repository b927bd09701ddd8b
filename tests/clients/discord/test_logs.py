"""The console's log tail: what the Discord client logs while it connects and handles its
agent's events goes to that agent's tail though the lines do not name it (the client sets
:func:`carrier.logtail.agent_logs` around its connection and its handlers)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from carrier.logtail import LogTail, install_log_tail
from tests.clients.discord.conftest import Harness


@pytest.fixture
def tail() -> Iterator[LogTail]:
    """A tail that knows no agent by name: only a record's context can attribute it."""
    made, uninstall = install_log_tail(dict)
    logger = logging.getLogger("clients.discord")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    yield made
    logger.setLevel(level)
    uninstall()


async def test_the_clients_lines_go_to_its_agents_tail(harness: Harness, tail: LogTail) -> None:
    h = harness
    h.decision = "RESPOND"
    await h.start({"allowedChannels": ["general"]})
    elsewhere = await h.fake.post(h.ana, "anyone here?", channel=h.channel("random"))
    await h.fake.post(h.bob, "a bot", channel=h.channel("general"))  # answered
    await h.settle()

    agent_id = h.runtime.agent_id
    mine = [line.message for line in tail.recent(agent_id, level=logging.DEBUG)]
    connected = [m for m in mine if m.startswith("discord: Harbor connected as")]
    ignored = [m for m in mine if m.startswith(f"discord: ignored message {elsewhere['id']}:")]
    assert connected and ignored, mine
    assert all(agent_id not in m for m in connected + ignored)  # attributed by context alone
    host = [line.message for line in tail.recent(None, level=logging.DEBUG)]
    assert not [m for m in host if m.startswith("discord:")], host
    assert h.fake.sent[-1].content == "echo: a bot"
