"""Who is acting, for the events recorded deep inside a call (internal to the hosts).

The API knows its caller only after the auth dependency ran, and the code that records an agent's
start or a forget is far below it and takes no "who" argument. So the edge says who acts, once,
for everything the current task does: the audit middleware around each API call (reading the
principal the auth dependency leaves on ``request.state``), a command around its work
(``cli:<user>``), the retention job (``system``). :func:`current_actor` reads it; outside any of
them it is None.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["acting", "cli_actor", "current_actor"]

_ACTOR: ContextVar[Callable[[], str | None] | None] = ContextVar(
    "carrier_audit_actor", default=None
)


@contextmanager
def acting(actor: str | Callable[[], str | None]) -> Iterator[None]:
    """Within the block (and the tasks it starts), :func:`current_actor` is ``actor``; a callable
    is asked each time (the API's caller is known only once the auth dependency ran)."""
    token = _ACTOR.set(actor if callable(actor) else (lambda: actor))
    try:
        yield
    finally:
        _ACTOR.reset(token)


def current_actor() -> str | None:
    """Who acts in the current task, or None when no edge said."""
    get = _ACTOR.get()
    return get() if get is not None else None


def cli_actor() -> str:
    """``cli:<user>``: the operating-system user running a ``carrier`` command."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (a container)
        user = "unknown"
    return f"cli:{user}"
