"""``carrier serve`` for the kill tests, in a process of its own.

    python -m tests.resilience._serve --port PORT      (settings from CARRIER_* as usual)

The real command (uvicorn, the API, the agent manager, runtimes, the SQLite store) with two
stand-ins: the hashing embedder, since the sentence model takes seconds to load at every
restart, and a fake model that answers after ``CARRIER_TEST_MODEL_DELAY`` seconds (0.3 by
default), so that turns are in flight when the test kills the process.
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

DELAY_S = float(os.environ.get("CARRIER_TEST_MODEL_DELAY", "0.3"))


async def answer(request: ModelRequest) -> str:
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
    return assemble.given_model(FunctionModel(answer, model="delayed"))


if __name__ == "__main__":
    assemble.default_embedder = lambda settings=None: HashEmbedder()
    assemble.choose_model = choose_model
    from carrier.cli import main

    sys.argv = ["carrier", "serve", "--no-clients", *sys.argv[1:]]
    main()
