"""The litellm-backed provider: one model string per character, fallbacks, retries with backoff,
a per-attempt timeout and a deadline for the whole call, a circuit breaker and an optional
in-memory response cache.

litellm is imported when a call first needs it (in a worker thread; it takes ~3 s), never at
import time, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it does not fetch its price map over
the network. Calls over the lean path (:mod:`carrier.llm._direct`) need no litellm at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from carrier.errors import ProviderUnavailable
from carrier.llm._cache import ResponseCache
from carrier.llm._direct import (
    OPENAI_BASE,
    DirectOpenAI,
    is_plain_openai_model,
    prices_without_litellm,
)
from carrier.llm._litellm import (
    StreamAccumulator,
    is_auth_error,
    judge,
    litellm,
    load_litellm,
    result_from_response,
    within,
)
from carrier.llm._model_table import model_table, openai_vision
from carrier.llm._plan import AttemptPlan, Slot
from carrier.llm.base import ChatMessage, ModelProvider, ModelRequest, ModelResult
from carrier.llm.deadline import Deadline, current_deadline
from carrier.llm.failures import CircuitOpen, StreamInterrupted
from carrier.llm.models import credential_env_vars, vendor_of
from carrier.llm.resilience import Backoff, CircuitBreaker
from carrier.safety.redact import current_redactor

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_TIMEOUT", "LiteLLMProvider", "load_litellm"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 20.0
"""Seconds one attempt may take (``CARRIER_MODEL_TIMEOUT``)."""
DEFAULT_DEADLINE = 45.0
"""Seconds a whole call may take, retries and fallbacks included (``CARRIER_TURN_DEADLINE``);
inside a turn, the turn's deadline (:mod:`carrier.llm.deadline`) when it is earlier."""

_NO_KEY_PLACEHOLDER = "sk-no-key-required"


