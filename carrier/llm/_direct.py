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
:class:`MalformedAnswer`). Streams too: the server-sent events are read as they arrive, into
chunks the same accumulator reads as litellm's (:class:`DirectStream`). Everything else (other
vendors, litellm's own test hooks) still goes through litellm.

Neither the choice of path nor the price needs litellm imported (seconds of CPU): both are read
off litellm's table and name rules by :mod:`carrier.llm._model_table`, which reproduces its
tests and falls back to litellm itself only for a price the table does not give plainly
(tiered ones), importing it then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp

from carrier.llm._litellm import load_litellm_now, tool_call
from carrier.llm._model_table import model_table, openai_rates
from carrier.llm.base import ModelResult
from carrier.llm.failures import MalformedAnswer, StreamCut
from carrier.types import Usage

__all__ = [
    "DirectOpenAI",
    "HTTPFailure",
    "is_plain_openai_model",
    "price",
    "prices_without_litellm",
]

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
    a local server's, is sent as it is too). Decided once per model from litellm's own table and
    name rules, without importing litellm (:mod:`carrier.llm._model_table`)."""
    if not model.startswith(_PREFIX):
        return False
    known = _plain.get(model)
    if known is None:
        known = _plain[model] = _plain_by_table(model[len(_PREFIX) :])
    return known


_REASONING_SERIES = ("gpt-5", "gpt-6")
"""litellm's ``GPT_REASONING_SERIES_MARKERS`` (``llms/openai/chat/gpt_reasoning_transformation``;
a test keeps the two equal)."""


def _plain_by_table(name: str) -> bool:
    """litellm's own tests, on its table: ``is_model_o_series_model``, ``is_model_gpt_5_model``
    and ``is_model_gpt_audio_model`` of its openai chat config, then the entry's ``mode`` and
    ``supports_reasoning``. Stricter than litellm where its name rules (the table's
    ``fallback_generalizations``) call a name a reasoning model, or not a chat model. No table:
    never plain (litellm sends everything)."""
    table = model_table()
    if table is None:
        return False
    chat_models = table.openai_chat
    last = name.split("/")[-1]
    o_series = len(last) > 1 and last[0] == "o" and last[1].isdigit() and last in chat_models
    gpt_5 = any(marker in name for marker in _REASONING_SERIES) and "gpt-5-chat" not in last
    audio = name in chat_models and "audio" in name
    info = table.entries.get(name) or table.entries.get(_PREFIX + name) or {}
    if o_series or gpt_5 or audio or info.get("supports_reasoning"):
        return False
    for ruled in (*table.rules_for(name), *table.rules_for(_PREFIX + name)):
        if ruled.get("supports_reasoning") or ruled.get("mode") not in (None, "chat"):
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
        seconds = float(kwargs["timeout"])
        with _call_failures(seconds):
            async with self._session().post(
                self.url,
                data=_body(model, kwargs),
                timeout=aiohttp.ClientTimeout(total=seconds),
            ) as response:
                raw = await response.read()
                status, headers = response.status, response.headers
        if not 200 <= status < 300:
            raise HTTPFailure(status, _error_text(raw), headers)
        try:
            data = json.loads(raw)
        except ValueError:
            raise MalformedAnswer("not JSON") from None
        return result_from_json(model, data)

    async def open_stream(self, model: str, kwargs: Mapping[str, Any]) -> DirectStream:
        """Start a streamed answer (``kwargs`` with ``stream`` and ``stream_options`` set, as
        for litellm): once the server has answered 2xx, the stream of its chunks; a failure
        before that raises as :meth:`complete` does. ``timeout`` bounds the connection and the
        answer's headers; the caller bounds each chunk."""
        seconds = float(kwargs["timeout"])
        with _call_failures(seconds):
            response = await self._session().post(
                self.url,
                data=_body(model, kwargs),
                timeout=aiohttp.ClientTimeout(total=None, connect=seconds, sock_connect=seconds),
            )
        if not 200 <= response.status < 300:
            try:
                raw = await response.read()
            except (aiohttp.ClientError, TimeoutError):
                raw = b""
            finally:
                response.release()
            raise HTTPFailure(response.status, _error_text(raw), response.headers)
        return DirectStream(response)


