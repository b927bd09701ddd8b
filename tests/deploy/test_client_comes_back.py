"""A Discord outage at start-up, with a real ``carrier run`` process: the gateway refuses
connections for several backoff rounds, then accepts. The agent starts anyway, ``/health`` says
``degraded`` (the client ``retrying``, with the error) the whole time, and the client connects
without a restart; ``/health`` is ``ok`` again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.discord.fake import FakeDiscord
from tests.deploy.procs import ADMIN_TOKEN as ADMIN
from tests.deploy.procs import CarrierProcess, base_env, free_port

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

PILOT = """\
name: Pilot
bio: [Pilot guides ships into the harbour.]
clients: [discord]
clientConfig:
  discord:
    reconnect: {initialSeconds: 0.2, maxSeconds: 0.5}
"""


async def until(check: Callable[[], Any], what: str, proc: CarrierProcess) -> None:
    """Bounded against hanging; never a measure of speed. Looks twice a second: the API's
    rate limit (120 a minute) would hide /health's details from a faster poll."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 90
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"never: {what}\n{proc.output[-3000:]}")
        await asyncio.sleep(0.5)


async def test_discord_down_at_start_then_up_connects_without_a_restart(tmp_path: Path) -> None:
    (tmp_path / "characters").mkdir()
    (tmp_path / "characters" / "pilot.yaml").write_text(PILOT)
    async with FakeDiscord() as fake:
        fake.add_guild("Harbour", ["general"])
        fake.refuse()  # Discord is down: its API and its gateway answer 503
        port = free_port()
        env = base_env(
            tmp_path / "data",
            CARRIER_CHARACTERS_DIR=str(tmp_path / "characters"),
            CARRIER_TEST_DISCORD_URL=fake.base_url,
            DISCORD_API_TOKEN=fake.token,
        )
        proc = CarrierProcess.start("run", "--port", str(port), env=env)
        try:
            await proc.wait_for("agent API and console on")
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {ADMIN}"},
                timeout=60,
            ) as http:

                async def health() -> tuple[str, dict[str, Any]]:
                    body = (await http.get("/health")).json()
                    [agent] = body["agents"]
                    return body["status"], agent["clients"]["discord"]

                # Several refused rounds; /health said degraded at every look.
                looks = 0

                async def refused_enough() -> bool:
                    nonlocal looks
                    status, discord = await health()
                    assert (status, discord["status"]) == ("degraded", "retrying"), discord
                    assert discord["last_error"], discord
                    looks += 1
                    return fake.refused["rest"] + fake.refused["gateway"] >= 4

                await until(refused_enough, "four refused attempts", proc)
                assert looks >= 1 and not fake.gateway.identifies

                fake.accept()

                async def connected() -> bool:
                    status, discord = await health()
                    return status == "ok" and discord["status"] == "connected"

                await until(connected, "connected once Discord accepts", proc)
                assert len(fake.gateway.identifies) == 1  # one process, one connection
                assert proc.proc.poll() is None  # no restart
        finally:
            assert proc.stop() == 0, proc.output[-3000:]
