"""The litellm-backed provider: one model string per character, fallbacks, retries with backoff,
timeouts, a circuit breaker and an optional in-memory response cache.

litellm is imported on the first call (in a worker thread; it takes ~3 s), never at import time,
with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it does not fetch its price map over the network.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from carrier.errors import ProviderError
from carrier.llm._cache import ResponseCache
from carrier.llm._litellm import (
    StreamAccumulator,
    is_auth_error,
    is_transient,
    litellm,
    load_litellm,
    result_from_response,
)
from carrier.llm.base import ModelProvider, ModelRequest, ModelResult
from carrier.llm.models import credential_env_vars, vendor_of
from carrier.llm.resilience import Backoff, CircuitBreaker, retry_async
from carrier.safety.redact import current_redactor

__all__ = ["LiteLLMProvider", "load_litellm"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_NO_KEY_PLACEHOLDER = "sk-no-key-required"


class LiteLLMProvider(ModelProvider):
    """Calls any model litellm supports (``openai/gpt-4o-mini``, ``anthropic/...``,
    ``ollama/llama3.1``, or an OpenAI-compatible server as ``openai/<name>`` + ``api_base``).

    Each model in ``[model, *fallbacks]`` is tried in turn, each with ``attempts`` tries and
    ``backoff`` between them on transient errors (rate limit, timeout, connection, 5xx; never on
    auth or bad-request errors). The breaker wraps the whole chain. ``api_base`` and ``api_key``
    apply to every model of the same vendor as ``model``. ``extra`` goes to
    ``litellm.acompletion`` as is (e.g. ``{"mock_response": "hi"}`` in tests). ``environ`` is only
    read to see whether an ``openai/`` model at a local base URL needs a placeholder key.
    """

    name = "litellm"

    def __init__(
        self,
        model: str,
        *,
        fallbacks: Sequence[str] = (),
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60,
        attempts: int = 3,
        backoff: Backoff | None = None,
        breaker: CircuitBreaker | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_size: int = 0,
        extra: dict[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.model = model
        self.fallbacks = list(fallbacks)
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff or Backoff(base=0.5, cap=8.0)
        self.breaker = breaker or CircuitBreaker(name=f"model {model}")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra = dict(extra or {})
        self.cache = ResponseCache(cache_size)
        self._environ = os.environ if environ is None else environ
        self.last_result: ModelResult | None = None
        self._vision: bool | None = None

    def __repr__(self) -> str:
        return f"LiteLLMProvider(model={self.model!r}, fallbacks={self.fallbacks!r})"

    async def supports_vision(self) -> bool:
        """What litellm's model map says of the primary model (unknown models: no)."""
        if self._vision is None:
            litellm = await load_litellm()
            try:
                self._vision = bool(litellm.supports_vision(model=self.model))
            except Exception:  # unknown to the bundled model map
                self._vision = False
        return self._vision

    async def generate(self, request: ModelRequest) -> ModelResult:
        key = self._cache_key(request)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        await load_litellm()
        result = await self.breaker.call(lambda: self._with_fallbacks(request, self._complete))
        self.cache.put(key, result)
        return result

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Yield content deltas; ``last_result`` holds the full text and usage at the end.

        Failures before the first chunk are retried (and fall back) like :meth:`generate`; once
        text has been yielded a failure raises ``ProviderError`` (the caller has used the text).
        """
        self.last_result = None
        key = self._cache_key(request)
        hit = self.cache.get(key)
        if hit is not None:
            self.last_result = hit
            yield hit.text
            return
        await load_litellm()
        self.breaker.before_call()
        verdict = False
        model = self.model
        try:
            model, chunks, first = await self._with_fallbacks(request, self._open_stream)
            acc = StreamAccumulator(model)
            if first is not None and (delta := acc.add(first)):
                yield delta
            async for chunk in chunks:
                if delta := acc.add(chunk):
                    yield delta
            result = acc.result()
        except ProviderError:
            self.breaker.record_failure()
            verdict = True
            raise
        except Exception as exc:
            self.breaker.record_failure()
            verdict = True
            raise ProviderError(
                f"model {model} failed while streaming: {self._describe(exc)}"
            ) from exc
        else:
            self.breaker.record_success()
            verdict = True
        finally:
            if not verdict:  # the consumer stopped early or was cancelled: no verdict
                self.breaker.release()
        self.last_result = result
        self.cache.put(key, result)

    # -- one call -------------------------------------------------------------------------------

    def _kwargs(self, model: str, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [m.model_dump(exclude_none=True) for m in request.messages],
            "timeout": self.timeout,
            "num_retries": 0,  # our retries only, not litellm's nor the openai SDK's
        }
        temperature = self._temperature(request)
        if temperature is not None:
            kwargs["temperature"] = temperature
        max_tokens = request.max_tokens if request.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if request.stop:
            kwargs["stop"] = request.stop
        if request.tools:
            kwargs["tools"] = request.tools
            if not any(tool.get("type") == "mcp" for tool in request.tools):
                # litellm 1.10x imports its MCP gateway (and the optional `mcp` package) for any
                # call with tools; ours are plain function tools, so skip that path.
                kwargs["_skip_mcp_handler"] = True
        if vendor_of(model) == vendor_of(self.model):
            if self.api_base:
                kwargs["api_base"] = self.api_base
            if self._api_key:
                kwargs["api_key"] = self._api_key
        if "api_key" not in kwargs and self._keyless_local_openai(model):
            # Local OpenAI-compatible servers need no key, but the openai SDK insists on one.
            kwargs["api_key"] = _NO_KEY_PLACEHOLDER
        kwargs.update(self.extra)
        return kwargs

    def _temperature(self, request: ModelRequest) -> float | None:
        return request.temperature if request.temperature is not None else self.temperature

    def _keyless_local_openai(self, model: str) -> bool:
        if vendor_of(model) != "openai" or self._environ.get("OPENAI_API_KEY"):
            return False
        own_base = bool(self.api_base) and vendor_of(self.model) == "openai"
        env_base = self._environ.get("OPENAI_API_BASE") or self._environ.get("OPENAI_BASE_URL")
        return own_base or bool(env_base)

    async def _complete(self, model: str, request: ModelRequest) -> ModelResult:
        response = await litellm().acompletion(**self._kwargs(model, request))
        return result_from_response(model, response)

    async def _open_stream(
        self, model: str, request: ModelRequest
    ) -> tuple[str, AsyncIterator[Any], Any]:
        """Start a stream and read its first chunk, so failures up to there can be retried."""
        kwargs = self._kwargs(model, request)
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        response = await litellm().acompletion(**kwargs)
        chunks = response.__aiter__()
        try:
            first = await chunks.__anext__()
        except StopAsyncIteration:
            first = None
        return model, chunks, first

    # -- retries and fallbacks ------------------------------------------------------------------

    def _models_for(self, request: ModelRequest) -> list[str]:
        return list(dict.fromkeys([request.model or self.model, *self.fallbacks]))

    async def _with_fallbacks(
        self, request: ModelRequest, once: Callable[[str, ModelRequest], Awaitable[T]]
    ) -> T:
        models = self._models_for(request)
        failures: list[tuple[str, int, Exception]] = []
        for i, model in enumerate(models):
            tries = 0

            async def attempt(model: str = model) -> T:
                nonlocal tries
                tries += 1
                return await once(model, request)

            try:
                return await retry_async(
                    attempt,
                    attempts=self.attempts,
                    backoff=self.backoff,
                    retry_on=(),
                    retry_if=is_transient,
                )
            except Exception as exc:
                failures.append((model, tries, exc))
                if i + 1 < len(models):
                    log.warning(
                        "model %s failed (%s); falling back to %s",
                        model,
                        self._describe(exc),
                        models[i + 1],
                    )
        summary = "; ".join(
            f"{m} ({n} attempt{'s' if n != 1 else ''}): {self._describe(e)}" for m, n, e in failures
        )
        hint = next(
            (
                f". Check {' or '.join(credential_env_vars(m)) or 'the API key'}"
                f" (or the api_key given) for {m}"
                for m, _, e in failures
                if is_auth_error(e)
            ),
            "",
        )
        raise ProviderError(f"model call failed: {summary}{hint}") from failures[-1][2]

    def _describe(self, exc: BaseException) -> str:
        """The error for messages and logs: the api key masked, then every secret the redactor
        knows or recognises replaced (vendors quote the key they were sent), then cut."""
        text = f"{type(exc).__name__}: {exc}".strip()
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return current_redactor().clean(text, where="error")[:500]

    def _cache_key(self, request: ModelRequest) -> str | None:
        return self.cache.key(self._models_for(request), request, self._temperature(request))