def _body(model: str, kwargs: Mapping[str, Any]) -> str:
    """The request's JSON: ``kwargs`` but what litellm keeps for itself, the model's bare name."""
    body = {key: value for key, value in kwargs.items() if key not in _NOT_SENT}
    body["model"] = model[len(_PREFIX) :]
    return json.dumps(body)


@contextlib.contextmanager
def _call_failures(seconds: float) -> Iterator[None]:
    """aiohttp's failures as the retry plan judges them: a timeout, a connection failure."""
    try:
        yield
    except TimeoutError as exc:
        raise TimeoutError(f"no answer within {seconds:g} s") from exc
    except aiohttp.ClientError as exc:
        raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc


class DirectStream:
    """A streamed chat completion's chunks, read from its server-sent events as they arrive:
    each ``data:`` line's JSON, with attribute access as litellm's chunk objects have
    (:class:`carrier.llm._litellm.StreamAccumulator` reads either), until ``data: [DONE]`` or
    the end of the body. An ``error`` event raises :class:`HTTPFailure`; a line that is not
    JSON, :class:`MalformedAnswer`; a connection lost mid-way, :class:`ConnectionError`; an end
    before any choice said it was finished, :class:`StreamCut`."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._done = False
        self._finished = False
        """Whether a choice carried a finish reason: a stream that ends without one was cut."""

    def __aiter__(self) -> DirectStream:
        return self

    async def __anext__(self) -> Any:
        while not self._done:
            try:
                line = await self._response.content.readline()
            except aiohttp.ClientError as exc:
                raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
            if not line:  # the body ended (without [DONE]: some servers just close)
                break
            text = line.decode("utf-8", "replace").strip()
            if not text.startswith("data:"):
                continue  # blank lines between events, comments (":"), "event:" fields
            data = text[len("data:") :].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise MalformedAnswer("not JSON") from None
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else error
                code = error.get("code") if isinstance(error, dict) else None
                status = code if isinstance(code, int) and 400 <= code < 600 else 500
                raise HTTPFailure(status, str(message or "")[:300], {})
            if not isinstance(chunk, dict):
                raise MalformedAnswer("a stream chunk that is not an object")
            choices = chunk.get("choices")
            if isinstance(choices, list) and any(
                isinstance(c, dict) and c.get("finish_reason") for c in choices
            ):
                self._finished = True
            return _Chunk(chunk)
        self._done = True
        self._response.release()
        if not self._finished:
            raise StreamCut("the stream ended before its answer was finished")
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Hand the connection back (closed, if the body was not read to its end)."""
        if not self._done:
            self._done = True
            self._response.close()


class _Chunk:
    """A JSON object's fields as attributes (missing ones: None), nested objects alike."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        return _attributes(self._fields.get(name))


def _attributes(value: Any) -> Any:
    if isinstance(value, dict):
        return _Chunk(value)
    if isinstance(value, list):
        return [_attributes(item) for item in value]
    return value


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
    """US dollars by litellm's price table; 0 for a model it has no price for. Read off the
    table where it is plain (:func:`prices_without_litellm`), else asked of litellm (imported
    here if it is not yet: a caller on the event loop imports it first)."""
    rates = openai_rates(model) if model.startswith(_PREFIX) else None
    if rates is not None:
        return prompt_tokens * rates[0] + completion_tokens * rates[1]
    if model in _unpriced:
        return 0.0
    litellm = load_litellm_now()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # not in the table
        _unpriced.add(model)
        return 0.0
    return float(prompt_cost + completion_cost)


def prices_without_litellm(model: str) -> bool:
    """Whether :func:`price` prices ``model`` from the table alone (litellm not needed)."""
    return model.startswith(_PREFIX) and openai_rates(model) is not None
