"""litellm plumbing kept out of the provider: the lazy import, error classification, and turning
litellm responses and stream chunks into :class:`ModelResult`.

Nothing here imports litellm at import time; :func:`load_litellm` does, once, in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

from carrier.llm._plan import Verdict
from carrier.llm.base import ModelResult
from carrier.llm.failures import MalformedAnswer, StreamCut
from carrier.types import Usage

T = TypeVar("T")

_module: Any = None
_lock = threading.Lock()
_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def _import() -> Any:
    global _module
    with _lock:
        if _module is None:
            # Without this, importing litellm fetches its model price map over the network.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stdout
            litellm.turn_off_message_logging = True  # callbacks never see message contents
            litellm.telemetry = False
            if not os.environ.get("LITELLM_LOG"):  # respect an explicit choice of verbosity
                for name in _LOGGERS:
                    logging.getLogger(name).setLevel(logging.WARNING)
            _module = litellm
        return _module


async def load_litellm() -> Any:
    """Import and configure litellm once, off the event loop (the import takes ~3 s).

    Providers call it on their first request; call it at start-up to warm up.
    """
    return _module if _module is not None else await asyncio.to_thread(_import)


def load_litellm_now() -> Any:
    """Import and configure litellm on this thread if it is not loaded yet (seconds): for code
    that cannot await :func:`load_litellm` and must have it."""
    return _module if _module is not None else _import()


def litellm() -> Any:
    """The loaded litellm module (after :func:`load_litellm`)."""
    if _module is None:
        raise RuntimeError("litellm is not loaded yet; await load_litellm() first")
    return _module


_abandoned: set[asyncio.Task[Any]] = set()


async def within(call: Awaitable[T], seconds: float) -> T:
    """Await a litellm call for at most ``seconds`` without cancelling it.

    Cancelled half-way, ``acompletion`` leaves behind a coroutine it made in a worker thread and
    never awaits (Python then warns about it). So on timeout the call goes on in the background,
    where litellm's own timeout (the same ``seconds``, passed in its arguments) ends it soon
    after, and its outcome is dropped: an error read, a stream closed. A caller that is itself
    cancelled cancels the call."""
    task = asyncio.ensure_future(call)
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.shield(task)
    except TimeoutError:
        _abandoned.add(task)
        task.add_done_callback(_drop)
        raise
    except asyncio.CancelledError:
        task.cancel()
        raise


def _drop(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if task.cancelled() or task.exception() is not None:
        return  # the error is read: nothing was waiting for it
    close = getattr(task.result(), "aclose", None)
    if close is not None:  # a stream that opened too late: hand its connection back
        closing = asyncio.ensure_future(_quietly(close()))
        _abandoned.add(closing)
        closing.add_done_callback(_abandoned.discard)


async def _quietly(closing: Awaitable[Any]) -> None:
    with contextlib.suppress(Exception):
        await closing


_MISSING_KEY = ("Missing credentials", "api_key client option must be set")


def is_missing_key(exc: BaseException) -> bool:
    """The openai SDK's "no key" error, which litellm reports as an InternalServerError."""
    return any(marker in str(exc) for marker in _MISSING_KEY)


def is_auth_error(exc: BaseException) -> bool:
    lm = _module
    return (
        (lm is not None and isinstance(exc, lm.AuthenticationError))
        or is_missing_key(exc)
        or getattr(exc, "status_code", None) == 401  # the lean path's HTTPFailure
    )


_PERMANENT = (
    "AuthenticationError",
    "PermissionDeniedError",
    "BadRequestError",
    "NotFoundError",
    "UnprocessableEntityError",
)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: anything but a bad key, a refused permission or a bad request.

    Rate limits, timeouts, connection failures, 5xx, malformed answers and broken streams are
    retried; so is an error of a kind no one foresaw (the deadline bounds what a useless retry
    costs, and a persona that answers on the second try is worth it)."""
    if is_missing_key(exc):
        return False
    lm = _module
    if lm is not None and isinstance(exc, tuple(getattr(lm, name) for name in _PERMANENT)):
        return False
    status = getattr(exc, "status_code", None)
    bad_request = isinstance(status, int) and 400 <= status < 500
    return not bad_request or status in (408, 409, 429)


_JSON_TROUBLE = ("Expecting value", "Unterminated string", "Expecting ',' delimiter", "Extra data")


def failure_label(exc: BaseException) -> str:
    """A few words on what went wrong, for the reason a failed message keeps: ``timeout``,
    ``500``, ``429 rate limited``, ``stream cut``, ``malformed answer: no choices``. Never an
    exception's name (the whole error is in the log)."""
    if isinstance(exc, MalformedAnswer):
        return f"malformed answer: {exc}"
    text = str(exc)
    lm = _module
    name = type(exc).__name__
    if isinstance(exc, TimeoutError) or (lm is not None and isinstance(exc, lm.Timeout)):
        return "timeout"
    if any(marker in text for marker in _JSON_TROUBLE):
        return "malformed answer: not JSON"
    if name == "MidStreamFallbackError":
        return "stream cut" if "ended before" in text else "stream broken"
    if isinstance(exc, StreamCut):
        return "stream cut"
    if is_auth_error(exc):
        return "authentication failed"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return {429: "429 rate limited", 404: "404 unknown model", 400: "400 bad request"}.get(
            status, str(status)
        )
    if isinstance(exc, ConnectionError) or (
        lm is not None and isinstance(exc, lm.APIConnectionError)
    ):
        return "connection failed"
    return "unexpected error"


