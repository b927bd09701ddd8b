"""Building runtimes from configuration: which store, which embedder, which model.

This is the edge where settings and the environment are read and turned into objects; the runtime
and the stages below it only receive objects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from carrier.errors import ConfigError
from carrier.limits import TurnLimits
from carrier.llm.base import ModelProvider
from carrier.llm.models import credential_env_vars, has_credentials, resolve_model
from carrier.llm.redacting import redacting
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.persona import example_pairs
from carrier.runtime import AgentRuntime
from carrier.safety.known import learn_character, learn_environment
from carrier.safety.patterns import mask_url
from carrier.settings import Settings

__all__ = [
    "OFFLINE_HINT",
    "ModelChoice",
    "build_runtime",
    "choose_model",
    "default_embedder",
    "given_model",
    "guard_model",
    "learn_secrets",
    "load_embedder",
    "offline_summary",
    "open_store",
]

log = logging.getLogger(__name__)


OFFLINE_HINT = (
    "Set CARRIER_MODEL (e.g. openai/gpt-4o-mini) and the provider's key, or CARRIER_API_BASE for a "
    "local OpenAI-compatible server, to use a language model."
)
"""How to leave offline mode; said once per run, after the reasons (see :func:`offline_summary`)."""


@dataclass
class ModelChoice:
    """Which model answers for an agent, kept apart from why: the name is what the API's
    ``model`` field shows, the note is said once (``carrier run``) or shown beside it."""

    provider: ModelProvider
    model: str
    """The model's name (``openai/gpt-4o-mini``), or ``offline`` for the offline provider."""
    offline: bool
    note: str | None = None
    """Why this model and not the one asked for, without the agent's name: for the offline
    provider ``no model is configured`` or ``asks for openai/gpt-4o-mini, but OPENAI_API_KEY is
    not set``. No secrets."""
    api_base: str | None = None

    @property
    def description(self) -> str:
        """A short phrase for logs: ``using openai/gpt-4o-mini at URL`` or ``offline (why)``;
        the way out of offline mode is :func:`offline_summary`'s to say."""
        if self.offline:
            return "offline" + (f" ({self.note})" if self.note else "")
        at = f" at {mask_url(self.api_base)}" if self.api_base else ""  # never its credentials
        text = f"using {self.model}{at}"
        return text + (f" ({self.note})" if self.note else "")


def offline_summary(agents: Sequence[tuple[str, str | None]]) -> str | None:
    """The offline explanation for a whole run, in one line: each reason once, with the names of
    the agents it applies to, then how to use a model. ``agents`` holds (name, note) pairs of the
    offline agents; None when there are none."""
    if not agents:
        return None
    by_reason: dict[str, list[str]] = {}
    for name, note in agents:
        by_reason.setdefault(note or "no language model", []).append(name)
    reasons = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
    answers = (
        "It answers from the character's message examples."
        if len(agents) == 1
        else "They answer from their characters' message examples."
    )
    return f"offline: {reasons}. {answers} {OFFLINE_HINT}"


def _extra_setting(character: Any, name: str) -> Any:
    settings = getattr(character, "settings", None)
    extra = getattr(settings, "model_extra", None) or {}
    return extra.get(name)


def choose_model(
    character: Any, settings: Settings, *, embedder: Embedder, environ: Mapping[str, str]
) -> ModelChoice:
    """The character's model if its credentials are there, else ``CARRIER_MODEL`` if its are, else
    the offline provider (which answers from the character's own message examples).

    The provider comes wrapped in the redactor (:mod:`carrier.llm.redacting`), and the
    process-wide redactor learns the secrets the character references."""
    learn_secrets(character, environ)
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
                timeout=ms.timeout or settings.model_timeout,
                deadline=ms.deadline or settings.turn_deadline,
                direct=settings.model_direct,
            )
            note = None
            if wanted and model != wanted:
                keys = " or ".join(credential_env_vars(wanted)) or "its key"
                note = f"asks for {wanted}, but {keys} is not set"
            return ModelChoice(
                provider=redacting(provider),
                model=model,
                offline=False,
                note=note,
                api_base=api_base,
            )

    from carrier.llm.offline import OfflineProvider

    offline = OfflineProvider(
        agent_name=character.name,
        examples=example_pairs(character),
        embedder=embedder,
        post_examples=list(getattr(character, "post_examples", []) or []),
    )
    if wanted:
        keys = " or ".join(credential_env_vars(wanted)) or "the provider's API key"
        why = f"asks for {wanted}, but {keys} is not set"
    else:
        why = "no model is configured"
    return ModelChoice(provider=redacting(offline), model="offline", offline=True, note=why)


