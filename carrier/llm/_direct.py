"""The lean model call: an OpenAI-compatible chat completion sent straight over one pooled HTTP
session, for the models litellm itself would send as they are.

litellm spends 4 to 7 ms of the event loop's time on every call (its dispatch, logging and
pricing layers, the openai SDK, its HTTP transport) against ~0.3 ms for the request itself over
aiohttp; under load that was a third of the time the event loop held the GIL
(``bench/llm_call.py``, ``bench/throughput.py``). aiohttp, not httpx: with a hundred calls in
flight httpx's pool cost more per call than all of litellm.

For an ``openai/`` model that litellm maps with no translation of the parameters Carrier sends
(not the o-series, GPT-5 or audio models, whose parameters it renames or drops; nothing but chat
models) the request is the same either way, so it goes out here: same URL, key, body and
timeout, the answer read into a :class:`ModelResult` as litellm's would be, priced by litellm's
own table, and failures raised in the shapes the retry plan judges (:class:`HTTPFailure` with
the status and headers, :class:`TimeoutError`, :class:`ConnectionError`,
:class:`MalformedAnswer`). Everything else (other vendors, streams, litellm's own test hooks)
still goes through litellm.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from carrier.llm._litellm import litellm, tool_call
from carrier.llm.base import ModelResult
from carrier.llm.failures import MalformedAnswer
from carrier.types import Usage

__all__ = ["DirectOpenAI", "HTTPFailure", "is_plain_openai_model"]

OPENAI_BASE = "https://api.openai.com/v1"
_PREFIX = "openai/"
_plain: dict[str, bool] = {}
_unpriced: set[str] = set()


class HTTPFailure(Exception):
    """A non-2xx answer: ``status_code`` and the response's ``headers`` (``Retry-After``) for
    the retry plan; the message is the server's own error text, cut short."""

    def __init__(self, status_code: int, message: str, headers: Mapping[str, str]) -> None:
        # (aiohttp's headers: a case-insensitive multidict; kept as a plain dict of its items)
        super().__init__(f"{status_code}: {message}" if message else str(status_code))
        self.status_code = status_code
        self.litellm_response_headers = dict(headers)


def is_plain_openai_model(model: str) -> bool:
    """Whether litellm sends ``model`` (``openai/<name>``) with the parameters as given: a chat
    model outside the o-series, GPT-5 and audio families (a name litellm does not know, such as
    a local server's, is sent as it is too). Asked of litellm once per model."""
    if not model.startswith(_PREFIX):
        return False
    known = _plain.get(model)
    if known is None:
        known = _plain[model] = _ask_litellm(model[len(_PREFIX) :])
    return known


def _ask_litellm(name: str) -> bool:
    lm = litellm()
    try:
        renamed = (
            lm.openaiOSeriesConfig.is_model_o_series_model(model=name)
            or lm.OpenAIGPT5Config.is_model_gpt_5_model(model=name)
            or lm.openAIGPTAudioConfig.is_model_gpt_audio_model(model=name)
        )
        info = lm.model_cost.get(name) or lm.model_cost.get(_PREFIX + name) or {}
    except Exception:  # a litellm without these: let litellm send everything
        return False
    if renamed or info.get("supports_reasoning"):
        return False
    return info.get("mode") in (None, "chat")


class DirectOpenAI:
    """Chat completions against ``base_url`` with ``api_key``, over one HTTP session per event
    loop (its connections kept alive between calls)."""

    def __init__(self, base_url: str, api_key: str, environ: Mapping[str, str]) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        for env, header in (
            ("OPENAI_ORGANIZATION", "OpenAI-Organization"),
            ("OPENAI_PROJECT", "OpenAI-Project"),
        ):
            if environ.get(env):
                self.headers[header] = environ[env]
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            for old in [old for old in self._sessions if old.is_closed()]:
                del self._sessions[old]
            session = self._sessions[loop] = aiohttp.ClientSession(
                headers=self.headers,
                # No cap beyond the plan's own (CARRIER_MODEL_CONCURRENCY); proxies from the
                # environment as the openai SDK takes them.
                connector=aiohttp.TCPConnector(limit=0),
                trust_env=True,
            )
        return session

    async def aclose(self) -> None:
        """Close this event loop's session (the others went with their loops)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    async def complete(self, model: str, kwargs: Mapping[str, Any]) -> ModelResult:
        """One attempt: ``kwargs`` as for ``litellm.acompletion`` (model, messages, timeout and
        the optional parameters), ``model`` the ``openai/`` name it is priced under."""
        body = {key: value for key, value in kwargs.items() if key not in _NOT_SENT}
        body["model"] = model[len(_PREFIX) :]
        seconds = float(kwargs["timeout"])
        try:
            async with self._session().post(
                self.url, data=json.dumps(body), timeout=aiohttp.ClientTimeout(total=seconds)
            ) as response:
                raw = await response.read()
                status, headers = response.status, response.headers
        except TimeoutError as exc:
            raise TimeoutError(f"no answer within {seconds:g} s") from exc
        except aiohttp.ClientError as exc:
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
        if not 200 <= status < 300:
            raise HTTPFailure(status, _error_text(raw), headers)
        try:
            data = json.loads(raw)
        except ValueError:
            raise MalformedAnswer("not JSON") from None
        return result_from_json(model, data)


_NOT_SENT = frozenset(
    {"model", "timeout", "num_retries", "api_base", "api_key", "_skip_mcp_handler"}
)


def _error_text(raw: bytes) -> str:
    try:
        error = json.loads(raw).get("error")
        text = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        text = raw.decode("utf-8", "replace")
    return str(text or "")[:300]


def result_from_json(model: str, data: Any) -> ModelResult:
    """A :class:`ModelResult` from a chat completion's JSON, judged as
    :func:`carrier.llm._litellm.result_from_response` judges litellm's."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices, list):
        raise MalformedAnswer("no choices")
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = first.get("message")
    if not isinstance(message, dict):
        raise MalformedAnswer("no message")
    text = _text(message.get("content"))
    calls = [
        tool_call(tc.get("id"), (tc.get("function") or {}).get("name"), _arguments(tc))
        for tc in message.get("tool_calls") or []
        if isinstance(tc, dict)
    ]
    if not text.strip() and not calls and first.get("finish_reason") != "length":
        raise MalformedAnswer("no content")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return ModelResult(
        text=text,
        model=model,
        usage=Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=price(model, prompt, completion),
            calls=1,
        ),
        tool_calls=calls,
    )


def _text(content: Any) -> str:
    """The answer's text: a string, or the text parts of a list of content parts (as some
    OpenAI-compatible servers send it)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    raise MalformedAnswer("content is not text")


def _arguments(tc: dict[str, Any]) -> Any:
    return (tc.get("function") or {}).get("arguments")


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """US dollars by litellm's price table; 0 for a model it has no price for."""
    if model in _unpriced:
        return 0.0
    try:
        prompt_cost, completion_cost = litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # not in the table
        _unpriced.add(model)
        return 0.0
    return float(prompt_cost + completion_cost)
