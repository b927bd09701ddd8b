"""The console's log tail: what the Instagram client logs while it starts and while its jobs
run (a post published through the loopback fake Graph API and FTP) goes to its agent's tail,
though the lines do not name the agent (:func:`carrier.logtail.job_logs`, ``agent_logs``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from carrier.jobs import JobState
from carrier.logtail import LogTail, install_log_tail
from clients.instagram.jobs import PUBLISH_JOB_KIND
from tests.clients.instagram._conversation_world import World
from tests.clients.instagram.helpers import make_image


@pytest.fixture
def tail() -> Iterator[LogTail]:
    """A tail that knows no agent by name: only a record's context can attribute it."""
    made, uninstall = install_log_tail(dict)
    logger = logging.getLogger("clients.instagram")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield made
    logger.setLevel(level)
    uninstall()


async def test_the_clients_lines_go_to_its_agents_tail(
    make_world: Callable[..., Any], tail: LogTail, tmp_path: Path
) -> None:
    w: World = await make_world()
    image = make_image(tmp_path / "lib" / "harbour.jpg")
    draft = {
        "post_key": "harbour-at-dusk",
        "kind": "photo",
        "media": [str(image)],
        "caption": "the harbour at dusk",
        "source": "library",
    }
    job = await w.jobs.enqueue(PUBLISH_JOB_KIND, agent_id=w.agent_id, payload={"draft": draft})
    await w.service.worker.drain()
    done = await w.jobs.get(job.id)
    assert done is not None and done.state is JobState.SUCCEEDED, done

    mine = [line.message for line in tail.recent(w.agent_id)]
    started = [m for m in mine if m.startswith("instagram client ready for Lumen")]
    published = [m for m in mine if m.startswith("post harbour-at-dusk: published as ")]
    assert started and published, mine
    assert all(w.agent_id not in m for m in started + published)  # by context alone
    host = [line.message for line in tail.recent(None)]
    assert not [m for m in host if m.startswith(("post harbour", "instagram client"))], host
