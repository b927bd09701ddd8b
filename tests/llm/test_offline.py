from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.offline import NO_MODEL_MESSAGE, OfflineProvider
from carrier.llm.parse import parse_response
from carrier.memory.embedder import Embedder
from carrier.memory.fake import HashEmbedder

EXAMPLES = [
    ("hello!", "Hey {{user1}}! Good to see you."),
    ("who are you?", "I'm Ada, a lighthouse keeper who collects stories from passing ships."),
    ("what's the weather like today?", "Foggy, as always out by the lighthouse."),
    (
        "can you help me debug my python code?",
        "I can try. Paste it here and tell me what it should do.",
    ),
]
POSTS = [
    "The lamp is lit and the sea is calm tonight.",
    "Fresh coffee, old maps and a storm rolling in.",
]


def _request(query: str, *, purpose: str = "response", **context: Any) -> ModelRequest:
    return ModelRequest(
        messages=[ChatMessage(role="user", content=f"prompt...\n{query}")],
        purpose=purpose,  # type: ignore[arg-type]
        query=query,
        context=context,
    )


def _ada(embedder: Embedder, **kwargs: Any) -> OfflineProvider:
    options: dict[str, Any] = {"examples": EXAMPLES, "post_examples": POSTS}
    options.update(kwargs)
    return OfflineProvider(agent_name="Ada", embedder=embedder, **options)


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(cache_size=0)
        self.batches: list[list[str]] = []

    async def _encode(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        await asyncio.sleep(0)  # let concurrent callers interleave
        return await super()._encode(texts)


# -- with the real model ---------------------------------------------------------------------


@pytest.mark.slow
async def test_offline_greeting_answers_with_the_greeting_example(real_embedder: Embedder) -> None:
    result = await _ada(real_embedder).generate(_request("hi there", sender_name="Sam"))
    parsed = parse_response(result.text)
    assert parsed.ok
    assert parsed.text == "Hey Sam! Good to see you."
    assert parsed.actions == ["REPLY"]
    assert parsed.thought.startswith("offline mode: answered from message example 1 (similarity")
    assert result.offline and result.model == "offline"
    assert result.usage.calls == 0 and result.usage.cost_usd == 0


@pytest.mark.slow
@pytest.mark.parametrize("query", ["who are you?", "Tell me about yourself", "what are you?"])
async def test_offline_who_are_you_answers_with_the_intro(
    real_embedder: Embedder, query: str
) -> None:
    parsed = parse_response((await _ada(real_embedder).generate(_request(query))).text)
    assert parsed.text == EXAMPLES[1][1]
    assert "message example 2" in parsed.thought


@pytest.mark.slow
async def test_offline_paraphrase_finds_the_right_example(real_embedder: Embedder) -> None:
    parsed = parse_response(
        (await _ada(real_embedder).generate(_request("my script throws an error, any ideas?"))).text
    )
    assert parsed.text == EXAMPLES[3][1]


@pytest.mark.slow
async def test_offline_shows_memory_of_an_earlier_session(real_embedder: Embedder) -> None:
    recalled = [
        {"text": "I love sailing", "created_at": "2026-11-20T09:00:00+00:00", "speaker": "Sam"},
        {"text": "Who are you?", "created_at": "2026-11-21T18:30:00+00:00", "speaker": "Sam"},
    ]
    result = await _ada(real_embedder).generate(
        _request("who are you?", sender_name="Sam", recalled=recalled)
    )
    parsed = parse_response(result.text)
    assert parsed.ok
    assert parsed.text.startswith('You asked me this before ("Who are you?", 2026-11-21). ')
    assert parsed.text.endswith(EXAMPLES[1][1])
    assert "recalled an earlier conversation" in parsed.thought


@pytest.mark.slow
async def test_offline_unrelated_memories_add_no_line(real_embedder: Embedder) -> None:
    recalled = [{"text": "I love sailing", "created_at": "2026-11-20T09:00:00", "speaker": "Sam"}]
    parsed = parse_response(
        (await _ada(real_embedder).generate(_request("who are you?", recalled=recalled))).text
    )
    assert parsed.text == EXAMPLES[1][1]


@pytest.mark.slow
async def test_offline_without_examples_says_no_model_is_configured(
    real_embedder: Embedder,
) -> None:
    provider = OfflineProvider(agent_name="Blank", examples=[], embedder=real_embedder)
    parsed = parse_response((await provider.generate(_request("hello?"))).text)
    assert parsed.ok
    assert parsed.text == NO_MODEL_MESSAGE
    assert "CARRIER_MODEL" in parsed.text and "OPENAI_API_KEY" in parsed.text
    assert parsed.thought.startswith("offline mode")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("media", "post"),
    [
        ("morning coffee next to a pile of old maps", 1),
        ("the lighthouse beam at night over still water", 0),
    ],
)
async def test_offline_caption_picks_a_post_by_similarity(
    real_embedder: Embedder, media: str, post: int
) -> None:
    result = await _ada(real_embedder).generate(_request(media, purpose="caption"))
    assert result.text == POSTS[post]


