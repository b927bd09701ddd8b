"""Small parts of the API: the token bucket, settings from the environment, secret masking."""

from __future__ import annotations

from carrier.api import load_api_settings
from carrier.api._secrets import keep_secret_refs, mask_config, public_character
from carrier.api.metrics import Metrics
from carrier.api.ratelimit import RateLimiter
from carrier.types import Usage


def test_ratelimit_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=2, clock=lambda: now[0])
    assert [limiter.hit("a"), limiter.hit("a")] == [0.0, 0.0]
    assert limiter.hit("a") == 0.5  # half a second until the next token
    assert limiter.hit("b") == 0.0  # keys are independent
    now[0] = 0.5
    assert limiter.hit("a") == 0.0
    assert limiter.hit("a") > 0


def test_ratelimit_forgets_least_recently_used_keys() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, clock=lambda: 0.0, max_keys=2)
    limiter.hit("a"), limiter.hit("b"), limiter.hit("c")
    assert limiter.hit("a") == 0.0  # "a" was dropped: a full bucket again
    assert limiter.hit("c") > 0


def test_api_settings_from_environment() -> None:
    settings = load_api_settings(
        {
            "CARRIER_CORS_ORIGINS": "https://a.example, https://b.example",
            "CARRIER_MAX_UPLOAD_BYTES": "10",
        }
    )
    assert settings.cors_origins == ["https://a.example", "https://b.example"]
    assert settings.max_upload_bytes == 10 and settings.max_json_bytes == 1_000_000
    assert load_api_settings({}).cors_origins == []


def test_secret_references_hidden_and_kept_across_edits() -> None:
    stored = {
        "name": "X",
        "secrets": {"A_KEY": "$A"},
        "settings": {"secrets": {"B_TOKEN": "$B"}, "OPENAI_API_KEY": "$C", "model": "m"},
        "clientConfig": {"discord": {"botToken": "$D", "allowedChannels": ["general"]}},
    }
    shown = public_character(stored)
    assert shown == {
        "name": "X",
        "settings": {"model": "m"},
        "clientConfig": {"discord": {"allowedChannels": ["general"]}},
    }
    assert keep_secret_refs({**shown, "name": "Y"}, stored) == {**stored, "name": "Y"}
    cleared = keep_secret_refs({**shown, "secrets": {"A_KEY": ""}}, stored)
    assert cleared["secrets"] == {"A_KEY": ""}
    assert mask_config({"apiToken": "$T", "empty_key": "", "nested": {"password": "$P"}}) == {
        "apiToken": "set",
        "empty_key": "unset",
        "nested": {"password": "set"},
    }


def test_metrics_histogram_is_cumulative_and_labels_escaped() -> None:
    metrics = Metrics()
    metrics.observe_turn('a"b', "processed", 0.02, Usage(prompt_tokens=5, cost_usd=0.25))
    metrics.observe_turn("c", "failed", 100.0, Usage(completion_tokens=7))
    text = metrics.render()
    assert 'carrier_turns_total{agent="a\\"b",status="processed"} 1' in text
    assert 'carrier_turn_seconds_bucket{le="0.01"} 0' in text
    assert 'carrier_turn_seconds_bucket{le="0.025"} 1' in text
    assert 'carrier_turn_seconds_bucket{le="60"} 1' in text
    assert 'carrier_turn_seconds_bucket{le="+Inf"} 2' in text
    assert 'carrier_tokens_total{kind="completion"} 7' in text
    assert "carrier_cost_usd_total 0.25" in text


def test_metrics_sum_stage_times_and_show_the_vector_index() -> None:
    metrics = Metrics()
    metrics.observe_turn("a", "processed", 0.1, Usage(), {"message": 20.0, "state": 10.0})
    metrics.observe_turn("a", "ignored", 0.1, Usage(), {"message": 30.0})
    text = metrics.render(
        [
            {"agent_id": "a", "model": "m:3", "set": "main", "rows": 5, "bytes": 60, "ann": False,
             "ann_bytes": 0},
            {"agent_id": "a", "model": "m:3", "set": "knowledge", "rows": 2, "bytes": 24,
             "ann": False, "ann_bytes": 0},
            {"agent_id": "b", "model": "m:3", "set": "main", "rows": None, "bytes": 0,
             "ann": False},  # loading
        ]
    )  # fmt: skip
    assert 'carrier_turn_stage_seconds_sum{stage="message"} 0.05' in text
    assert 'carrier_turn_stage_seconds_count{stage="message"} 2' in text
    assert 'carrier_turn_stage_seconds_sum{stage="state"} 0.01' in text
    assert 'carrier_vector_rows{agent="a",model="m:3",set="main"} 5' in text
    assert 'carrier_vector_rows{agent="a",model="m:3",set="knowledge"} 2' in text
    assert 'carrier_vector_bytes{agent="a",model="m:3",set="main",part="rows"} 60' in text
    assert 'carrier_vector_ann_ready{agent="a",model="m:3",set="main"} 0' in text
    assert 'agent="b"' not in text
