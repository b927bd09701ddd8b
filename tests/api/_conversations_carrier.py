"""``carrier`` for the Conversations walk, in a process of its own: the command of
:mod:`tests.deploy._carrier` (hashing embedder, fake model) with a model that thinks aloud,
costs something (made-up prices) and names a fact about the speaker, so the console has a
thought, a cost and a fact to show.

    python -m tests.api._conversations_carrier serve --port 8123
"""

from __future__ import annotations

import sys
from typing import Any

import carrier.assemble as assemble
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder

PRICES = {"keeper-model": (2e-4, 4e-4)}
"""USD per prompt and completion token (litellm's cost map is not reachable in tests)."""
FACT = "They keep the harbor light."


def answer(request: ModelRequest) -> str:
    if request.purpose == "facts":
        return f'[{{"claim": "{FACT}", "type": "fact"}}]'
    if request.purpose == "should_respond":
        return "RESPOND"
    return (
        "<response><thought>the keeper asks about the tide</thought><actions>REPLY</actions>"
        f"<text>re: {request.query}</text></response>"
    )


def choose_model(character: Any, settings: Any, **_: Any) -> assemble.ModelChoice:
    return assemble.given_model(FunctionModel(answer, model="keeper-model", prices=PRICES))


if __name__ == "__main__":
    assemble.default_embedder = lambda settings=None: HashEmbedder()
    assemble.choose_model = choose_model
    from carrier.cli import main

    sys.argv = ["carrier", *sys.argv[1:]]
    main()
