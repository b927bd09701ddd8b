"""Language models: the ModelProvider interface, the litellm provider, the offline provider,
test fakes, the response format and its parsers.

Importing this package imports neither litellm nor torch: the litellm provider imports litellm on
its first call, and the offline provider only needs an ``Embedder`` passed in.
"""

from carrier.llm.base import ChatMessage, ModelProvider, ModelRequest, ModelResult
from carrier.llm.deadline import current_deadline, model_deadline
from carrier.llm.failures import (
    CUT_MARKER,
    FAILURE_NOTICE,
    MalformedAnswer,
    ModelFailure,
    StreamInterrupted,
)
from carrier.llm.fake import FunctionModel, ScriptedModel, ScriptExhausted
from carrier.llm.litellm_provider import LiteLLMProvider, load_litellm
from carrier.llm.models import credential_env_vars, has_credentials, resolve_model, vendor_of
from carrier.llm.offline import NO_MODEL_MESSAGE, OfflineProvider
from carrier.llm.parse import (
    REPAIR_PROMPT,
    ParsedResponse,
    format_instructions,
    parse_json_list,
    parse_response,
    parse_should_respond,
    render_response,
    repair_prompt,
)
from carrier.llm.resilience import Backoff, BreakerState, CircuitBreaker, retry_async

__all__ = [
    "CUT_MARKER",
    "FAILURE_NOTICE",
    "NO_MODEL_MESSAGE",
    "REPAIR_PROMPT",
    "Backoff",
    "BreakerState",
    "ChatMessage",
    "CircuitBreaker",
    "FunctionModel",
    "LiteLLMProvider",
    "MalformedAnswer",
    "ModelFailure",
    "ModelProvider",
    "ModelRequest",
    "ModelResult",
    "OfflineProvider",
    "ParsedResponse",
    "ScriptExhausted",
    "ScriptedModel",
    "StreamInterrupted",
    "credential_env_vars",
    "current_deadline",
    "format_instructions",
    "has_credentials",
    "load_litellm",
    "model_deadline",
    "parse_json_list",
    "parse_response",
    "parse_should_respond",
    "render_response",
    "repair_prompt",
    "resolve_model",
    "retry_async",
    "vendor_of",
]
