"""Prometheus metrics in the text exposition format, written by hand (no dependency).

Turns are counted by an ``on_turn_end`` hook registered in every agent (:meth:`Metrics.plugin`),
so turns from every client count, not only the API's. Failed turns and server errors are counted
where they are caught. Redactions are heard from every redactor in the process
(:func:`carrier.safety.on_redaction`), by exit.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence

from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin
from carrier.safety.redact import RedactionEvent, on_redaction
from carrier.types import Usage, utcnow

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    if math.isinf(value):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Metrics:
    """Counters and one histogram for the agent API and the turns of every agent."""

    def __init__(self) -> None:
        self.turns: dict[tuple[str, str], int] = defaultdict(int)
        self.buckets = [0] * len(BUCKETS)
        self.seconds_sum = 0.0
        self.seconds_count = 0
        self.errors: dict[str, int] = defaultdict(int)
        self.tokens: dict[str, int] = {"prompt": 0, "completion": 0}
        self.cost_usd = 0.0
        self.stage_ms: dict[str, float] = defaultdict(float)
        self.stage_count: dict[str, int] = defaultdict(int)
        self.redactions: dict[str, int] = defaultdict(int)
        self.started = time.time()
        on_redaction(self.redacted)  # held weakly: a Metrics that is dropped stops listening

    def observe_turn(
        self,
        agent: str,
        status: str,
        seconds: float,
        usage: Usage,
        stages_ms: dict[str, float] | None = None,
    ) -> None:
        self.turns[(agent, status)] += 1
        for stage, ms in (stages_ms or {}).items():
            self.stage_ms[stage] += ms
            self.stage_count[stage] += 1
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1
        self.seconds_sum += seconds
        self.seconds_count += 1
        self.tokens["prompt"] += usage.prompt_tokens
        self.tokens["completion"] += usage.completion_tokens
        self.cost_usd += usage.cost_usd

    def error(self, source: str) -> None:
        """Count an error: ``turn`` (a turn raised) or ``http`` (a request hit a bug)."""
        self.errors[source] += 1

    def redacted(self, event: RedactionEvent) -> None:
        """Count secrets replaced, by where they were about to go (``model``, ``api``, ``log``...)."""
        self.redactions[event.where] += event.count

    def plugin(self) -> Plugin:
        """A plugin whose ``on_turn_end`` hook observes every finished turn."""

        async def observe(point: HookPoint, turn: Turn) -> HookResult | None:
            seconds = max(0.0, (utcnow() - turn.message.received_at).total_seconds())
            self.observe_turn(
                turn.runtime.agent_id,
                str(turn.final_status),
                seconds,
                turn.usage,
                turn.trace.get("timings_ms"),
            )
            return None

        return Plugin(
            name="carrier-api-metrics",
            hooks=[(HookPoint.ON_TURN_END, observe)],
            description="Counts turns, their duration, tokens and cost for GET /metrics.",
        )

    def render(self, vectors: Sequence[Mapping[str, object]] = ()) -> str:
        """The metrics; ``vectors``: :meth:`~carrier.memory.base.Store.vector_stats`."""
        lines = [
            "# HELP carrier_turns_total Turns finished, by agent and final message status.",
            "# TYPE carrier_turns_total counter",
        ]
        for (agent, status), count in sorted(self.turns.items()):
            lines.append(
                f'carrier_turns_total{{agent="{_label(agent)}",status="{_label(status)}"}} {count}'
            )
        lines += [
            "# HELP carrier_turn_seconds Time from a message's arrival to the end of its turn.",
            "# TYPE carrier_turn_seconds histogram",
        ]
        for bound, count in zip(BUCKETS, self.buckets, strict=True):
            lines.append(f'carrier_turn_seconds_bucket{{le="{_num(bound)}"}} {count}')
        lines += [
            f'carrier_turn_seconds_bucket{{le="+Inf"}} {self.seconds_count}',
            f"carrier_turn_seconds_sum {_num(self.seconds_sum)}",
            f"carrier_turn_seconds_count {self.seconds_count}",
            "# HELP carrier_errors_total Errors: turns that raised, requests that hit a bug.",
            "# TYPE carrier_errors_total counter",
        ]
        for source in sorted({"turn", "http", *self.errors}):
            lines.append(f'carrier_errors_total{{source="{_label(source)}"}} {self.errors[source]}')
        lines += [
            "# HELP carrier_redactions_total Secrets replaced before text left Carrier, by exit.",
            "# TYPE carrier_redactions_total counter",
            *(
                f'carrier_redactions_total{{where="{_label(where)}"}} {count}'
                for where, count in sorted(self.redactions.items())
            ),
            "# HELP carrier_tokens_total Model tokens used, by kind.",
            "# TYPE carrier_tokens_total counter",
            *(f'carrier_tokens_total{{kind="{k}"}} {v}' for k, v in sorted(self.tokens.items())),
            "# HELP carrier_cost_usd_total Model cost in US dollars.",
            "# TYPE carrier_cost_usd_total counter",
            f"carrier_cost_usd_total {_num(self.cost_usd)}",
            "# HELP carrier_turn_stage_seconds Where turns spend their time, by pipeline stage.",
            "# TYPE carrier_turn_stage_seconds summary",
        ]
        for stage in sorted(self.stage_count):
            label = f'{{stage="{_label(stage)}"}}'
            lines += [
                f"carrier_turn_stage_seconds_sum{label} {_num(self.stage_ms[stage] / 1000)}",
                f"carrier_turn_stage_seconds_count{label} {self.stage_count[stage]}",
            ]
        lines += [
            "# HELP carrier_vector_rows Memories in the in-process vector index, by set (main: all).",
            "# TYPE carrier_vector_rows gauge",
            "# HELP carrier_vector_bytes Memory the vector index holds (rows, ANN graph).",
            "# TYPE carrier_vector_bytes gauge",
            "# HELP carrier_vector_ann_ready 1 once the ANN index answers (else searches are exact).",
            "# TYPE carrier_vector_ann_ready gauge",
        ]
        for entry in vectors:
            label = (
                f'agent="{_label(str(entry["agent_id"]))}",model="{_label(str(entry["model"]))}",'
                f'set="{_label(str(entry["set"]))}"'
            )
            if entry["rows"] is None:  # still loading
                continue
            lines += [
                f"carrier_vector_rows{{{label}}} {entry['rows']}",
                f'carrier_vector_bytes{{{label},part="rows"}} {entry["bytes"]}',
                f'carrier_vector_bytes{{{label},part="ann"}} {entry["ann_bytes"]}',
                f"carrier_vector_ann_ready{{{label}}} {int(bool(entry['ann']))}",
            ]
        return "\n".join(lines) + "\n"
