"""The offline provider: answers with no model and no key, from the persona's own examples.

It picks the message example whose user line is closest in meaning to the inbound text and
answers with the persona's reply, so a fresh install talks in character (and shows memory at
work) before any key is configured. Every answer says in its thought that it is offline.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from carrier.llm.base import ModelProvider, ModelRequest, ModelResult
from carrier.llm.parse import render_response
from carrier.memory.embedder import Embedder

__all__ = ["NO_MODEL_MESSAGE", "OfflineProvider"]

NO_MODEL_MESSAGE = (
    "I'm running without a language model: none is configured, and my character has no message "
    "examples to answer from. To give me a voice, set CARRIER_MODEL to a litellm model string "
    "(for example openai/gpt-4o-mini) and the provider's key (for example OPENAI_API_KEY), "
    "then start me again."
)
"""The honest answer when there is neither a model nor a message example."""

RECALL_THRESHOLD = 0.8
"""Cosine similarity from which a recalled earlier message counts as "asked before"."""

_PLACEHOLDER_USER = re.compile(r"\{\{\s*user\d*\s*\}\}", re.IGNORECASE)
_PLACEHOLDER_AGENT = re.compile(r"\{\{\s*(char|agentName)\s*\}\}", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


class OfflineProvider(ModelProvider):
    """Answers from ``examples`` (user text, agent reply) by semantic similarity, with no model.

    ``request.context`` may carry ``sender_name`` (replaces ``{{user1}}`` placeholders),
    ``recalled`` (earlier messages ``{"text", "created_at", "speaker"}``; one close to the query
    adds a line showing memory) and, for summaries, ``messages`` (texts to summarize).
    """

    name = "offline"
    offline = True

    def __init__(
        self,
        *,
        agent_name: str,
        examples: Sequence[tuple[str, str]],
        embedder: Embedder,
        post_examples: Sequence[str] = (),
    ) -> None:
        self.agent_name = agent_name
        # Keep the 1-based position in the character file, for the thought.
        self.examples = [
            (i, user.strip(), reply.strip())
            for i, (user, reply) in enumerate(examples, start=1)
            if user.strip() and reply.strip()
        ]
        self.post_examples = [p.strip() for p in post_examples if p.strip()]
        self.embedder = embedder
        self._example_vectors: np.ndarray | None = None
        self._post_vectors: np.ndarray | None = None
        self._lock = asyncio.Lock()
        self.last_result: ModelResult | None = None

    async def generate(self, request: ModelRequest) -> ModelResult:
        if request.purpose == "should_respond":
            text = self._should_respond(_query(request))
        elif request.purpose == "facts":
            text = "[]"
        elif request.purpose == "summary":
            text = _summarize(request)
        elif request.purpose == "caption":
            text = await self._caption(request)
        else:
            text = await self._respond(request)
        return ModelResult(text=text, model="offline", offline=True)

    # -- purposes -------------------------------------------------------------------------------

    def _should_respond(self, query: str) -> str:
        name = re.escape(self.agent_name.strip())
        if name and re.search(rf"(?<!\w){name}(?!\w)", query, re.IGNORECASE):
            return "RESPOND"
        return "IGNORE"

    async def _respond(self, request: ModelRequest) -> str:
        query = _query(request)
        sender = str(request.context.get("sender_name") or "").strip()
        query_vector = (await self.embedder.embed([query]))[0]
        example_vectors, _ = await self._vectors()
        if not self.examples:
            reply = NO_MODEL_MESSAGE
            thought = "offline mode: no model is configured and the character has no examples"
        else:
            index, score = _best(example_vectors, query_vector)
            number, _, reply = self.examples[index]
            reply = self._fill(reply, sender)
            thought = (
                f"offline mode: answered from message example {number} (similarity {score:.2f})"
            )
        memory = await self._memory_line(request.context.get("recalled"), query_vector, sender)
        if memory:
            reply = f"{memory} {reply}"
            thought += "; recalled an earlier conversation"
        return render_response(thought=thought, actions=["REPLY"], text=reply)

    async def _caption(self, request: ModelRequest) -> str:
        query = _query(request)
        sender = str(request.context.get("sender_name") or "").strip()
        example_vectors, post_vectors = await self._vectors()
        if not self.post_examples and not self.examples:
            return query
        query_vector = (await self.embedder.embed([query]))[0]
        if self.post_examples:
            index, _ = _best(post_vectors, query_vector)
            return self._fill(self.post_examples[index], sender)
        index, _ = _best(example_vectors, query_vector)
        return self._fill(self.examples[index][2], sender)

    # -- helpers --------------------------------------------------------------------------------

    async def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Example and post vectors, embedded once (the first caller does it; others wait)."""
        async with self._lock:
            if self._example_vectors is None or self._post_vectors is None:
                users = [user for _, user, _ in self.examples]
                self._example_vectors = await self._embed(users)
                self._post_vectors = await self._embed(self.post_examples)
        return self._example_vectors, self._post_vectors

    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.asarray(await self.embedder.embed(list(texts)), dtype=np.float32)

    def _fill(self, text: str, sender: str) -> str:
        text = _PLACEHOLDER_USER.sub(sender or "friend", text)
        return _PLACEHOLDER_AGENT.sub(self.agent_name, text)

    async def _memory_line(self, recalled: Any, query_vector: np.ndarray, sender: str) -> str:
        items = [
            r
            for r in (recalled or [])
            if isinstance(r, Mapping) and str(r.get("text") or "").strip()
        ]
        if not items:
            return ""
        vectors = await self._embed([str(r["text"]).strip() for r in items])
        index, score = _best(vectors, query_vector)
        if score < RECALL_THRESHOLD:
            return ""
        item = items[index]
        said = " ".join(str(item["text"]).split())
        quote = said if len(said) <= 80 else said[:77].rstrip() + "..."
        speaker = str(item.get("speaker") or "").strip()
        who = "You" if not speaker or not sender or speaker.lower() == sender.lower() else speaker
        verb = "asked me this before" if said.endswith("?") else "told me this before"
        when = _date(item.get("created_at"))
        detail = f'"{quote}", {when}' if when else f'"{quote}"'
        return f"{who} {verb} ({detail})."