def retry_after(exc: BaseException) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms`` or ``Retry-After`` in seconds), if
    its answer said; None for an HTTP date or no header."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    except (TypeError, ValueError):
        return None
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(key)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def judge(exc: BaseException) -> Verdict:
    """What a failed attempt means to the retry plan."""
    return Verdict(
        transient=is_transient(exc), label=failure_label(exc), retry_after=retry_after(exc)
    )


def tool_call(call_id: str | None, name: str | None, arguments: Any) -> dict[str, Any]:
    """``{"id", "name", "arguments": dict}`` from an OpenAI tool call (arguments as JSON text)."""
    if isinstance(arguments, dict):
        args = arguments
    else:
        try:
            parsed = json.loads(arguments or "{}")
            args = parsed if isinstance(parsed, dict) else {"value": parsed}
        except (TypeError, ValueError):
            args = {"_raw": arguments}
    return {"id": call_id, "name": name, "arguments": args}


def result_from_response(model: str, response: Any) -> ModelResult:
    """A :class:`ModelResult` from a litellm ``ModelResponse``; unpriced models cost 0.

    Raises :class:`MalformedAnswer` for an answer with no choices, or with neither text nor tool
    calls: a server having a bad moment, retried like one."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise MalformedAnswer("no choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedAnswer("no message")
    text = getattr(message, "content", None) or ""
    calls = [
        tool_call(tc.id, tc.function.name, tc.function.arguments)
        for tc in (getattr(message, "tool_calls", None) or [])
    ]
    if not text.strip() and not calls and getattr(choices[0], "finish_reason", None) != "length":
        raise MalformedAnswer("no content")  # (cut by max_tokens is the caller's choice)
    usage = getattr(response, "usage", None)
    return ModelResult(
        text=text,
        model=model,
        usage=Usage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=response_cost(response),
            calls=1,
        ),
        tool_calls=calls,
    )


def response_cost(response: Any) -> float:
    """What a completion cost in US dollars; 0 for a model litellm has no price for.

    litellm prices every response it returns (``_hidden_params["response_cost"]``, None when it
    has no price): that figure is used, as pricing again costs milliseconds of the event loop's
    time per call (the model map's lookups). Only a response without it is priced here."""
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        stamped = hidden["response_cost"]
        return float(stamped) if isinstance(stamped, int | float) else 0.0
    try:
        return float(litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # litellm raises for models it has no price for
        return 0.0


class StreamAccumulator:
    """Collects stream chunks: text, tool-call fragments (by index) and the final usage chunk."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.parts: list[str] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._tools: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk; return its text delta (``""`` if none)."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            self.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return ""
        self.finish_reason = getattr(choices[0], "finish_reason", None) or self.finish_reason
        delta = getattr(choices[0], "delta", None)
        if delta is None:
            return ""
        for tc in getattr(delta, "tool_calls", None) or []:
            slot = self._tools.setdefault(
                getattr(tc, "index", 0) or 0, {"id": None, "name": None, "arguments": ""}
            )
            slot["id"] = slot["id"] or getattr(tc, "id", None)
            fn = getattr(tc, "function", None)
            if fn is not None:
                slot["name"] = slot["name"] or getattr(fn, "name", None)
                slot["arguments"] += getattr(fn, "arguments", None) or ""
        text = getattr(delta, "content", None) or ""
        if text:
            self.parts.append(text)
        return str(text)

    @property
    def started(self) -> bool:
        """Whether the stream has said anything: text, or the start of a tool call."""
        return bool(self.parts or self._tools)

    def result(self) -> ModelResult:
        """The whole answer; :class:`MalformedAnswer` if the stream ended with nothing in it."""
        if not self.started and self.finish_reason != "length":
            raise MalformedAnswer("a stream with no content")
        from carrier.llm._direct import price  # (it imports this module)

        cost = price(self.model, self.prompt_tokens, self.completion_tokens)
        return ModelResult(
            text="".join(self.parts),
            model=self.model,
            usage=Usage(
                prompt_tokens=self.prompt_tokens,
                completion_tokens=self.completion_tokens,
                cost_usd=cost,
                calls=1,
            ),
            tool_calls=[
                tool_call(t["id"], t["name"], t["arguments"])
                for _, t in sorted(self._tools.items())
            ],
        )
