"""Stage 3, generation: render the prompt, call the model (streaming where the client can), parse
the structured response, and repair it once if the model's output was malformed.

The model's retries, fallbacks and deadline are the provider's; what reaches the person is this
stage's: a stream that breaks before any reply text went out carries on (the provider resumes
its plan), one that breaks after ends the reply there with :data:`CUT_MARKER`, and a model that
gives no usable answer ends the turn ``failed`` with the reason, the client showing
:data:`FAILURE_NOTICE` (see :func:`failure_of`)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from carrier.errors import ProviderError
from carrier.llm.base import ChatMessage, ModelRequest, ModelResult
from carrier.llm.failures import CUT_MARKER, FAILURE_CODE, FAILURE_NOTICE, StreamInterrupted
from carrier.llm.parse import (
    ParsedResponse,
    closing_tag,
    format_instructions,
    parse_response,
    repair_prompt,
)
from carrier.pipeline.base import HookPoint, Turn, run_hooks
from carrier.prompts import prompt_messages, template_for
from carrier.types import MemoryKind, MemoryStatus
from carrier.untrusted import unescape

__all__ = ["FailureNotice", "Generator", "TextStreamExtractor", "failure_of", "offered_tools"]

log = logging.getLogger(__name__)


class TextStreamExtractor:
    """Pulls the ``<text>`` element out of a streamed XML response as it arrives, so the client can
    show the reply while the model is still writing (the thought is never shown).

    Fields before it are skipped whole, so a ``<text>`` tag quoted inside the thought (someone's
    message echoed back) is not taken for the reply; entities are unescaped as the parser does,
    so what streams is what is stored."""

    OPEN, CLOSE = "<text>", "</text>"
    _FIELD = re.compile(r"<\s*(thought|actions|action|text)\s*>", re.IGNORECASE)
    _ENTITIES = ("&lt;", "&gt;", "&amp;", "&quot;")

    def __init__(self) -> None:
        self.buffer = ""
        self.emitted = 0
        self.started = False
        self.done = False
        self.text = ""
        """The reply text streamed so far."""
        self._cursor = 0

    def feed(self, piece: str) -> str:
        """Add a piece of model output; return the new reply text it completes (maybe empty)."""
        self.buffer += piece
        if self.done:
            return ""
        if not self.started and not self._start():
            return ""
        close = closing_tag(self.buffer, "text", 0)  # a quoted <text>...</text> is content
        if close is not None:
            self.done = True
            return self._emit(close.start())
        # Hold back what could be the start of "</text>", or of an entity.
        safe = len(self.buffer)
        for k in range(1, len(self.CLOSE)):
            if self.buffer.endswith(self.CLOSE[:k]):
                safe = len(self.buffer) - k
        amp = self.buffer.rfind("&", self.emitted, safe)
        if amp >= 0 and any(
            e.startswith(self.buffer[amp:safe]) and e != self.buffer[amp:safe]
            for e in self._ENTITIES
        ):
            safe = amp
        return self._emit(safe)

    def _start(self) -> bool:
        """Find the ``<text>`` that opens the reply, skipping whole fields before it."""
        while True:
            m = self._FIELD.search(self.buffer, self._cursor)
            if m is None:
                return False
            name = m.group(1).lower()
            if name == "text":
                self.started = True
                self.buffer = self.buffer[m.end() :]
                self.emitted = 0
                return True
            close = closing_tag(self.buffer, name, m.end())
            if close is None:
                return False  # still inside that field
            self._cursor = close.end()

    def _emit(self, upto: int) -> str:
        if upto <= self.emitted:
            return ""
        out = unescape(self.buffer[self.emitted : upto])
        self.emitted = upto
        self.text += out
        return out


@dataclass(frozen=True, slots=True)
class FailureNotice:
    """A turn the model could not answer, as a client shows it."""

    notice: str
    """What to show the person: :data:`FAILURE_NOTICE`."""
    code: str
    """The API's error code: :data:`FAILURE_CODE`."""
    retry_after: float | None
    """Seconds the model's provider asked callers to wait, when it said."""


class _Outcome(Protocol):
    status: MemoryStatus
    trace: dict[str, Any]


