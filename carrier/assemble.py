"""Building runtimes from configuration: which store, which embedder, which model.

This is the edge where settings and the environment are read and turned into objects; the runtime
and the stages below it only receive objects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from carrier.builtin.persona import example_pairs
from carrier.llm.base import ModelProvider
from carrier.llm.models import credential_env_vars, has_credentials, resolve_model
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.runtime import AgentRuntime
from carrier.settings import Settings

__all__ = ["ModelChoice", "build_runtime", "choose_model", "default_embedder", "open_store"]

log = logging.getLogger(__name__)


@dataclass
class ModelChoice:
    provider: ModelProvider
    description: str
    """Human-readable: which model, or why the agent is offline and how to change that."""
    offline: bool


def _extra_setting(character: Any, name: str) -> Any:
    settings = getattr(character, "settings", None)
    extra = getattr(settings, "model_extra", None) or {}
    return extra.get(name)


def choose_model(
    character: Any, settings: Settings, *, embedder: Embedder, environ: Mapping[str, str]
) -> ModelChoice:
    """The character's model if its credentials are there, else ``CARRIER_MODEL`` if its are, else
    the offline provider (which answers from the character's own message examples)."""
    ms = character.model_settings
    wanted = resolve_model(model=ms.model, model_provider=ms.model_provider, default=None)
    candidates: list[tuple[str, str | None]] = []
    if wanted:
        candidates.append((wanted, None))
    if settings.model and settings.model != wanted:
        candidates.append((settings.model, settings.api_base))
    elif settings.model and settings.api_base:
        candidates = [(settings.model, settings.api_base)]
    for model, api_base in candidates:
        api_key = _character_key(character, model, environ)
        if api_key or has_credentials(model, environ, api_base=api_base):
            from carrier.llm.litellm_provider import LiteLLMProvider

            provider: ModelProvider = LiteLLMProvider(
                model,
                fallbacks=ms.model_fallbacks,
                api_base=api_base,
                api_key=api_key,
                temperature=ms.temperature,
                max_tokens=ms.max_tokens,
            )
            note = f"using {model}" + (f" at {api_base}" if api_base else "")
            if wanted and model != wanted:
                note += f" (the character asks for {wanted}, but {' or '.join(credential_env_vars(wanted)) or 'its key'} is not set)"
            return ModelChoice(provider=provider, description=note, offline=False)

    from carrier.llm.offline import OfflineProvider

    offline = OfflineProvider(
        agent_name=character.name,
        examples=example_pairs(character),
        embedder=embedder,
        post_examples=list(getattr(character, "post_examples", []) or []),
    )
    if wanted:
        keys = " or ".join(credential_env_vars(wanted)) or "the provider's API key"
        why = f"{character.name} asks for {wanted}, but {keys} is not set"
    else:
        why = f"no model is configured for {character.name}"
    note = (
        f"offline: {why}; answering from the character's message examples. "
        "Set CARRIER_MODEL (e.g. openai/gpt-4o-mini) and the provider's key, or CARRIER_API_BASE "
        "for a local OpenAI-compatible server, to use a language model."
    )
    return ModelChoice(provider=offline, description=note, offline=True)


def _character_key(character: Any, model: str, environ: Mapping[str, str]) -> str | None:
    """A key the character names by reference (``settings.secrets.OPENAI_API_KEY: $MY_KEY``)."""
    resolve = getattr(character, "resolve_secret", None)
    if resolve is None:
        return None
    for name in credential_env_vars(model):
        value = resolve(name, environ)
        if value:
            return str(value)
    return None


async def open_store(settings: Settings) -> Store:
    """The store named by the settings (MongoDB when ``CARRIER_MONGODB_URI`` is set, else the
    embedded SQLite file in the data dir), opened."""
    store: Store
    if settings.mongodb_uri is not None:
        from carrier.memory.mongo import MongoStore

        store = MongoStore.from_url(settings.mongodb_uri.get_secret_value())
    else:
        from carrier.memory.sqlite import SQLiteStore

        store = SQLiteStore(path=settings.store_path)
    await store.open()
    return store


def default_embedder() -> Embedder:
    from carrier.memory.sentence import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def build_runtime(
    character: Any,
    *,
    settings: Settings,
    store: Store,
    embedder: Embedder,
    environ: Mapping[str, str],
    model: ModelProvider | None = None,
) -> tuple[AgentRuntime, ModelChoice]:
    choice = (
        ModelChoice(provider=model, description=f"using {model.name}", offline=model.offline)
        if model is not None
        else choose_model(character, settings, embedder=embedder, environ=environ)
    )
    ignore = _extra_setting(character, "ignore") or []
    runtime = AgentRuntime(
        character=character,
        store=store,
        embedder=embedder,
        model=choice.provider,
        recent_messages=settings.recent_messages,
        recall_k=settings.recall_k,
        fact_interval=settings.fact_interval,
        summary_threshold=settings.summary_threshold,
        memory_tools=bool(_extra_setting(character, "memoryTools") or settings.memory_tools),
        ignore=[str(i) for i in ignore],
    )
    return runtime, choice
