"""A real ``carrier`` command for the deployment tests, in a process of its own.

    python -m tests.deploy._carrier run --no-api        (any carrier command and options)

The real command (the CLI, the agent manager, the follower, the stores, the clients) with these
stand-ins set before it runs:

- the hashing embedder, since the sentence model takes seconds to load at every start;
- a fake model answering ``re: <message>`` after ``CARRIER_TEST_MODEL_DELAY`` seconds (0 by
  default);
- when ``CARRIER_TEST_DISCORD_URL`` is set (a :class:`clients.discord.fake.FakeDiscord`'s
  ``base_url`` in the test process), discord.py's REST and gateway addresses point at it, as
  ``FakeDiscord`` does in-process;
- when ``CARRIER_TEST_INSTAGRAPI_URL`` is set (a
  :class:`clients.instagram.fake.private.FakeInstagram` served in the test process), instagrapi's
  sessions send their requests there.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import carrier.assemble as assemble
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder

DELAY_S = float(os.environ.get("CARRIER_TEST_MODEL_DELAY", "0"))


async def answer(request: ModelRequest) -> str:
    if DELAY_S:
        await asyncio.sleep(DELAY_S)
    if request.purpose == "facts":
        return "[]"
    if request.purpose == "should_respond":
        return "RESPOND"
    return (
        "<response><thought>ok</thought><actions>REPLY</actions>"
        f"<text>re: {request.query}</text></response>"
    )


def choose_model(character: Any, settings: Any, **_: Any) -> assemble.ModelChoice:
    return assemble.given_model(FunctionModel(answer, model="fake"))


def point_discord_at(base_url: str) -> None:
    import discord.gateway
    import discord.http
    import yarl

    discord.http.Route.BASE = f"{base_url}/api/v10"
    ws_url = base_url.replace("http://", "ws://", 1) + "/gateway"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(ws_url)


if __name__ == "__main__":
    assemble.default_embedder = lambda settings=None: HashEmbedder()
    assemble.choose_model = choose_model
    if os.environ.get("CARRIER_TEST_DISCORD_URL"):
        point_discord_at(os.environ["CARRIER_TEST_DISCORD_URL"])
    if os.environ.get("CARRIER_TEST_INSTAGRAPI_URL"):
        from clients.instagram.fake.private_http import point_instagrapi_at

        point_instagrapi_at(os.environ["CARRIER_TEST_INSTAGRAPI_URL"])
    from carrier.cli import main

    sys.argv = ["carrier", *sys.argv[1:]]
    main()
