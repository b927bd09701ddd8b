"""How much one agent does at once: the sizes of its turn gates and of its background queue,
and the longest wait it takes on before it answers overload.

The defaults, and why (measured on the 2-core machine, one agent, the real embedder and SQLite,
a model answering in 1 s, 50 to 200 closed-loop conversations, gated and ungated runs
alternated; the machine was shared, so runs of one setting varied by ±30%):

* the embedder batches what is waiting and encodes one batch at a time, so it is a queue of its
  own: a message gate of 16 gave about half the turns/s of no gate when a batch could hold 64
  texts; 64 lets the next batches form while one is encoded (a turn's texts now go 16 to a
  batch, ``carrier.memory.embedder.TURN_BATCH``);
* no store gate: a message's first write is what makes it safe, and a turn queued before it
  would hold the message only in memory;
* state and evaluate at 8: their queues stayed under a quarter of a second at 200
  conversations, and their stage times fell by about as much as the queue added;
* throughput was the same with and without these gates, within the noise: the limit is the
  embedder's CPU; what the gates add is bounded work per stage and a measure of the wait,
  which the clients use to answer overload.

``CARRIER_GATE_*``, ``CARRIER_MODEL_CONCURRENCY``, ``CARRIER_OVERLOAD_WAIT`` and
``CARRIER_BACKGROUND_*`` change them (:meth:`TurnLimits.from_settings`).
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

    store: int = 0
    """Turns storing their message at once (the first write, before the room's lock); no bound
    by default, so that no message waits unsaved."""
    message: int = 64
    """Turns in the message stage's hooks and embedding at once: at least the embedder's batch,
    so that it can batch across turns."""
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
    background_patience_s: float = 2.0
    """The longest a background job waits for turns to leave their stages of CPU work before
    it starts anyway (:mod:`carrier.background`)."""

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
            waiting_on_model=("generate",),
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
            background_patience_s=settings.background_patience,
        )
