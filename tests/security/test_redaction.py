"""The redactor: known values and secret shapes replaced, learnt at the edge, held back across
stream chunks, and kept out of the log (chained exceptions included) and of provider errors."""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from carrier.errors import ProviderError
from carrier.llm.base import ModelRequest, ModelResult
from carrier.llm.fake import FunctionModel
from carrier.llm.litellm_provider import LiteLLMProvider
from carrier.llm.redacting import RedactingProvider, redacting
from carrier.safety import MARKER, RedactionEvent, Redactor, on_redaction, using_redactor
from carrier.safety.known import configure_redactor, learn_character
from carrier.safety.logs import install_log_redaction
from carrier.safety.redact import current_redactor, set_redactor
from carrier.settings import load_settings
from tests.llm.openai_server import FakeOpenAIServer, Reply
from tests.security._hostile import (
    ADMIN_VALUE,
    AKIA,
    DISCORD_VALUE,
    ENVIRON,
    GHP,
    HOSTILE_TEXT,
    OPENAI_VALUE,
    PEM,
    SECRETS,
    SK_PROJ,
    VOICE_VALUE,
    leaks,
)

SENTENCE = "Sure, here it is: {} (keep it safe)."


@pytest.fixture
def redactor() -> Iterator[Redactor]:
    """The process-wide redactor as ``carrier run`` configures it, for this test only."""
    previous = current_redactor()
    try:
        yield configure_redactor(environ=ENVIRON)
    finally:
        set_redactor(previous)


def test_redaction_replaces_known_values_and_shapes_with_a_count(redactor: Redactor) -> None:
    out = redactor.redact(HOSTILE_TEXT)
    assert leaks(out.text) == []
    assert out.count == len(SECRETS)
    assert out.text.startswith("Of course! OPENAI_API_KEY is [redacted], the bot token [redacted]")
    assert redactor.redact("nothing secret here").count == 0


def test_redaction_ignores_short_and_common_values() -> None:
    r = Redactor(["true", "8000", "dev", "localhost", "password", " s3cr3t-v4lue "])
    assert len(r) == 1
    text = "true, 8000, localhost and password stay; s3cr3t-v4lue goes"
    assert r.clean(text, where=None) == f"true, 8000, localhost and password stay; {MARKER} goes"


def test_redaction_catches_simple_encodings_of_a_known_value() -> None:
    value = "p@ss/w<o>rd&key=42!"
    r = Redactor([value])
    b64 = base64.b64encode(value.encode()).decode()
    forms = [
        value,
        quote(value, safe=""),
        b64,
        b64.rstrip("="),
        base64.urlsafe_b64encode(value.encode()).decode(),
        json.dumps(value)[1:-1],
        html.escape(value),
    ]
    for form in forms:
        assert r.clean(f"encoded: {form} ok", where=None) == f"encoded: {MARKER} ok", form


def test_redaction_learns_environment_settings_and_characters() -> None:
    from carrier.character import Character

    settings = load_settings(
        {
            "CARRIER_MONGODB_URI": "mongodb://carrier:mongo-pass-91b2c3@db.example:27017/c",
            "CARRIER_API_BASE": "https://proxy:base-pass-5d6e7f@llm.example/v1?api_key=base-key-8a9b0c",
            "CARRIER_SECRET_KEY": "fernet-secret-key-value-1234567890",
        }
    )
    previous = current_redactor()
    try:
        r = configure_redactor(environ=ENVIRON, settings=settings)
        assert current_redactor() is r
        for value in (
            OPENAI_VALUE,
            DISCORD_VALUE,
            ADMIN_VALUE,
            "mongo-pass-91b2c3",
            "base-pass-5d6e7f",
            "base-key-8a9b0c",
            "fernet-secret-key-value-1234567890",
        ):
            assert r.clean(f"x {value} y", where=None) == f"x {MARKER} y", value
        assert r.clean("port 8000, enabled true, level DEBUG", where=None) == (
            "port 8000, enabled true, level DEBUG"
        )
        # VOICE_CREDENTIAL is not named like a credential: known once a character references it.
        assert r.clean(VOICE_VALUE, where=None) == VOICE_VALUE
        character = Character.model_validate(
            {"name": "Pilot", "settings": {"secrets": {"ELEVENLABS_API_KEY": "$VOICE_CREDENTIAL"}}}
        )
        assert learn_character(character, ENVIRON) == 1
        assert r.clean(VOICE_VALUE, where=None) == MARKER
        r.add("minted-local-admin-token-0123456789")  # another part registers its own at run time
        assert r.clean("minted-local-admin-token-0123456789", where=None) == MARKER
        assert "Redactor(" in repr(r) and OPENAI_VALUE not in repr(r)
    finally:
        set_redactor(previous)


def test_redaction_default_redactor_does_not_learn() -> None:
    """Before the edge configures one, library use and tests gather nothing process-wide."""
    with using_redactor(Redactor(learns=False)) as r:
        from carrier.character import Character

        character = Character.model_validate(
            {"name": "Pilot", "settings": {"secrets": {"OPENAI_API_KEY": "$OPENAI_API_KEY"}}}
        )
        assert learn_character(character, ENVIRON) == 0 and len(r) == 0
        assert r.clean(SK_PROJ, where=None) == MARKER  # shapes still go


@pytest.mark.parametrize(
    "secret", [OPENAI_VALUE, DISCORD_VALUE, ADMIN_VALUE, SK_PROJ, AKIA, GHP, PEM]
)
def test_redaction_stream_secret_split_at_every_position(redactor: Redactor, secret: str) -> None:
    text = SENTENCE.format(secret)
    whole = redactor.clean(text, where=None)
    assert leaks(whole) == []
    for cut in range(len(text) + 1):
        stream = redactor.stream(where=None)
        first = stream.feed(text[:cut])
        second = stream.feed(text[cut:])
        rest = stream.finish()
        assert first + second + rest == whole, cut
        assert leaks(first) == [] and leaks(first + second) == []
    stream = redactor.stream(where=None)
    one_by_one = "".join(stream.feed(ch) for ch in text) + stream.finish()
    assert one_by_one == whole


