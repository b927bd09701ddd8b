"""The safety layer: what a secret looks like and how it is kept from leaving Carrier.

``patterns`` (secret shapes), ``redact`` (the redactor and the process-wide one), ``stream``
(redacting text sent piece by piece), ``known`` (learning secret values at the edge), ``logs``
(the logging filter).
"""

from carrier.safety.redact import (
    MARKER,
    Redacted,
    RedactionEvent,
    Redactor,
    current_redactor,
    on_redaction,
    redact_text,
    set_redactor,
    using_redactor,
)

__all__ = [
    "MARKER",
    "Redacted",
    "RedactionEvent",
    "Redactor",
    "current_redactor",
    "on_redaction",
    "redact_text",
    "set_redactor",
    "using_redactor",
]