def learn_secrets(character: Any, environ: Mapping[str, str]) -> None:
    """Teach the process-wide redactor the credentials in ``environ`` (some appear only after
    start-up: a generated secret key) and the values ``character`` references. A redactor the
    edge did not configure (library use, tests) does not learn."""
    learn_environment(environ)
    learn_character(character, environ)


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


def given_model(model: ModelProvider) -> ModelChoice:
    """A model chosen by the caller (a ``model_factory``, tests): its name as the API shows it,
    the model behind the redactor like every other."""
    name = "offline" if model.offline else str(getattr(model, "model", None) or model.name)
    return ModelChoice(provider=redacting(model), model=name, offline=model.offline)


def default_embedder(settings: Settings | None = None) -> Embedder:
    """The packaged all-MiniLM-L6-v2, with ``CARRIER_EMBED_THREADS`` and
    ``CARRIER_EMBED_ENGINE`` from the settings (``.env`` included) when given."""
    from carrier.memory.sentence import SentenceTransformerEmbedder

    if settings is None:
        return SentenceTransformerEmbedder()
    return SentenceTransformerEmbedder(threads=settings.embed_threads, engine=settings.embed_engine)


async def load_embedder(embedder: Embedder) -> None:
    """Load the embedding model and warm it up (one encode) now rather than at the first
    embedding, so the wait (seconds: torch, the weights, the first encode's lazy set-up) happens
    where the caller shows progress, and an agent's first answer costs a normal turn. Embedders
    without a model to load (test fakes) return at once."""
    load = getattr(embedder, "load", None)
    if load is not None and not getattr(embedder, "loaded", False):
        await load()


def build_runtime(
    character: Any,
    *,
    settings: Settings,
    store: Store,
    embedder: Embedder,
    environ: Mapping[str, str],
    model: ModelProvider | None = None,
) -> tuple[AgentRuntime, ModelChoice]:
    """A runtime for ``character`` and the model chosen for it. The model sits behind the
    redactor (everything it says is redacted before a stage sees it: replies, stored memories,
    facts, summaries, tool-call arguments), and the redactor learns the character's secrets."""
    if model is not None:
        learn_secrets(character, environ)
    choice = (
        given_model(model)
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
        reply_recovery_s=settings.reply_recovery_seconds,
        limits=TurnLimits.from_settings(settings),
    )
    guard_model(runtime)  # after the redactor: the budgets choose which model answers
    return runtime, choice


def guard_model(runtime: AgentRuntime, *, strict: bool = True) -> None:
    """Put the runtime's model behind its budgets (:mod:`carrier.llm.budget`): the character's
    ``settings.budget`` (read again when the character is edited) and the host's, enforced by
    the host's ``services["budgets"]``. Idempotent: the host calls it again at each turn's
    start, for a model swapped in by an edit. :class:`ConfigError` for a budget that is not one
    (with ``strict`` False, logged and left out)."""
    from carrier.llm.budget import BudgetedProvider, budget_of

    model = runtime.model
    if isinstance(model, BudgetedProvider):
        return
    try:
        first = budget_of(runtime.character)
    except ConfigError as exc:
        if strict:
            raise
        log.error("%s: budget left out: %s", runtime.character.name, exc)
        first = None
    seen = {"character": id(runtime.character), "budget": first}

    def budget() -> Any:
        character = runtime.character
        if id(character) != seen["character"]:  # edited: an invalid budget keeps the last one
            seen["character"] = id(character)
            try:
                seen["budget"] = budget_of(character)
            except ConfigError as exc:
                log.error("%s: budget not changed: %s", character.name, exc)
        return seen["budget"]

    def offline() -> ModelProvider:
        from carrier.llm.offline import OfflineProvider

        character = runtime.character
        return redacting(
            OfflineProvider(
                agent_name=character.name,
                examples=example_pairs(character),
                embedder=runtime.embedder,
                post_examples=list(getattr(character, "post_examples", []) or []),
            )
        )

    runtime.model = BudgetedProvider(
        model,
        agent_id=runtime.agent_id,
        budget=budget,
        services=runtime.services,
        offline=offline,
        current=lambda: runtime.model,
    )