def test_redaction_stream_lets_ordinary_text_out_before_it_ends(redactor: Redactor) -> None:
    shapes_only = Redactor().stream(where=None)
    assert shapes_only.feed("Hello there, ") == "Hello there, "
    assert shapes_only.feed("how are") == "how "  # the last word may still grow into a secret
    assert shapes_only.held == 3
    assert shapes_only.feed(" you?") + shapes_only.finish() == "are you?"
    # With known values, at most the longest of them (its longest encoding) is held back.
    words = "one two three four five six seven eight nine ten eleven twelve thirteen "
    stream = redactor.stream(where=None)
    out = stream.feed(words)
    assert out and words.startswith(out)
    assert stream.held < redactor.longest
    assert out + stream.finish() == words


def test_redaction_events_say_where_and_how_many_never_the_value(redactor: Redactor) -> None:
    heard: list[RedactionEvent] = []
    everywhere: list[RedactionEvent] = []
    stop = redactor.on_redaction(heard.append)
    stop_all = on_redaction(everywhere.append)
    try:
        redactor.clean(f"{OPENAI_VALUE} and {AKIA}", where="api")
        redactor.clean("nothing", where="api")
        redactor.clean(AKIA, where=None)  # not reported
    finally:
        stop()
        stop_all()
    assert heard == [
        RedactionEvent(where="api", count=2, kinds=("aws access key id", "known value"))
    ]
    assert everywhere == heard
    assert OPENAI_VALUE not in repr(heard)


class _VendorAuthError(Exception):
    """Stands for litellm.AuthenticationError: it quotes the key it was sent."""


def test_redaction_log_filter_redacts_messages_args_and_chained_exceptions(
    redactor: Redactor,
) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    uninstall = install_log_redaction()
    counted: list[RedactionEvent] = []
    stop = on_redaction(counted.append)
    log = logging.getLogger("carrier.test.turn")
    try:
        log.warning("calling with key %s and %s", OPENAI_VALUE, {"token": DISCORD_VALUE})
        try:
            try:
                raise _VendorAuthError(f"Incorrect API key provided: {OPENAI_VALUE} / {SK_PROJ}")
            except _VendorAuthError as exc:
                raise ProviderError("model call failed: see the cause") from exc
        except ProviderError:
            log.exception("turn failed for a message holding %s", AKIA)
    finally:
        stop()
        uninstall()
        root.removeHandler(handler)
    text = out.getvalue()
    assert leaks(text) == []
    assert "calling with key [redacted] and {'token': '[redacted]'}" in text
    assert "turn failed for a message holding [redacted]" in text
    assert "The above exception was the direct cause" in text  # the chain is still there
    assert "Incorrect API key provided: [redacted] / [redacted]" in text
    assert sum(e.count for e in counted if e.where == "log") == 5  # 2 + 1 + 2 in the chain


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])
async def test_redaction_provider_error_and_logged_litellm_exception_hold_no_key(
    redactor: Redactor,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    direct: bool,
) -> None:
    """The loopback server answers 401 quoting the key, as OpenAI does; the lean path and
    litellm both raise it with the server's text."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_VALUE)
    server = FakeOpenAIServer()
    server.start()
    uninstall = install_log_redaction()
    try:
        server.queue(Reply(status=401))
        provider = LiteLLMProvider(
            "openai/loopback", api_base=server.base_url, attempts=1, direct=direct
        )
        request = ModelRequest(messages=[{"role": "user", "content": "hi"}])  # type: ignore[list-item]
        with caplog.at_level(logging.ERROR):
            try:
                await provider.generate(request)
            except ProviderError as exc:
                error = exc
                logging.getLogger("carrier.test.turn").exception("turn failed")
        await provider.aclose()
    finally:
        uninstall()
        server.stop()
    assert server.requests[0].authorization == f"Bearer {OPENAI_VALUE}"  # the key was sent
    # The reason names what happened, never the vendor's text (nor an exception's name).
    assert "authentication failed" in str(error) and OPENAI_VALUE not in str(error)
    assert "Error" not in str(error)
    assert OPENAI_VALUE in str(error.__cause__)  # the vendor's exception quotes it...
    assert "[redacted]" in caplog.text
    assert OPENAI_VALUE not in caplog.text  # ...the log, chain included, does not


async def test_redaction_provider_wrapper_cleans_text_streams_and_tool_calls(
    redactor: Redactor,
) -> None:
    def answer(request: ModelRequest) -> ModelResult:
        return ModelResult(
            text=HOSTILE_TEXT,
            model="function",
            tool_calls=[{"id": "1", "name": "post", "arguments": {"body": f"key {SK_PROJ}"}}],
        )

    inner = FunctionModel(answer, chunk_size=3)
    model = redacting(inner)
    assert isinstance(model, RedactingProvider) and redacting(model) is model
    assert redacting(inner) is model  # the same wrapper for the same model
    assert model.name == "function" and not model.offline
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    result = await model.generate(request)
    assert (
        leaks(result.text) == [] and result.tool_calls[0]["arguments"]["body"] == "key [redacted]"
    )
    pieces = [p async for p in model.stream(request)]
    assert "".join(pieces) == result.text
    assert model.last_result is not None and model.last_result.text == result.text
    assert model.last_result.tool_calls == result.tool_calls
    assert len(inner.requests) == 2  # the fake's attributes show through the wrapper
    assert model.requests is inner.requests
