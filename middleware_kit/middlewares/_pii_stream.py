"""What ``PIIMiddleware`` registers as ``transformers``: a LangGraph stream transformer that rewrites the wire.

``agent.stream_events(version="v3")`` / ``astream_events`` carry surfaces no state write guards: the tool channel
(``tool-started`` inputs, which hold the real values a ``placeholder`` strategy gives the tool; ``tool-output-delta``;
``tool-finished`` outputs, before the tool node's write is guarded; ``tool-error`` texts), and the token deltas of
model calls made where no guard runs (an agent without ``PIIMiddleware`` called inside a tool: LangGraph builds one
transformer per subgraph scope from the same factories). :class:`PIIStreamRedactor` rewrites them in place, before
LangGraph's own transformers project them (``before_builtins``), with the middleware's strategy (``block`` raises
:class:`~middleware_kit.middlewares.pii.PIIDetectionError`, which fails the stream).

Streamed text (text, reasoning and tool-call-argument deltas, string tool-output deltas) is held back by
``lookback`` characters per content block, so a value split across deltas is caught before any of it is released;
the block's finish event carries the whole text, rewritten. The graph's state is not touched here: what is stored is
the guard's business (``PIIMiddleware.guard_messages``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.stream import StreamTransformer

__all__ = ["DEFAULT_LOOKBACK", "PIIStreamRedactor"]

DEFAULT_LOOKBACK = 128
"""Characters of streamed text held back per content block (the longest value the built-in detectors find is well
under it; a longer one is still rewritten in the block's finish event)."""

_DELTA_FIELDS = {"text-delta": "text", "reasoning-delta": "reasoning", "tool-call-delta": "args"}
_FINISH_FIELDS = {"text": "text", "reasoning": "reasoning"}
_CALL_BLOCKS = frozenset({"tool_call", "server_tool_call", "invalid_tool_call", "tool_call_chunk"})


class PIIStreamRedactor(StreamTransformer):
    """Rewrites the PII in the ``messages``, ``tools`` and ``values`` events of one stream scope, in place.

    Args:
        scope: The stream scope (LangGraph passes it).
        redact: ``text -> text`` with the values replaced (raises to block).
        lookback: Characters of streamed text held back per content block.
    """

    before_builtins: ClassVar[bool] = True
    required_stream_modes: ClassVar[tuple[str, ...]] = ("messages", "tools", "values")

    def __init__(
        self, scope: tuple[str, ...] = (), *, redact: Callable[[str], str], lookback: int = DEFAULT_LOOKBACK
    ) -> None:
        super().__init__(scope)
        self._redact = redact
        self._lookback = lookback
        self._held: dict[tuple[str, Any], str] = {}
        """Text not released yet: ``(run id, block index)`` for model output, ``("tool", call id)`` for tools."""

    def init(self) -> dict[str, Any]:
        return {}  # no projection: events are rewritten in place

    def process(self, event: Any) -> bool:
        params = event.get("params") or {}
        data = params.get("data")
        method = event.get("method")
        if method == "values" and data is not None:
            params["data"] = self.value(data)
        elif method == "tools" and isinstance(data, dict):
            self._tool_event(data)
        elif method == "messages" and isinstance(data, tuple) and len(data) == 2:
            payload, metadata = data
            if isinstance(payload, BaseMessage):
                params["data"] = (self.value(payload), metadata)
            elif isinstance(payload, dict):
                run = str((metadata or {}).get("run_id") or "") if isinstance(metadata, dict) else ""
                self._message_event(payload, run)
        return True

    def finalize(self) -> None:
        self._held.clear()

    def fail(self, err: BaseException) -> None:
        self._held.clear()

    # -- values ------------------------------------------------------------------------------------------------
    def value(self, value: Any) -> Any:
        """``value`` with every string inside rewritten (messages: content and tool-call arguments); the same object
        when nothing changed."""
        if isinstance(value, str):
            return self._redact(value) if value else value
        if isinstance(value, BaseMessage):
            return self._message(value)
        if isinstance(value, dict):
            items = {k: self.value(v) for k, v in value.items()}
            return items if any(items[k] is not value[k] for k in value) else value
        if isinstance(value, list | tuple):
            seq = [self.value(v) for v in value]
            if all(a is b for a, b in zip(seq, value, strict=True)):
                return value
            return seq if isinstance(value, list) else tuple(seq)
        return value

    def _message(self, message: BaseMessage) -> BaseMessage:
        update: dict[str, Any] = {}
        content = self.value(message.content)
        if content is not message.content:
            update["content"] = content
        if isinstance(message, AIMessage):
            for name in ("tool_calls", "invalid_tool_calls"):
                calls = getattr(message, name)
                new = self.value(calls)
                if new is not calls:
                    update[name] = new
        return message.model_copy(update=update) if update else message

    # -- streamed text -------------------------------------------------------------------------------------------
    def _release(self, key: tuple[str, Any], text: str) -> str:
        """What of the held text plus ``text`` may go out now (rewritten); the last ``lookback`` characters wait."""
        combined = self._redact(self._held.get(key, "") + text)
        cut = max(0, len(combined) - self._lookback)
        self._held[key] = combined[cut:]
        return combined[:cut]

    def _message_event(self, payload: dict[str, Any], run: str) -> None:
        kind = payload.get("event")
        key = (run, payload.get("index", 0))
        if kind == "content-block-delta":
            delta = payload.get("delta")
            if not isinstance(delta, dict):
                return
            field = _DELTA_FIELDS.get(str(delta.get("type")))
            if field is not None and isinstance(delta.get(field), str):
                delta[field] = self._release(key, delta[field])
            elif delta.get("type") == "block-delta" and isinstance(delta.get("fields"), dict):
                fields = delta["fields"]
                if isinstance(fields.get("args"), str):  # a snapshot of the arguments so far: it replaces them
                    self._held.pop(key, None)
                    fields["args"] = self._release(key, fields["args"])
        elif kind == "content-block-finish":
            self._held.pop(key, None)
            content = payload.get("content")
            if isinstance(content, dict):
                field = _FINISH_FIELDS.get(str(content.get("type")))
                if field is not None and isinstance(content.get(field), str):
                    content[field] = self._redact(content[field])
                elif content.get("type") in _CALL_BLOCKS and "args" in content:
                    content["args"] = self.value(content["args"])
        elif kind in ("message-finish", "error"):
            for stale in [k for k in self._held if k[0] == run]:
                del self._held[stale]

    # -- the tool channel ----------------------------------------------------------------------------------------
    def _tool_event(self, data: dict[str, Any]) -> None:
        kind = data.get("event")
        call_id = data.get("tool_call_id")
        key = ("tool", call_id if isinstance(call_id, str) else "")
        if kind == "tool-started" and "input" in data:
            data["input"] = self.value(data["input"])
        elif kind == "tool-output-delta":
            delta = data.get("delta")
            data["delta"] = self._release(key, delta) if isinstance(delta, str) else self.value(delta)
        elif kind == "tool-finished":
            self._held.pop(key, None)
            if "output" in data:
                data["output"] = self.value(data["output"])
        elif kind == "tool-error":
            self._held.pop(key, None)
            if isinstance(data.get("message"), str):
                data["message"] = self._redact(data["message"])
