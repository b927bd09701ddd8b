"""Each persona's model: which one ``carrier run`` would use, and whether it answers.

The choice is :func:`carrier.assemble.choose_model`'s, so the doctor and the run never disagree.
A model that is not offline gets one call through litellm asking for a single token, with a short
timeout and no retries; personas sharing a model (and key and endpoint) share that call. The
fallback models are called too: one that fails is a warning, since the persona runs without it.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Mapping
from typing import Any

import numpy as np

from carrier.assemble import OFFLINE_HINT, choose_model
from carrier.doctor.base import Result, fail, ok, warn
from carrier.errors import ProviderError
from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.models import credential_env_vars, has_credentials, resolve_model
from carrier.memory.embedder import Embedder
from carrier.settings import Settings

__all__ = ["ModelChecker", "NoEmbedder"]

NAME = "model"


class NoEmbedder(Embedder):
    """Given to :func:`choose_model` for the offline provider it may build: the doctor never
    generates offline, so nothing is embedded (and no embedding model is loaded)."""

    name = "none"
    dim = 1

    async def _encode(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("carrier doctor does not embed")


class ModelChecker:
    """Checks personas' models; one call per distinct (model, endpoint, key)."""

    def __init__(self, settings: Settings, environ: Mapping[str, str], *, timeout: float) -> None:
        self.settings = settings
        self.environ = environ
        self.timeout = timeout
        self._calls: dict[tuple[str, str | None, str], asyncio.Future[BaseException | None]] = {}
        self._embedder = NoEmbedder()

    async def check(self, character: Any) -> list[Result]:
        choice = choose_model(
            character, self.settings, embedder=self._embedder, environ=self.environ
        )
        if choice.offline:
            return [self._offline(character, choice.note)]
        provider: Any = choice.provider
        model, api_base = provider.model, provider.api_base
        where = f"{model}" + (f" at {api_base}" if api_base else "")
        problem = await self._call(provider, model)
        if problem is not None:
            return [fail(NAME, f"{where} did not answer: {problem[0]}", problem[1])]
        results = [ok(NAME, f"{where} answered")]
        for fallback in provider.fallbacks:
            if fallback == model:
                continue
            label = "fallback model"
            if not (api_base and _same_vendor(fallback, model)) and not has_credentials(
                fallback, self.environ
            ):
                keys = " or ".join(credential_env_vars(fallback)) or "its provider's key"
                results.append(
                    warn(
                        label,
                        f"{fallback} cannot be used: {keys} is not set",
                        f"set {keys}, or remove it from settings.modelFallbacks",
                    )
                )
                continue
            problem = await self._call(provider, fallback)
            if problem is None:
                results.append(ok(label, f"{fallback} answered"))
            else:
                results.append(warn(label, f"{fallback} did not answer: {problem[0]}", problem[1]))
        return results

    def _offline(self, character: Any, note: str | None) -> Result:
        """The run's own reason (``ModelChoice.note``): a warning when the character asks for a
        model it cannot have, fine when none is configured."""
        ms = character.model_settings
        wanted = resolve_model(model=ms.model, model_provider=ms.model_provider, default=None)
        detail = (
            f"offline: {note or 'no model is configured'}; it answers from its message examples"
        )
        if wanted:
            keys = " or ".join(credential_env_vars(wanted)) or "its provider's API key"
            return warn(NAME, detail, f"set {keys}, or: {OFFLINE_HINT}")
        return ok(NAME, detail)

    async def _call(self, provider: Any, model: str) -> tuple[str, str] | None:
        """None when ``model`` answered a one-token request; else (what happened, the fix)."""
        key = getattr(provider, "_api_key", None) or ""
        cache_key = (model, provider.api_base, hashlib.sha256(key.encode()).hexdigest())
        if cache_key not in self._calls:
            self._calls[cache_key] = asyncio.ensure_future(self._once(provider, model))
        failure = await self._calls[cache_key]
        if failure is None:
            return None
        from carrier.llm._litellm import load_litellm

        await load_litellm()  # (a call over the lean path needs none; _explain tells its errors)
        return _explain(failure, model, provider.api_base)

    async def _once(self, provider: Any, model: str) -> BaseException | None:
        # One attempt at this model alone, with a short timeout: a check, not a conversation.
        provider.attempts, provider.timeout = 1, self.timeout
        request = ModelRequest(
            messages=[ChatMessage(role="user", content="Reply with OK.")],
            purpose="other",
            model=model,
            max_tokens=1,
        )
        saved, provider.fallbacks = provider.fallbacks, []
        try:
            await _bounded(provider.generate(request), self.timeout + 5)
        except (ProviderError, TimeoutError) as exc:
            return exc
        finally:
            provider.fallbacks = saved
        return None


async def _bounded(call: Awaitable[Any], seconds: float) -> Any:
    async with asyncio.timeout(seconds):
        return await call


def _same_vendor(a: str, b: str) -> bool:
    from carrier.llm.models import vendor_of

    return vendor_of(a) == vendor_of(b)


def _explain(exc: BaseException, model: str, api_base: str | None) -> tuple[str, str]:
    """What went wrong, in a line, and what to do about it."""
    from carrier.llm._litellm import is_auth_error, litellm

    keys = " or ".join(credential_env_vars(model)) or "the provider's API key"
    if isinstance(exc, TimeoutError) or isinstance(exc.__cause__, TimeoutError):
        return (
            "no answer in time",
            f"check that {api_base or 'the provider'} is reachable from here",
        )
    cause = exc.__cause__ or exc
    status = getattr(cause, "status_code", None)
    lm = litellm()
    if is_auth_error(cause) or status in (401, 403):
        return (
            f"the key was refused (HTTP {status or 401})",
            f"check {keys}: it may be wrong, revoked, or for another account or project",
        )
    if isinstance(cause, lm.NotFoundError) or status == 404:
        return (
            "the provider does not know this model (HTTP 404)",
            "check the model name (settings.model in the character, or CARRIER_MODEL)",
        )
    if isinstance(cause, lm.APIConnectionError | lm.Timeout):
        target = api_base or "the provider"
        return (
            f"could not connect ({type(cause).__name__})",
            f"check that {target} is up and reachable from here"
            + (" (CARRIER_API_BASE)" if api_base else ""),
        )
    if isinstance(cause, lm.RateLimitError) or status == 429:
        return (
            "rate limited or out of quota (HTTP 429)",
            f"check the account's quota and billing for {keys}",
        )
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return (
        f"{type(cause).__name__}: {text[:300]}",
        "check the model name and the provider's status; run carrier chat for the full error",
    )