class LiteLLMProvider(ModelProvider):
    """Calls any model litellm supports (``openai/gpt-4o-mini``, ``anthropic/...``,
    ``ollama/llama3.1``, or an OpenAI-compatible server as ``openai/<name>`` + ``api_base``).

    Each model in ``[model, *fallbacks]`` is tried in turn, each with ``attempts`` tries of at
    most ``timeout`` seconds and ``backoff`` between them on transient errors (rate limit,
    timeout, connection, 5xx, a malformed answer, a broken stream; never on auth or bad-request
    errors), the whole call within ``deadline`` seconds (see :mod:`carrier.llm._plan` for how
    the time is shared). The breaker wraps the whole chain. ``api_base`` and ``api_key``
    apply to every model of the same vendor as ``model``. ``extra`` goes to
    ``litellm.acompletion`` as is (e.g. ``{"mock_response": "hi"}`` in tests). ``environ`` is only
    read to see whether an ``openai/`` model at a local base URL needs a placeholder key, and
    where an ``openai/`` model with no ``api_base`` is served (``OPENAI_BASE_URL``).

    ``direct`` (the default): a call litellm would send unchanged (an ``openai/`` chat model
    it does not rename parameters for, no ``extra``, not a stream) goes out over the lean path
    of :mod:`carrier.llm._direct`, at a tenth of litellm's CPU per call.
    """

    name = "litellm"

    def __init__(
        self,
        model: str,
        *,
        fallbacks: Sequence[str] = (),
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        deadline: float | None = DEFAULT_DEADLINE,
        attempts: int = 3,
        backoff: Backoff | None = None,
        breaker: CircuitBreaker | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_size: int = 0,
        extra: dict[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        direct: bool = True,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        if timeout <= 0 or (deadline is not None and deadline <= 0):
            raise ValueError("timeout and deadline must be > 0")
        self.model = model
        self.fallbacks = list(fallbacks)
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = timeout
        self.deadline = deadline
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
        self._warmed = False
        self.direct = direct
        self._direct: dict[tuple[str, str], DirectOpenAI] = {}

    def __repr__(self) -> str:
        return f"LiteLLMProvider(model={self.model!r}, fallbacks={self.fallbacks!r})"

    async def prepare(self) -> None:
        """Get what the first call needs ready now rather than in the first turn.

        When every model of the chain goes over the lean path and is priced from litellm's
        table (a plain ``openai/`` chat model with a key, no ``extra``), that is the table
        (read in a worker thread, ~30 ms): such a chain answers, streams and says whether it
        reads images without litellm, which is then never imported (seconds of CPU, ~100 MB).

        Otherwise litellm is imported now (seconds, once per process) and taken through one
        offline call: litellm sets up lazily on its first call (the provider's modules, its
        logging and pricing paths: hundreds of ms), which would otherwise land on the first
        person's answer. The call is litellm's own ``mock_response``: nothing is sent,
        nothing is billed."""
        if await self._lean_start():
            return
        litellm = await load_litellm()
        if self._warmed:
            return
        self._warmed = True
        try:
            await litellm.acompletion(
                model=self.model,
                messages=[{"role": "user", "content": "warm-up"}],
                mock_response="ok",
                num_retries=0,
            )
        except Exception as exc:  # a warm-up that fails costs the first turn its time, no more
            log.debug("model %s: warm-up call failed: %s", self.model, self._describe(exc))

    async def _lean_start(self) -> bool:
        """Whether every model of the chain answers without litellm (see :meth:`prepare`)."""
        if not self.direct or self.extra or await asyncio.to_thread(model_table) is None:
            return False
        return self._lean(ModelRequest(messages=[ChatMessage(role="user", content="warm-up")]))

    def _lean(self, request: ModelRequest) -> bool:
        """Whether every model a call may try goes over the lean path and is priced from the
        table: such a call needs no litellm."""
        return all(
            self._direct_for(model, {**self._endpoint(model), "tools": request.tools}) is not None
            and prices_without_litellm(model)
            for model in self._models_for(request)
        )

    async def supports_vision(self) -> bool:
        """What litellm's model map says of the primary model (unknown models: no): read off
        its table for a model on the lean path, else asked of litellm."""
        if self._vision is None and self._direct_for(self.model, self._endpoint(self.model)):
            self._vision = await asyncio.to_thread(openai_vision, self.model)
        if self._vision is None:
            litellm = await load_litellm()
            try:
                self._vision = bool(litellm.supports_vision(model=self.model))
            except Exception:  # unknown to the bundled model map
                self._vision = False
        return self._vision

    async def generate(self, request: ModelRequest) -> ModelResult:
        """The whole completion, after retries and fallbacks within the deadline; raises
        :class:`ModelFailure` (the reason, no exception names) when none answered."""
        key = self._cache_key(request)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        if not self._lean(request):
            await load_litellm()
        self._admit()
        plan = self._plan(request)
        settled = False
        try:
            while (slot := await plan.next()) is not None:
                try:
                    result = await within(self._complete(slot, request), slot.timeout)
                except Exception as exc:  # a timeout, an HTTP error, a malformed answer
                    self._note(plan, slot, exc)
                    continue
                self.breaker.record_success()
                settled = True
                self.cache.put(key, result)
                return result
            self.breaker.record_failure()
            settled = True
            raise plan.failure(self._hint(plan)) from plan.last_error
        finally:
            if not settled:  # cancelled: no verdict on the model
                self.breaker.release()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Yield content deltas; ``last_result`` holds the full text and usage at the end.

        An attempt that fails before its first text (an error status, a stream cut after the
        role chunk, one with no content) is retried and falls back exactly like :meth:`generate`.
        Once text was yielded a failure raises :class:`StreamInterrupted`, whose ``resume``
        carries on with the same plan for a consumer that has not used the text yet.
        """
        self.last_result = None
        key = self._cache_key(request)
        hit = self.cache.get(key)
        if hit is not None:
            self.last_result = hit
            yield hit.text
            return
        if not self._lean(request):
            await load_litellm()
        self._admit()
        async for piece in self._stream(self._plan(request), request, key):
            yield piece

    async def _stream(
        self, plan: AttemptPlan, request: ModelRequest, key: str | None
    ) -> AsyncIterator[str]:
        settled = False
        try:
            while (slot := await plan.next()) is not None:
                acc = StreamAccumulator(slot.model)
                yielded = False
                response: Any = None
                try:
                    opened = time.monotonic()
                    response = await within(self._open_stream(slot, request), slot.timeout)
                    async with asyncio.timeout(slot.timeout - (time.monotonic() - opened)):
                        first = await _first_content(response, acc)
                    if first:
                        yielded = True
                        yield first
                    while True:
                        # Text is flowing: each further piece within the attempt's timeout, the
                        # whole stream within the deadline.
                        async with asyncio.timeout(min(slot.timeout, max(plan.remaining(), 0))):
                            chunk = await anext(response, None)
                        if chunk is None:
                            break
                        if delta := acc.add(chunk):
                            yielded = True
                            yield delta
                    result = acc.result()
                except Exception as exc:
                    self._note(plan, slot, exc)
                    if not yielded:
                        continue
                    self.breaker.record_failure()
                    settled = True
                    more = plan.model is not None
                    if more and plan.remaining() < plan.min_attempt:
                        more, plan.deadline_reached = False, True
                    raise StreamInterrupted(
                        plan.reason(),
                        resume=(lambda: self._stream(plan, request, key)) if more else None,
                        attempts=len(plan.failures),
                        retry_after=plan.retry_after,
                        deadline_reached=plan.deadline_reached,
                    ) from exc
                finally:
                    await _close(response)
                self.breaker.record_success()
                settled = True
                self.last_result = result
                self.cache.put(key, result)
                return
            self.breaker.record_failure()
            settled = True
            raise plan.failure(self._hint(plan)) from plan.last_error
        finally:
            if not settled:  # the consumer stopped early or was cancelled: no verdict
                self.breaker.release()

    def _admit(self) -> None:
        """Let the call through the breaker, or fail fast while it is open."""
        try:
            self.breaker.before_call()
        except ProviderUnavailable as exc:
            raise CircuitOpen(str(exc), retry_after=self.breaker.retry_in) from None

    def _plan(self, request: ModelRequest) -> AttemptPlan:
        """The attempts for one call: the turn's deadline if it runs in one (see
        :mod:`carrier.llm.deadline`), else this provider's own from now."""
        deadline = current_deadline()
        if self.deadline is not None:
            own = Deadline(time.monotonic() + self.deadline, self.deadline)
            if deadline is None or own.at < deadline.at:
                deadline = own
        return AttemptPlan(
            self._models_for(request),
            attempts=self.attempts,
            timeout=self.timeout,
            deadline=deadline,
            backoff=self.backoff,
            judge=judge,
        )

    def _note(self, plan: AttemptPlan, slot: Slot, exc: BaseException) -> None:
        """Record a failed attempt: in the plan (which decides what comes next) and the log."""
        verdict = plan.failed(exc)
        log.debug(
            "model %s attempt failed (%s): %s", slot.model, verdict.label, self._describe(exc)
        )
        following = plan.model
        if following is not None and following != slot.model:
            log.info(
                "model %s failed (%s); falling back to %s", slot.model, verdict.label, following
            )

    def _hint(self, plan: AttemptPlan) -> str:
        """How to fix a failure the operator can fix: a rejected key."""
        return next(
            (
                f". Check {' or '.join(credential_env_vars(f.model)) or 'the API key'}"
                f" (or the api_key given) for {f.model}"
                for f in plan.failures
                if is_auth_error(f.error)
            ),
            "",
        )

    # -- one call -------------------------------------------------------------------------------

    def _kwargs(self, model: str, request: ModelRequest, timeout: float) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [m.model_dump(exclude_none=True) for m in request.messages],
            "timeout": timeout,
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
        kwargs.update(self._endpoint(model))
        kwargs.update(self.extra)
        return kwargs

    def _endpoint(self, model: str) -> dict[str, str]:
        """The ``api_base`` and ``api_key`` a call to ``model`` is given: the provider's own for
        its vendor, a placeholder key for a keyless local OpenAI-compatible server."""
        found: dict[str, str] = {}
        if vendor_of(model) == vendor_of(self.model):
            if self.api_base:
                found["api_base"] = self.api_base
            if self._api_key:
                found["api_key"] = self._api_key
        if "api_key" not in found and self._keyless_local_openai(model):
            # Local OpenAI-compatible servers need no key, but the openai SDK insists on one.
            found["api_key"] = _NO_KEY_PLACEHOLDER
        return found

    def _temperature(self, request: ModelRequest) -> float | None:
        return request.temperature if request.temperature is not None else self.temperature

    def _keyless_local_openai(self, model: str) -> bool:
        if vendor_of(model) != "openai" or self._environ.get("OPENAI_API_KEY"):
            return False
        own_base = bool(self.api_base) and vendor_of(self.model) == "openai"
        env_base = self._environ.get("OPENAI_API_BASE") or self._environ.get("OPENAI_BASE_URL")
        return own_base or bool(env_base)

    async def _complete(self, slot: Slot, request: ModelRequest) -> ModelResult:
        kwargs = self._kwargs(slot.model, request, slot.timeout)
        direct = self._direct_for(slot.model, kwargs)
        if direct is not None:
            return await direct.complete(slot.model, kwargs)
        response = await litellm().acompletion(**kwargs)
        return result_from_response(slot.model, response)

    def _direct_for(self, model: str, kwargs: Mapping[str, Any]) -> DirectOpenAI | None:
        """The lean path for this call, when litellm would send it unchanged (see
        :mod:`carrier.llm._direct`); None sends it through litellm."""
        if not self.direct or self.extra or not is_plain_openai_model(model):
            return None
        if any(tool.get("type") == "mcp" for tool in kwargs.get("tools") or ()):
            return None
        env = self._environ
        key = kwargs.get("api_key") or env.get("OPENAI_API_KEY")
        if not key:  # litellm says what is missing, as it always has
            return None
        base = (
            kwargs.get("api_base")
            or env.get("OPENAI_BASE_URL")
            or env.get("OPENAI_API_BASE")
            or OPENAI_BASE
        )
        found = self._direct.get((base, key))
        if found is None:
            found = self._direct[(base, key)] = DirectOpenAI(base, key, env)
        return found

    async def aclose(self) -> None:
        """Close the lean path's HTTP clients."""
        for direct in self._direct.values():
            await direct.aclose()

    async def _open_stream(self, slot: Slot, request: ModelRequest) -> Any:
        kwargs = self._kwargs(slot.model, request, slot.timeout)
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        direct = self._direct_for(slot.model, kwargs)
        if direct is not None:
            return await direct.open_stream(slot.model, kwargs)
        return await litellm().acompletion(**kwargs)

    def _models_for(self, request: ModelRequest) -> list[str]:
        return list(dict.fromkeys([request.model or self.model, *self.fallbacks]))

    def _describe(self, exc: BaseException) -> str:
        """The error for messages and logs: the api key masked, then every secret the redactor
        knows or recognises replaced (vendors quote the key they were sent), then cut."""
        text = f"{type(exc).__name__}: {exc}".strip()
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "***")
        return current_redactor().clean(text, where="error")[:500]

    def _cache_key(self, request: ModelRequest) -> str | None:
        return self.cache.key(self._models_for(request), request, self._temperature(request))


async def _first_content(response: Any, acc: StreamAccumulator) -> str:
    """Read a stream up to its first text (or the start of a tool call, or its end): the role
    chunk that opens every stream says nothing, and a stream cut right after it is a failed
    attempt like any other, retried."""
    while not acc.started:
        chunk = await anext(response, None)
        if chunk is None:
            return ""
        if delta := acc.add(chunk):
            return delta
    return ""


async def _close(response: Any) -> None:
    """Hand a stream's connection back (also one abandoned half-way)."""
    close = getattr(response, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
