"""How much one agent does at once: the sizes of its turn gates and of its background queue,
and the longest wait it takes on before it answers overload.

The defaults were measured on a 2-core machine with one agent behind the API and a model that
answers in 1 s (``bench/throughput.py``; figures in ``docs/benchmarks.md``); the
``CARRIER_GATE_*``, ``CARRIER_MODEL_CONCURRENCY``, ``CARRIER_OVERLOAD_WAIT`` and
``CARRIER_BACKGROUND_*`` settings change them (:meth:`TurnLimits.from_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from carrier.gates import Gates

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = ["TurnLimits"]


@dataclass(frozen=True)
class TurnLimits:
    """Per agent. A gate size of 0 means no bound."""

    store: int = 8
    """Turns storing their message at once (the first write, before the room's lock)."""
    message: int = 16
    """Turns in the message stage's hooks and embedding at once: enough for the embedder to
    batch across turns, few enough that each is embedded at its idle pace."""
    state: int = 8
    """Turns composing their state (recent messages, recall, providers) at once."""
    evaluate: int = 8
    """Turns recording their replies and closing their message at once."""
    model: int = 0
    """Model calls for answers at once (0: as many as there are turns)."""
    overload_wait_s: float = 5.0
    """The longest a turn arriving now should queue at the gates; beyond it the agent is
    overloaded: the API answers 429, Discord shows typing and pauses."""
    background_workers: int = 2
    background_backlog: int = 64

    def gates(self) -> Gates:
        return Gates(
            {
                "store": self.store,
                "message": self.message,
                "state": self.state,
                "generate": self.model,
                "evaluate": self.evaluate,
            },
            limit_s=self.overload_wait_s,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> TurnLimits:
        return cls(
            store=settings.gate_store,
            message=settings.gate_message,
            state=settings.gate_state,
            evaluate=settings.gate_evaluate,
            model=settings.model_concurrency,
            overload_wait_s=settings.overload_wait,
            background_workers=settings.background_workers,
            background_backlog=settings.background_backlog,
        )