def failure_of(result: _Outcome) -> FailureNotice | None:
    """What to show for a turn (a ``TurnResult``) the model gave no usable answer: the notice,
    its code and retry-after. None for a turn that answered, or ended for another reason."""
    found = result.trace.get("failure")
    if result.status is not MemoryStatus.FAILED or not isinstance(found, dict):
        return None
    return FailureNotice(
        notice=str(found.get("notice") or FAILURE_NOTICE),
        code=str(found.get("code") or FAILURE_CODE),
        retry_after=found.get("retry_after"),
    )


def mark_failed(turn: Turn, reason: str, *, retry_after: float | None = None) -> None:
    """End ``turn`` failed with ``reason`` (the operator's) and record the notice a client shows
    instead of a reply."""
    turn.end(reason, status=MemoryStatus.FAILED)
    turn.trace["failure"] = {
        "code": FAILURE_CODE,
        "notice": FAILURE_NOTICE,
        "retry_after": retry_after,
    }


def offered_tools(turn: Turn) -> list[dict[str, Any]]:
    """OpenAI-format definitions of the tool actions available in this turn."""
    names = set(turn.state.actions) if turn.state is not None else set()
    tools = []
    for action in turn.runtime.registry.actions.values():
        if action.parameters is not None and action.name in names:
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": action.tool_name or action.name,
                        "description": action.description,
                        "parameters": action.parameters,
                    },
                }
            )
    return tools