# -- unit behaviour (hash embedder) ------------------------------------------------------------


async def test_offline_provider_flags() -> None:
    provider = _ada(HashEmbedder())
    assert provider.offline is True and OfflineProvider.offline is True
    assert provider.name == "offline"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("hey Ada, are you around?", "RESPOND"),
        ("ADA!", "RESPOND"),
        ("what do you think, ada?", "RESPOND"),
        ("Adam is here", "IGNORE"),
        ("lunch anyone?", "IGNORE"),
    ],
)
async def test_offline_should_respond_on_name(query: str, expected: str) -> None:
    result = await _ada(HashEmbedder()).generate(_request(query, purpose="should_respond"))
    assert result.text == expected
    assert result.offline


async def test_offline_facts_are_empty() -> None:
    result = await _ada(HashEmbedder()).generate(_request("I live in Lisbon", purpose="facts"))
    assert result.text == "[]"


async def test_offline_summary_is_extractive() -> None:
    request = ModelRequest(
        messages=[ChatMessage(role="user", content="x")],
        purpose="summary",
        context={
            "messages": [
                {"text": "We talked about boats. Then about the weather."},
                "Sam wants to visit the lighthouse! He asked twice.",
            ]
        },
    )
    result = await _ada(HashEmbedder()).generate(request)
    assert result.text == "We talked about boats. Sam wants to visit the lighthouse!"

    from_prompt = ModelRequest(
        messages=[
            ChatMessage(role="user", content="Sam: Hi there. How are you?\nAda: Fine. Thanks.")
        ],
        purpose="summary",
    )
    assert (await _ada(HashEmbedder()).generate(from_prompt)).text == "Sam: Hi there. Ada: Fine."


async def test_offline_uses_last_user_message_when_query_is_empty() -> None:
    request = ModelRequest(messages=[ChatMessage(role="user", content="who are you?")])
    parsed = parse_response((await _ada(HashEmbedder()).generate(request)).text)
    assert parsed.text == EXAMPLES[1][1]


async def test_offline_placeholder_without_sender_name() -> None:
    parsed = parse_response((await _ada(HashEmbedder()).generate(_request("hello!"))).text)
    assert parsed.text == "Hey friend! Good to see you."


async def test_offline_ties_go_to_the_first_example() -> None:
    provider = OfflineProvider(
        agent_name="Ada",
        examples=[("same words", "first"), ("same words", "second")],
        embedder=HashEmbedder(),
    )
    for _ in range(3):
        assert (
            parse_response((await provider.generate(_request("same words"))).text).text == "first"
        )


async def test_offline_memory_line_names_another_speaker_and_statements() -> None:
    recalled = [
        {"text": "I live in Lisbon", "created_at": "2026-01-02T03:04:05Z", "speaker": "Bob"}
    ]
    parsed = parse_response(
        (
            await _ada(HashEmbedder()).generate(
                _request("I live in Lisbon", sender_name="Sam", recalled=recalled)
            )
        ).text
    )
    assert parsed.text.startswith('Bob told me this before ("I live in Lisbon", 2026-01-02). ')


async def test_offline_example_vectors_are_computed_once_even_concurrently() -> None:
    embedder = CountingEmbedder()
    provider = _ada(embedder)
    await asyncio.gather(
        provider.generate(_request("hello!")),
        provider.generate(_request("who are you?")),
        provider.generate(_request("nice fog", purpose="caption")),
    )
    await provider.generate(_request("weather?"))
    example_batches = [b for b in embedder.batches if b == [user for user, _ in EXAMPLES]]
    post_batches = [b for b in embedder.batches if b == POSTS]
    assert len(example_batches) == 1
    assert len(post_batches) == 1


async def test_offline_caption_without_posts_uses_example_replies() -> None:
    provider = OfflineProvider(agent_name="Ada", examples=EXAMPLES, embedder=HashEmbedder())
    result = await provider.generate(_request("what's the weather like", purpose="caption"))
    assert result.text == EXAMPLES[2][1]
