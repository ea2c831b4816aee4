"""OpenTelemetry spans for agent runs, from langchain-core callbacks (the ``otel`` extra).

``OpenTelemetryCallbackHandler`` is a langchain-core callback handler: pass it in ``config={"callbacks": [h]}`` (or
``agent.with_config(callbacks=[h])``) and every run becomes a span of the GenAI semantic conventions:

==========================  ============================================  ============================================
run                         span name                                     attributes
==========================  ============================================  ============================================
the agent (root run)        ``invoke_agent {agent}``                      ``gen_ai.operation.name="invoke_agent"``,
                                                                          ``gen_ai.agent.name``,
                                                                          ``gen_ai.conversation.id`` (the thread id)
each chat model call        ``chat {model}``                              ``gen_ai.operation.name="chat"``,
                                                                          ``gen_ai.request.model``,
                                                                          ``gen_ai.provider.name``,
                                                                          ``gen_ai.usage.input_tokens``/``output_tokens``,
                                                                          ``gen_ai.response.finish_reasons``,
                                                                          ``gen_ai.response.model``
each tool call              ``execute_tool {tool}``                       ``gen_ai.operation.name="execute_tool"``,
                                                                          ``gen_ai.tool.name``, ``gen_ai.tool.call.id``
a hook run ``"{mw}.{hook}"``  ``{mw}.{hook}``                             ``middleware_kit.middleware``,
                                                                          ``middleware_kit.hook``
==========================  ============================================  ============================================

Other runs (graph nodes, LangGraph internals) get no span; their children attach to the nearest traced ancestor,
so a tool span sits under the agent span (or under the hook run that called it), and parallel tool calls are
siblings. Message contents, tool arguments and results are *not* recorded unless ``capture_content=True``
(``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``).
A run that raises ends its span with status ERROR and the exception recorded; an interrupt (human in the loop) is
not an error: the span ends with ``middleware_kit.interrupted=true``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

__all__ = ["OTEL_EXTRA_HINT", "OpenTelemetryCallbackHandler"]

OTEL_EXTRA_HINT: Final = "pip install 'middleware_kit[otel]' (opentelemetry-api and opentelemetry-sdk)"
_TRACER_NAME: Final = "middleware_kit"
_HOOK_TAG: Final = "middleware_kit:hook"  # _engine.tracing.HOOK_TAG (not imported: this module stays light)


def _otel_trace() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"OpenTelemetryCallbackHandler needs OpenTelemetry, which is not installed: {OTEL_EXTRA_HINT}"
        ) from exc
    return trace


def _is_interrupt(error: BaseException) -> bool:
    from langgraph.errors import GraphBubbleUp

    return isinstance(error, GraphBubbleUp)


def _model_name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str | None:
    params = kwargs.get("invocation_params") or {}
    metadata = kwargs.get("metadata") or {}
    for value in (params.get("model"), params.get("model_name"), metadata.get("ls_model_name")):
        if value:
            return str(value)
    return None


_HOOKS: Final = frozenset({
    "before_agent", "before_model", "modify_model_request", "wrap_model_call", "after_model", "before_tool",
    "wrap_tool_call", "after_tool", "after_agent", "guard_messages",
})


def _hook_run(
    name: str, tags: Sequence[str] | None = None, metadata: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """``("Retry", "wrap_model_call")`` for a run named ``"Retry.wrap_model_call"``; None for any other run.

    A graph node holding one hook has the hook's name too: it is not a hook run (the engine's hook run inside it,
    tagged ``middleware_kit:hook``, is), so the hook gets one span, not two.
    """
    middleware, _, hook = name.rpartition(".")
    if not middleware or hook not in _HOOKS:
        return None
    if (metadata or {}).get("langgraph_node") == name and _HOOK_TAG not in (tags or ()):
        return None
    return middleware, hook


def _messages_json(messages: Sequence[BaseMessage]) -> str:
    return json.dumps([{"role": m.type, "content": m.content} for m in messages], default=str)


class OpenTelemetryCallbackHandler(BaseCallbackHandler):
    """Turns langchain-core runs (agent, chat model calls, tool calls, hook runs) into OpenTelemetry spans.

    Args:
        tracer_provider: Where spans go; default: OpenTelemetry's global provider.
        capture_content: Record message contents, tool arguments and results (off by default: they may hold PII).
        agent_span: Open a span for the root run (``invoke_agent``); turn off when your app opens its own.

    One handler serves any number of concurrent runs (spans are kept per langchain run id, under a lock). It runs
    inline under ``ainvoke`` too (``run_inline``), so span order follows the run.
    """

    run_inline = True  # never hop to an executor under ainvoke: spans open and close in run order

    def __init__(
        self, *, tracer_provider: Any = None, capture_content: bool = False, agent_span: bool = True
    ) -> None:
        trace = _otel_trace()
        self._trace = trace
        self._tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self.agent_span = agent_span
        self._spans: dict[UUID, Any] = {}
        self._parent: dict[UUID, UUID | None] = {}  # untraced run -> nearest traced ancestor (or None)
        self._lock = threading.Lock()

    # -- bookkeeping -------------------------------------------------------------------------------------------------
    def _anchor(self, parent_run_id: UUID | None) -> UUID | None:
        """The traced run a child of ``parent_run_id`` nests under."""
        if parent_run_id is None or parent_run_id in self._spans:
            return parent_run_id
        return self._parent.get(parent_run_id)

    def _start(
        self, run_id: UUID, parent_run_id: UUID | None, name: str, attributes: dict[str, Any], *, client: bool = False
    ) -> None:
        trace = self._trace
        with self._lock:
            anchor = self._anchor(parent_run_id)
            parent_span = self._spans.get(anchor) if anchor is not None else None
        context = trace.set_span_in_context(parent_span) if parent_span is not None else None
        kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
        span = self._tracer.start_span(name, context=context, kind=kind,
                                       attributes={k: v for k, v in attributes.items() if v is not None})
        with self._lock:
            self._spans[run_id] = span

    def _skip(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            self._parent[run_id] = self._anchor(parent_run_id)

    def _finish(
        self, run_id: UUID, error: BaseException | None = None, attributes: Mapping[str, Any] | None = None
    ) -> None:
        with self._lock:
            span = self._spans.pop(run_id, None)
            self._parent.pop(run_id, None)
        if span is None:
            return
        for key, value in (attributes or {}).items():
            if value is not None:
                span.set_attribute(key, value)
        if error is not None:
            if _is_interrupt(error):
                span.set_attribute("middleware_kit.interrupted", True)
            else:
                from opentelemetry.trace import Status, StatusCode

                span.record_exception(error)
                span.set_attribute("error.type", type(error).__qualname__)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:300]))
        span.end()

    # -- chains: the agent (root) and hook runs ----------------------------------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "")
        metadata = metadata or {}
        if parent_run_id is None and self.agent_span:
            agent = name or "agent"
            thread = metadata.get("thread_id") or (kwargs.get("configurable") or {}).get("thread_id")
            self._start(run_id, None, f"invoke_agent {agent}", {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": None if thread is None else str(thread),
            })
        elif (hook_run := _hook_run(name, tags, metadata)) is not None:
            middleware, hook = hook_run
            self._start(run_id, parent_run_id, name, {
                "middleware_kit.middleware": middleware,
                "middleware_kit.hook": hook,
            })
        else:
            self._skip(run_id, parent_run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, error)

    # -- chat model calls --------------------------------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        model = _model_name(serialized, {**kwargs, "metadata": metadata or {}})
        provider = (metadata or {}).get("ls_provider")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": provider,
        }
        if self.capture_content and messages:
            attributes["gen_ai.input.messages"] = _messages_json(messages[0])
        self._start(run_id, parent_run_id, f"chat {model}" if model else "chat", attributes, client=True)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        attributes: dict[str, Any] = {}
        reasons: list[str] = []
        inputs = outputs = 0
        counted = False
        outputs_json: list[BaseMessage] = []
        for generation in (g for gens in response.generations for g in gens):
            info = generation.generation_info or {}
            message: Any = getattr(generation, "message", None)
            meta: Mapping[str, Any] = getattr(message, "response_metadata", None) or {}
            reason = info.get("finish_reason") or meta.get("finish_reason") or meta.get("stop_reason")
            if reason:
                reasons.append(str(reason))
            usage = getattr(message, "usage_metadata", None)
            if usage:
                counted = True
                inputs += int(usage.get("input_tokens", 0))
                outputs += int(usage.get("output_tokens", 0))
            if meta.get("model_name") or meta.get("model"):
                attributes["gen_ai.response.model"] = str(meta.get("model_name") or meta.get("model"))
            if message is not None:
                outputs_json.append(message)
        if counted:
            attributes["gen_ai.usage.input_tokens"] = inputs
            attributes["gen_ai.usage.output_tokens"] = outputs
        if reasons:
            attributes["gen_ai.response.finish_reasons"] = reasons
        if self.capture_content and outputs_json:
            attributes["gen_ai.output.messages"] = _messages_json(outputs_json)
        self._finish(run_id, attributes=attributes)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, error)

    # -- tool calls --------------------------------------------------------------------------------------------------
    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        tool = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": kwargs.get("tool_call_id"),
            "gen_ai.tool.description": (serialized or {}).get("description") or None,
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(inputs, default=str) if inputs else input_str
        self._start(run_id, parent_run_id, f"execute_tool {tool}", attributes)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        attributes: dict[str, Any] = {}
        if self.capture_content:
            attributes["gen_ai.tool.call.result"] = str(getattr(output, "content", output))
        self._finish(run_id, attributes=attributes)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._finish(run_id, error)
