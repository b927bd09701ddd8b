"""``carrier`` as :mod:`tests.deploy._carrier` runs it, with one change for the operations
console's walk: a message containing ``fail`` makes the fake model fail the way a provider
does, quoting the key it was given (:data:`LEAKED_KEY`), so the turn logs a line naming the
agent and the live log tail must show it redacted.

    python -m tests.api._ops_carrier serve --port 8123
"""

from __future__ import annotations

import sys

import carrier.assemble as assemble
from carrier.errors import ProviderError
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from tests.deploy import _carrier

LEAKED_KEY = "sk-proj-" + "Tq3Wm8Zr5Xv2Ny7Kp4Bd9Hf6" * 2


async def answer(request: ModelRequest) -> str:
    if request.purpose == "response" and "fail" in (request.query or ""):
        raise ProviderError(f"401 from the provider: incorrect API key {LEAKED_KEY}")
    return await _carrier.answer(request)


def choose_model(character: object, settings: object, **_: object) -> assemble.ModelChoice:
    return assemble.given_model(FunctionModel(answer, model="fake"))


if __name__ == "__main__":
    assemble.default_embedder = lambda settings=None: HashEmbedder()
    assemble.choose_model = choose_model
    from carrier.cli import main

    sys.argv = ["carrier", *sys.argv[1:]]
    main()
