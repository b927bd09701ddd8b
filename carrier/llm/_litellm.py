"""litellm plumbing kept out of the provider: the lazy import, error classification, and turning
litellm responses and stream chunks into :class:`ModelResult`.

Nothing here imports litellm at import time; :func:`load_litellm` does, once, in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from typing import Any

from carrier.llm.base import ModelResult
from carrier.types import Usage

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


def litellm() -> Any:
    """The loaded litellm module (after :func:`load_litellm`)."""
    if _module is None:
        raise RuntimeError("litellm is not loaded yet; await load_litellm() first")
    return _module


_MISSING_KEY = ("Missing credentials", "api_key client option must be set")


def is_missing_key(exc: BaseException) -> bool:
    """The openai SDK's "no key" error, which litellm reports as an InternalServerError."""
    return any(marker in str(exc) for marker in _MISSING_KEY)


def is_auth_error(exc: BaseException) -> bool:
    lm = _module
    return (lm is not None and isinstance(exc, lm.AuthenticationError)) or is_missing_key(exc)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, timeouts, connection failures and 5xx; not auth or bad input."""
    if is_missing_key(exc):
        return False
    lm = _module
    if lm is not None:
        permanent = (
            lm.AuthenticationError,
            lm.PermissionDeniedError,
            lm.BadRequestError,
            lm.NotFoundError,
            lm.UnprocessableEntityError,
        )
        if isinstance(exc, permanent):
            return False
        transient = (
            lm.RateLimitError,
            lm.Timeout,
            lm.APIConnectionError,
            lm.InternalServerError,
            lm.ServiceUnavailableError,
            lm.BadGatewayError,
        )
        if isinstance(exc, transient):
            return True
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status in (408, 429))


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
    """A :class:`ModelResult` from a litellm ``ModelResponse``; unpriced models cost 0."""
    message = response.choices[0].message
    usage = getattr(response, "usage", None)
    try:
        cost = float(litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # litellm raises for models it has no price for
        cost = 0.0
    return ModelResult(
        text=message.content or "",
        model=model,
        usage=Usage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
            calls=1,
        ),
        tool_calls=[
            tool_call(tc.id, tc.function.name, tc.function.arguments)
            for tc in (getattr(message, "tool_calls", None) or [])
        ],
    )


class StreamAccumulator:
    """Collects stream chunks: text, tool-call fragments (by index) and the final usage chunk."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.parts: list[str] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._tools: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Any) -> str:
        """Take one chunk; return its text delta (``""`` if none)."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            self.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return ""
        delta = choices[0].delta
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

    def result(self) -> ModelResult:
        try:
            prompt_cost, completion_cost = litellm().cost_per_token(
                model=self.model,
                prompt_tokens=self.prompt_tokens,
                completion_tokens=self.completion_tokens,
            )
            cost = float(prompt_cost + completion_cost)
        except Exception:  # unpriced model
            cost = 0.0
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
