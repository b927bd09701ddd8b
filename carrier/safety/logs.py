"""Secrets kept out of the log: a filter that redacts each record before any handler writes it.

A vendor exception is the usual way a key reaches a log: litellm's ``AuthenticationError``
quotes the key it was given, and a turn that fails logs it (and the exceptions chained to it)
with ``log.exception``. The filter redacts the formatted message (its arguments included), the
formatted traceback with every chained exception, and the stack, through the process-wide
redactor (or the one it was given).

Filters on a logger only see records logged on that very logger, so :func:`install_log_redaction`
puts the filter on the root logger *and* on every handler that exists when it runs (the handlers
see records from every logger). Call it again after adding a handler; it is idempotent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from carrier.safety.redact import Redactor, current_redactor

__all__ = ["RedactingFilter", "install_log_redaction"]

_DONE = "_carrier_redacted"
_FORMATTER = logging.Formatter()
_local = threading.local()


class RedactingFilter(logging.Filter):
    """Redacts a record in place (message, exception text, stack) and always lets it pass.

    Without a ``redactor`` it uses the process-wide one at each record, so one installed early
    follows a redactor configured later.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _DONE, False) or getattr(_local, "busy", False):
            return True
        _local.busy = True  # a listener that logs must not loop back here
        try:
            self._redact(record, self.redactor or current_redactor())
        except Exception:  # a log line is never lost to the redactor
            pass
        finally:
            _local.busy = False
        setattr(record, _DONE, True)
        return True

    @staticmethod
    def _redact(record: logging.LogRecord, redactor: Redactor) -> None:
        count = 0
        kinds: set[str] = set()

        def clean(text: str) -> str | None:
            nonlocal count
            spans = redactor.spans(text)
            if not spans:
                return None
            count += len(spans)
            for *_, found in spans:
                kinds.update(found)
            return redactor.replace(text, spans, where=None).text

        try:
            message = record.getMessage()
        except Exception:  # bad arguments: the handler reports that itself
            message = None
        if message is not None and (text := clean(message)) is not None:
            record.msg, record.args = text, None
        if record.exc_info and record.exc_info[0] is not None:
            formatted = record.exc_text or _FORMATTER.formatException(record.exc_info)
            if (text := clean(formatted)) is not None:
                record.exc_text = text  # formatters use exc_text instead of exc_info when set
        elif record.exc_text and (text := clean(record.exc_text)) is not None:
            record.exc_text = text
        if record.stack_info and (text := clean(record.stack_info)) is not None:
            record.stack_info = text
        if count:
            redactor.report("log", count, kinds)


def install_log_redaction(
    redactor: Redactor | None = None, *, logger: logging.Logger | None = None
) -> Callable[[], None]:
    """Put a :class:`RedactingFilter` on ``logger`` (the root logger) and each of its handlers,
    and on the handlers of every other logger that has some; returns a function that takes them
    off again. Idempotent: a logger or handler that has one keeps it."""
    root = logger or logging.getLogger()
    targets: list[logging.Filterer] = [root, *root.handlers]
    if logger is None:
        for other in list(logging.Logger.manager.loggerDict.values()):
            if isinstance(other, logging.Logger):
                targets += other.handlers
    added: list[tuple[logging.Filterer, RedactingFilter]] = []
    for target in dict.fromkeys(targets):
        if any(isinstance(f, RedactingFilter) for f in target.filters):
            continue
        log_filter = RedactingFilter(redactor)
        target.addFilter(log_filter)
        added.append((target, log_filter))

    def uninstall() -> None:
        for target, log_filter in added:
            target.removeFilter(log_filter)

    return uninstall
