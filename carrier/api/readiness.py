"""Whether the process has finished starting, for ``GET /health/ready``.

``carrier run`` and ``carrier serve`` start their agents before the API listens, so by default
start-up is over once the API answers. A host that serves the API sooner (agents restored in the
background) passes ``create_app(..., startup=Startup.pending("restoring agents"))`` and calls
:meth:`Startup.finish` when done: until then an orchestrator's readiness probe gets 503 and sends
no traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Startup"]


@dataclass
class Startup:
    """Start-up's progress: ``waiting_for`` names what is still under way (None: finished)."""

    waiting_for: str | None = None

    @classmethod
    def pending(cls, what: str) -> Startup:
        return cls(waiting_for=what)

    @property
    def done(self) -> bool:
        return self.waiting_for is None

    def begin(self, what: str) -> None:
        self.waiting_for = what

    def finish(self) -> None:
        self.waiting_for = None
