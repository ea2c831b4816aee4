"""``ModelRefusalMiddleware``: treat a provider's explicit refusal as an error, not as a final answer.

Providers report refusals as successful responses (Anthropic's ``stop_reason="refusal"``, OpenAI's ``refusal``
field); langchain-core represents both as a standard ``{"type": "refusal"}`` content block. Without this middleware
the refusal ends the run as if it were the answer. With it, a response holding a refusal block raises
``langchain_core.exceptions.ModelRefusalError`` (its ``raw_message`` is the refusing message), which an outer
``ModelFallbackMiddleware`` catches to try another model (list the fallback *before* this middleware, so it is the
outer layer).

A refusal that failed structured-output parsing first (a ``ProviderStrategy`` answer holding no JSON, only the
refusal) raises ``ModelRefusalError`` too, instead of ``StructuredOutputValidationError``, as in LangChain 1.5.

It does not infer refusals from text ("I can't help with that" is an answer), and it does not retry.
``ModelRefusalError`` is not retryable: ``ModelRetryMiddleware`` should not retry the same request.

Beyond LangChain 1.5's version: a ``model_refused`` event on the custom stream (``{"event": "model_refused",
"middleware", "refusal", "category"}``) before the error is raised, so a UI that already streamed the refusal's
tokens can retract them. Streaming caveat: tokens of the refusing response may already have been streamed.
"""

from __future__ import annotations

from typing import Any

from langchain_core.exceptions import ModelRefusalError
from langchain_core.messages import AIMessage

from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.structured_output import StructuredOutputValidationError
from middleware_kit.trace_policy import TracePolicy, omit_payload
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = ["ModelRefusalMiddleware", "find_refusal"]


def find_refusal(message: object) -> dict[str, Any] | None:
    """The first standard refusal block of an ``AIMessage`` (None when it has none, or is not an ``AIMessage``)."""
    if not isinstance(message, AIMessage):
        return None
    try:
        blocks = message.content_blocks
    except Exception:  # an unparseable provider payload is not a refusal
        return None
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "refusal":
            return dict(block)
    return None


class ModelRefusalMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware):
    """Raise ``ModelRefusalError`` for a model response containing a standard refusal block.

    Takes no arguments. List it after (inside) a ``ModelFallbackMiddleware`` so the fallback can catch the error.
    """

    trace_policy = TracePolicy(process_inputs=omit_payload)
    """The hook runs' traces keep their timing but not the request, as in LangChain (the messages stay on the model's
    own run)."""

    stream_holdback = "message"
    """A refusal is known once the whole answer is there: no stream carries it before (docs/streaming.md)."""

    def __init__(self) -> None:
        pass

    def _check(self, request: ModelRequest[Any], response: ModelResponse[Any]) -> ModelResponse[Any]:
        for message in response.result:
            self._raise_if_refused(request, message)
        return response

    def _raise_if_refused(self, request: ModelRequest[Any], message: object) -> None:
        refusal = find_refusal(message)
        if refusal is not None:
            emit(
                request.runtime,
                {
                    "event": "model_refused",
                    "middleware": self.name,
                    "refusal": refusal.get("refusal", ""),
                    "category": (refusal.get("extras") or {}).get("category"),
                },
            )
            raise ModelRefusalError.from_refusal(refusal, raw_message=message)  # type: ignore[arg-type]

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Call the model; raise ``ModelRefusalError`` if it refused (a flow hook: one body for invoke and ainvoke)."""
        try:
            response = yield request
        except StructuredOutputValidationError as exc:
            self._raise_if_refused(request, exc.ai_message)
            raise
        return self._check(request, response)
