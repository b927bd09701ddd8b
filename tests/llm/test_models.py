from __future__ import annotations

import pytest

from carrier.llm.models import credential_env_vars, has_credentials, resolve_model, vendor_of


def test_resolve_model_explicit_model_wins() -> None:
    got = resolve_model(model="groq/llama3-70b", model_provider="openai", default="x/y")
    assert got == "groq/llama3-70b"


def test_resolve_model_bare_model_gets_the_provider_prefix() -> None:
    got = resolve_model(model="claude-3-opus", model_provider="anthropic", default=None)
    assert got == "anthropic/claude-3-opus"
    assert resolve_model(model="gpt-4o", model_provider=None, default=None) == "gpt-4o"


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("openai", "openai/gpt-4o-mini"),
        ("anthropic", "anthropic/claude-3-5-haiku-latest"),
        ("OLLAMA", "ollama/llama3.1"),
        ("llama_local", "ollama/llama3.1"),
        ("google", "gemini/gemini-2.0-flash"),
        ("gemini", "gemini/gemini-2.0-flash"),
        ("grok", "xai/grok-2-latest"),
        ("xai", "xai/grok-2-latest"),
        ("deepseek", "deepseek/deepseek-chat"),
    ],
)
def test_resolve_model_maps_elizaos_model_provider(provider: str, expected: str) -> None:
    assert resolve_model(model=None, model_provider=provider, default="other/model") == expected


@pytest.mark.parametrize("provider", ["groq", "mistral", "openrouter", "together", "llama-cloud"])
def test_resolve_model_known_providers_have_a_litellm_model(provider: str) -> None:
    got = resolve_model(model=None, model_provider=provider, default=None)
    assert got is not None and "/" in got


def test_resolve_model_falls_back_to_default_then_none() -> None:
    assert resolve_model(model=None, model_provider="no-such", default="openai/gpt-4o") == (
        "openai/gpt-4o"
    )
    assert resolve_model(model="  ", model_provider=None, default=None) is None
    assert resolve_model(model=None, model_provider=None, default="") is None


def test_vendor_of() -> None:
    assert vendor_of("openai/gpt-4o") == "openai"
    assert vendor_of("openrouter/anthropic/claude") == "openrouter"
    assert vendor_of("gpt-4o-mini") == "openai"
    assert vendor_of("claude-3-5-sonnet") == "anthropic"
    assert vendor_of("mystery") is None


def test_has_credentials_by_vendor_key() -> None:
    assert not has_credentials("openai/gpt-4o-mini", {})
    assert has_credentials("openai/gpt-4o-mini", {"OPENAI_API_KEY": "sk-1"})
    assert not has_credentials("openai/gpt-4o-mini", {"OPENAI_API_KEY": "  "})
    assert not has_credentials("anthropic/claude-3-5-haiku-latest", {"OPENAI_API_KEY": "sk-1"})
    assert has_credentials("anthropic/claude-3-5-haiku-latest", {"ANTHROPIC_API_KEY": "k"})
    assert has_credentials("gemini/gemini-2.0-flash", {"GOOGLE_API_KEY": "k"})
    assert has_credentials("gpt-4o", {"OPENAI_API_KEY": "k"})
    assert has_credentials("somevendor/model", {"SOMEVENDOR_API_KEY": "k"})
    assert not has_credentials("mystery", {"OPENAI_API_KEY": "k"})


def test_has_credentials_base_url_and_local_providers() -> None:
    assert has_credentials("openai/local-model", {"OPENAI_API_BASE": "http://127.0.0.1:8080/v1"})
    assert has_credentials("openai/local-model", {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"})
    assert has_credentials("openai/x", {}, api_base="http://127.0.0.1:1234/v1")
    assert has_credentials("ollama/llama3.1", {})
    assert has_credentials("ollama_chat/llama3.1", {})


def test_credential_env_vars_name_the_variable_to_set() -> None:
    assert credential_env_vars("openai/gpt-4o") == ("OPENAI_API_KEY",)
    assert "ANTHROPIC_API_KEY" in credential_env_vars("claude-3-opus")
    assert credential_env_vars("mystery") == ()