class Generator:
    """Calls the agent's model with the composed state."""

    name = "generate"

    async def process(self, turn: Turn) -> None:
        rt = turn.runtime
        state = turn.state
        values = dict(state.values)
        values["responseFormat"] = format_instructions(state.named_actions)
        # The persona and the rules in the system message; what people wrote (and memory brought
        # back), escaped and fenced, in the user message (see carrier.prompts).
        system, data = prompt_messages(
            template_for("messageHandlerTemplate", rt.character.templates),
            values,
            outro=(
                f"Reply to the last message of the conversation, from {values['senderName']}."
                if values.get("senderName")
                else ""
            ),
        )
        data.content = await self._content(turn, str(data.content))
        turn.prompt = [system, data]
        hook = await run_hooks(
            rt.registry.hooks_for(HookPoint.BEFORE_GENERATE), HookPoint.BEFORE_GENERATE, turn
        )
        if hook.action == "reject":
            turn.end(f"rejected by hook: {hook.reason}")
            return
        if hook.action == "modify" and hook.text is not None:
            turn.prompt = [system, ChatMessage(role="user", content=hook.text)]

        tools = offered_tools(turn)
        request = ModelRequest(
            messages=list(turn.prompt),
            purpose="response",
            query=turn.text,
            context=self._context(turn),
            tools=tools or None,
        )
        # With tools on offer the first answer may be a tool call, not text: don't stream it.
        stream = turn.on_chunk is not None and not tools
        result, parsed = await self.complete(turn, request, stream=stream)
        if turn.ended:  # the model gave no usable answer; the reason is recorded
            return
        turn.response = parsed
        turn.tool_calls = list(result.tool_calls)
        turn.offline = result.offline
        turn.trace["generate"] = {
            "model": result.model,
            "offline": result.offline,
            "raw": result.text,
            "thought": parsed.thought,
            "text": parsed.text,
            "actions": parsed.actions,
            "repaired": turn.trace.get("repaired", False),
            "streamed": stream,
            "cut": bool(turn.trace.get("cut")),
            "tool_calls": [
                {"name": c.get("name"), "arguments": c.get("arguments")} for c in result.tool_calls
            ],
        }
        if not parsed.ok:
            mark_failed(turn, f"the model's answer could not be understood: {parsed.problem}")

    async def complete(
        self, turn: Turn, request: ModelRequest, *, stream: bool
    ) -> tuple[ModelResult, ParsedResponse]:
        """One model call (streamed to the client if asked) and, if malformed, one repair retry.

        When the model gives no usable answer the turn ends failed (:func:`mark_failed`) and an
        empty, not-ok answer comes back."""
        try:
            return await self._complete(turn, request, stream=stream)
        except ProviderError as exc:
            reason = str(exc)
            log.info("%s: no answer from the model: %s", turn.runtime.character.name, reason)
            mark_failed(turn, reason, retry_after=getattr(exc, "retry_after", None))
            return (
                ModelResult(text="", model=str(getattr(turn.runtime.model, "model", "model"))),
                ParsedResponse(ok=False, problem=reason),
            )

    async def _complete(
        self, turn: Turn, request: ModelRequest, *, stream: bool
    ) -> tuple[ModelResult, ParsedResponse]:
        rt = turn.runtime
        if stream and turn.on_chunk is not None:
            result, cut = await self._stream(turn, request)
            if cut is not None:
                return result, cut
        else:
            result = await rt.model.generate(request)
        turn.usage.add(result.usage)
        turn.raw_response = result.text
        parsed = parse_response(result.text)
        if parsed.ok:
            return result, parsed
        if result.tool_calls:
            # A tool call with no text is a complete answer: the text comes after the tools ran.
            return result, ParsedResponse(thought=parsed.thought, text=parsed.text, actions=[])
        log.warning("model output malformed (%s); asking once for a repair", parsed.problem)
        turn.trace["repaired"] = True
        repair = request.model_copy(
            update={
                "messages": [
                    *request.messages,
                    ChatMessage(role="assistant", content=result.text),
                    ChatMessage(role="user", content=repair_prompt(parsed.problem)),
                ]
            }
        )
        result = await rt.model.generate(repair)
        turn.usage.add(result.usage)
        turn.raw_response = result.text
        return result, parse_response(result.text)

    @staticmethod
    async def _stream(
        turn: Turn, request: ModelRequest
    ) -> tuple[ModelResult, ParsedResponse | None]:
        """Stream the answer, its reply text to the client as it comes. Returns the result, and
        the answer already decided when the stream broke after reply text went out."""
        rt = turn.runtime
        assert turn.on_chunk is not None
        source: Callable[[], AsyncIterator[str]] = lambda: rt.model.stream(request)  # noqa: E731
        while True:
            extractor = TextStreamExtractor()
            pieces: list[str] = []
            try:
                async for piece in source():
                    pieces.append(piece)
                    out = extractor.feed(piece)
                    if out:
                        await turn.on_chunk(out)
            except StreamInterrupted as exc:
                if not extractor.text and exc.resume is not None:
                    # Only the model's private part was read: carry on with the provider's
                    # retries and fallbacks, as a JSON call would.
                    log.info("stream broke before the reply began (%s); carrying on", exc)
                    source = exc.resume
                    continue
                if not extractor.text:
                    raise
                # Part of the reply is out: a retry would say it again. End it there, marked.
                log.info("stream broke mid-reply (%s); the reply ends where it was cut", exc)
                marker = CUT_MARKER.lstrip() if extractor.text[-1:].isspace() else CUT_MARKER
                await turn.on_chunk(marker)
                text = extractor.text + marker  # what the client has now, stored as it is
                raw = "".join(pieces)
                turn.raw_response = raw
                turn.trace["streamed_text"] = text
                turn.trace["cut"] = str(exc)
                model = str(getattr(rt.model, "model", rt.model.name))
                partial = parse_response(raw)
                answer = ParsedResponse(thought=partial.thought, text=text, actions=["REPLY"])
                return ModelResult(text=raw, model=model), answer
            result = rt.model.last_result or ModelResult(text="".join(pieces), model=rt.model.name)
            turn.trace["streamed_text"] = extractor.text
            return result, None

    @staticmethod
    async def _content(turn: Turn, prompt: str) -> str | list[dict[str, Any]]:
        """The prompt, with the message's images as image parts when the model can see them (a
        model that cannot gets them described by name and size in the conversation)."""
        images = [
            a
            for a in turn.message.attachments
            if a.url and (a.content_type or "").startswith("image/")
        ]
        if not images or not await turn.runtime.model.supports_vision():
            return prompt
        turn.trace["images"] = [a.url for a in images]
        return [
            {"type": "text", "text": prompt},
            *({"type": "image_url", "image_url": {"url": a.url}} for a in images),
        ]

    def _context(self, turn: Turn) -> dict[str, object]:
        """What a model-less provider (offline) needs: the sender's name and what they said in
        earlier sessions, so even offline the agent shows it remembers."""
        rt = turn.runtime
        state = turn.state
        earlier = [s.memory for s in state.recalled] + list(state.recent)
        assert turn.entity is not None and turn.inbound is not None
        recalled = [
            {
                "text": m.content.text,
                "created_at": m.created_at.isoformat(),
                "speaker": m.content.metadata.get("speaker", ""),
            }
            for m in earlier
            if m.entity_id == turn.entity.id
            and m.kind is MemoryKind.MESSAGE
            and m.id != turn.inbound.id
            and m.created_at < rt.started_at
        ]
        return {
            "sender_name": turn.message.author.name,
            "recalled": recalled,
            "agent_name": rt.character.name,
        }
