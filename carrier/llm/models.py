"""Which litellm model string to use, and whether its credentials are present.

Pure functions over strings and an injected environment mapping; nothing here imports litellm.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "LOCAL_PROVIDERS",
    "PROVIDER_MODELS",
    "credential_env_vars",
    "has_credentials",
    "resolve_model",
    "vendor_of",
]

PROVIDER_MODELS: dict[str, str] = {
    "openai": "openai/gpt-4o-mini",
    "anthropic": "anthropic/claude-3-5-haiku-latest",
    "claude": "anthropic/claude-3-5-haiku-latest",
    "groq": "groq/llama-3.1-8b-instant",
    "google": "gemini/gemini-2.0-flash",
    "gemini": "gemini/gemini-2.0-flash",
    "mistral": "mistral/mistral-small-latest",
    "deepseek": "deepseek/deepseek-chat",
    "ollama": "ollama/llama3.1",
    "llama_local": "ollama/llama3.1",
    "openrouter": "openrouter/openai/gpt-4o-mini",
    "together": "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "llama_cloud": "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "xai": "xai/grok-2-latest",
    "grok": "xai/grok-2-latest",
    "cohere": "cohere/command-r",
    "fireworks": "fireworks_ai/accounts/fireworks/models/llama-v3p1-8b-instruct",
    "perplexity": "perplexity/sonar",
}
"""ElizaOS ``modelProvider`` names (lowercase, ``-`` as ``_``) → default litellm model strings."""

LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})
"""litellm providers that serve from this machine by default and need no key."""

_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "TOGETHER_AI_API_KEY"),
    "xai": ("XAI_API_KEY",),
    "cohere": ("COHERE_API_KEY", "CO_API_KEY"),
    "fireworks_ai": ("FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY"),
    "perplexity": ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"),
    "azure": ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY"),
    "huggingface": ("HUGGINGFACE_API_KEY", "HF_TOKEN"),
    "bedrock": ("AWS_ACCESS_KEY_ID", "AWS_PROFILE"),
    "vertex_ai": ("GOOGLE_APPLICATION_CREDENTIALS",),
}
"""litellm provider prefix → environment variables litellm reads its key from."""

_BASES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
    "hosted_vllm": ("HOSTED_VLLM_API_BASE",),
    "lm_studio": ("LM_STUDIO_API_BASE",),
    "ollama": ("OLLAMA_API_BASE",),
    "ollama_chat": ("OLLAMA_API_BASE",),
}
"""litellm provider prefix → environment variables naming a base URL (a local endpoint)."""

_BARE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("chatgpt", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gemini"),
    ("mistral", "mistral"),
    ("deepseek", "deepseek"),
    ("grok", "xai"),
    ("command", "cohere"),
)


def _normalize(provider: str) -> str:
    return provider.strip().lower().replace("-", "_")


def resolve_model(
    *, model: str | None, model_provider: str | None, default: str | None
) -> str | None:
    """The litellm model string for a character.

    An explicit ``model`` wins (prefixed with the provider's litellm prefix when it has none and
    ``model_provider`` is known, e.g. ``anthropic`` + ``claude-3-opus`` →
    ``anthropic/claude-3-opus``); else the default model of the ElizaOS ``model_provider``; else
    ``default`` (``CARRIER_MODEL``). ``None`` means no model: use the offline provider.
    """
    known = PROVIDER_MODELS.get(_normalize(model_provider)) if model_provider else None
    if model and model.strip():
        model = model.strip()
        if "/" not in model and known:
            return f"{known.split('/', 1)[0]}/{model}"
        return model
    if known:
        return known
    return default.strip() if default and default.strip() else None


def vendor_of(model: str) -> str | None:
    """The litellm provider prefix of ``model`` (``openai/gpt-4o`` → ``openai``), inferring it
    for bare names litellm also understands (``gpt-4o`` → ``openai``); ``None`` if unknown."""
    model = model.strip()
    if "/" in model:
        return _normalize(model.split("/", 1)[0])
    lower = model.lower()
    for prefix, vendor in _BARE_PREFIXES:
        if lower.startswith(prefix):
            return vendor
    return None


def credential_env_vars(model: str) -> tuple[str, ...]:
    """Environment variables that hold the key for ``model``'s vendor (for messages and checks)."""
    vendor = vendor_of(model)
    if vendor is None:
        return ()
    return _KEYS.get(vendor, (f"{vendor.upper()}_API_KEY",))


def has_credentials(model: str, environ: Mapping[str, str], *, api_base: str | None = None) -> bool:
    """Whether ``model`` can plausibly be called: its vendor's key is set, a base URL is
    configured (argument or the vendor's ``*_API_BASE`` variable), or the vendor is local
    (ollama, LM Studio). It does not call anything."""
    if api_base:
        return True
    vendor = vendor_of(model)
    if vendor is None:
        return False
    if vendor in LOCAL_PROVIDERS:
        return True
    names = _KEYS.get(vendor, (f"{vendor.upper()}_API_KEY",)) + _BASES.get(vendor, ())
    return any(environ.get(name, "").strip() for name in names)
