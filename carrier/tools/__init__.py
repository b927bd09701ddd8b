"""HTTP tools: operator-registered endpoints the model can call through tool calling, kept from
being turned against the host.

A :class:`ToolSpec` (``spec``) names an endpoint, its JSON-schema parameters, headers given as
references to environment variables, and who may set it off. :func:`tools_plugin` (``gate``)
turns the specs that apply to an agent into actions the generator offers the model as tools;
a call passes the rules of ``gate`` (who, how often, approval) and ``call`` (the operator's rules
for secrets and addresses from ``policy``, the egress guard of :mod:`carrier.safety.egress`),
and its output goes back to the model wrapped as untrusted data. ``approvals`` parks calls that
need a human as jobs and runs them once approved; ``records`` writes the audit events.
See ``docs/security.md`` ("Tools").
"""

from carrier.tools.call import (
    MAX_ERROR_BODY,
    MAX_OUTPUT_CHARS,
    ToolCallError,
    call_tool,
    wrap_untrusted,
)
from carrier.tools.gate import tool_action, tools_plugin
from carrier.tools.policy import ToolPolicy
from carrier.tools.rules import CallLimiter, Sender
from carrier.tools.spec import ToolSpec

__all__ = [
    "MAX_ERROR_BODY",
    "MAX_OUTPUT_CHARS",
    "CallLimiter",
    "Sender",
    "ToolCallError",
    "ToolPolicy",
    "ToolSpec",
    "call_tool",
    "tool_action",
    "tools_plugin",
    "wrap_untrusted",
]