def _best(vectors: np.ndarray, query: np.ndarray) -> tuple[int, float]:
    """Index and cosine of the closest row; near-ties go to the earliest row."""
    scores = vectors @ np.asarray(query, dtype=np.float32)
    index = int(np.argmax(np.round(scores, 5)))
    return index, float(scores[index])


def _text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def _query(request: ModelRequest) -> str:
    """The text being answered: ``request.query``, else the last user message."""
    if request.query.strip():
        return request.query.strip()
    for message in reversed(request.messages):
        if message.role == "user":
            return _text_of(message.content).strip()
    return ""


def _date(value: Any) -> str:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if not value:
        return ""
    text = str(value)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return text[:10]


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""


def _summarize(request: ModelRequest, *, max_items: int = 6, max_chars: int = 600) -> str:
    """First sentences of the messages to summarize: ``context["messages"]`` (texts or dicts
    with ``text``) if given, else the lines of the last user message (the prompt)."""
    given = request.context.get("messages")
    if isinstance(given, list) and given:
        texts = [m.get("text", "") if isinstance(m, Mapping) else str(m) for m in given]
    else:
        last_user = [m for m in request.messages if m.role == "user"][-1:]
        source = _text_of(last_user[0].content) if last_user else request.query
        texts = source.splitlines()
    sentences = [s for s in (_first_sentence(str(t)) for t in texts) if s][:max_items]
    summary = " ".join(sentences)
    return summary if len(summary) <= max_chars else summary[: max_chars - 3].rstrip() + "..."
