"""litellm's model table read without litellm (carrier/llm/_model_table.py) against litellm
itself, imported: the same entries, lean-path decisions never more permissive than litellm's
own predicates, and the same prices wherever the table alone prices a model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from carrier.llm._direct import _REASONING_SERIES, is_plain_openai_model, price
from carrier.llm._litellm import load_litellm_now
from carrier.llm._model_table import ModelTable, model_table, openai_rates

# Names no table entry has, as local OpenAI-compatible servers and new releases use them.
LOCAL_NAMES = (
    "local-llama",
    "llama3.1:8b",
    "bench-model",
    "m",
    "qwen2.5-7b-instruct",
    "gpt-oss-20b",
    "o9-local",
    "codex-local",
    "gpt-7-preview",
    "org/o3",
    "my-audio-model",
)
TOKENS = ((1, 1), (1200, 300), (250_000, 1000), (400_000, 9000))


@pytest.fixture(scope="module")
def litellm() -> Any:
    return load_litellm_now()


@pytest.fixture(scope="module")
def table() -> ModelTable:
    found = model_table()
    assert found is not None, "litellm's bundled table was not found"
    return found


def asked_of_litellm(litellm: Any, name: str) -> bool:
    """How the lean path decided before it read the table itself: litellm's own predicates
    and ``model_cost`` entry."""
    renamed = (
        litellm.openaiOSeriesConfig.is_model_o_series_model(model=name)
        or litellm.OpenAIGPT5Config.is_model_gpt_5_model(model=name)
        or litellm.openAIGPTAudioConfig.is_model_gpt_audio_model(model=name)
    )
    info = litellm.model_cost.get(name) or litellm.model_cost.get("openai/" + name) or {}
    if renamed or info.get("supports_reasoning"):
        return False
    return info.get("mode") in (None, "chat")


def litellms_price(litellm: Any, model: str, prompt: int, completion: int) -> float:
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt, completion_tokens=completion
        )
    except Exception:  # no price: the provider counts 0
        return 0.0
    return float(prompt_cost + completion_cost)


def test_the_table_is_litellms_model_cost(litellm: Any, table: ModelTable) -> None:
    assert litellm.model_cost.keys() == table.entries.keys()
    assert [k for k, v in litellm.model_cost.items() if dict(v) != dict(table.entries[k])] == []
    assert table.openai_chat == set(litellm.open_ai_chat_completion_models)
    # (an alias row is served as the entry it names)
    assert table.entries["gpt-astra-latest"] == table.entries["gpt-6-astra"]


def test_the_reasoning_series_names_are_litellms(litellm: Any) -> None:
    from litellm.llms.openai.chat.gpt_reasoning_transformation import (
        GPT_REASONING_SERIES_MARKERS,
    )

    assert tuple(GPT_REASONING_SERIES_MARKERS) == _REASONING_SERIES


def test_no_model_is_plain_that_litellm_would_not_send_as_it_is(
    litellm: Any, table: ModelTable
) -> None:
    names = sorted(table.openai_chat) + list(LOCAL_NAMES)
    names += ["gpt-5-chat-latest", "gpt-astra-latest", "GPT-4o-mini", "gpt-4o-mini-2099-01-01"]
    stricter = []
    for name in names:
        ours, litellms = is_plain_openai_model("openai/" + name), asked_of_litellm(litellm, name)
        assert not ours or litellms, f"{name}: plain here, not to litellm"
        if litellms and not ours:
            stricter.append(name)
    # Where litellm's name rules call a name a reasoning model, it is sent through litellm.
    assert set(stricter) <= {"o9-local", "codex-local", "gpt-7-preview", "gpt-5-chat-latest"}
    for plain in ("gpt-4o-mini", "gpt-4.1", "gpt-3.5-turbo", "local-llama", "llama3.1:8b"):
        assert is_plain_openai_model("openai/" + plain), plain
    for renamed in ("o3-mini", "gpt-5-mini", "gpt-audio", "gpt-astra-latest"):
        assert not is_plain_openai_model("openai/" + renamed), renamed


def asked_names(table: ModelTable, keys: Iterable[str]) -> list[str]:
    """``openai/`` names of ``keys``, every local name, and OpenAI's chat models in upper case
    and as a snapshot not yet in the table."""
    names = {"openai/" + key for key in keys}
    names |= {"openai/" + name for name in LOCAL_NAMES}
    names |= {"openai/" + key.upper() for key in table.openai_chat}
    names |= {f"openai/{key}-2099-01-01" for key in table.openai_chat}
    return sorted(names)


def test_every_price_read_off_the_table_is_litellms(litellm: Any, table: ModelTable) -> None:
    names = asked_names(table, table.entries)
    priced = free = 0
    for model in names:
        rates = table.openai_rates(model)
        if rates is None:
            continue
        priced += rates != (0.0, 0.0)
        free += rates == (0.0, 0.0)
        for prompt, completion in TOKENS:
            ours = prompt * rates[0] + completion * rates[1]
            assert ours == pytest.approx(litellms_price(litellm, model, prompt, completion)), (
                model,
                prompt,
                completion,
            )
    assert priced > 100 and free > len(LOCAL_NAMES)  # (most of OpenAI's models, every local)


def test_whether_a_model_reads_images_is_litellms_answer(litellm: Any, table: ModelTable) -> None:
    names = asked_names(table, table.openai_chat)
    answered = seeing = 0
    for model in names:
        ours = table.openai_vision(model)
        if ours is None:  # not plain from the table: litellm is asked
            continue
        answered += 1
        seeing += ours
        assert ours == bool(litellm.supports_vision(model=model)), model
    assert answered > len(names) * 0.9 and seeing > 20  # (most of them, GPT-4o's family among)


def test_tiered_and_other_vendors_prices_are_litellms_to_give(litellm: Any) -> None:
    for model in ("openai/gpt-5.4", "openai/claude-haiku-4-5"):
        assert openai_rates(model) is None, model
        assert price(model, 300_000, 10) == litellms_price(litellm, model, 300_000, 10)
    assert price("openai/local-llama", 1000, 1000) == 0.0
    assert price("openai/gpt-4o-mini", 1200, 300) == pytest.approx(
        litellms_price(litellm, "openai/gpt-4o-mini", 1200, 300)
    )


def test_a_table_that_says_nothing_decides_nothing() -> None:
    empty = ModelTable({})
    assert empty.openai_rates("openai/gpt-4o-mini") == (0.0, 0.0)
    odd = ModelTable({"gpt-x": {"litellm_provider": "openai", "input_cost_per_token": 1e-6}})
    assert odd.openai_rates("openai/gpt-x") is None  # no output price: litellm's to say
    shaped = ModelTable(
        {
            "gpt-x": {
                "litellm_provider": "openai",
                "input_cost_per_token": 1e-6,
                "output_cost_per_token": 2e-6,
                "new_kind_of_price": 1.0,
            }
        }
    )
    assert shaped.openai_rates("openai/gpt-x") is None  # a field not known here
