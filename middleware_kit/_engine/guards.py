"""Message guards: rewrite every list of messages before LangGraph commits it (redaction, PII, size limits).

A middleware that overrides ``guard_messages(messages, runtime)`` is a guard. The engine applies every guard (list
order, first listed first) to:

- the graph input's ``messages`` (and any other write to ``messages`` LangGraph reduces, e.g.
  ``Command(update=...)`` on resume, ``update_state``): the ``messages`` reducer of the merged schema is wrapped, so
  the first checkpoint never holds the raw input. ``runtime`` is None there (a reducer runs outside any node);
- every node's ``messages`` write (fused nodes, hook nodes, the tool node's ``ToolMessage``s and ``Command``
  updates) before the node returns it, so pending writes and every stream mode carry the guarded value.

A middleware that overrides ``guard_resume(value, runtime)`` is a resume guard: the value of an input
``Command(resume=...)`` (what a reviewer sends back) passes every resume guard before LangGraph stores it as the
``__resume__`` pending write, which it does before any hook runs.

With guards, the model is called with LangGraph's ``nostream`` tag: ``stream_mode="messages"`` then yields each
node's guarded messages whole instead of raw tokens. A message may pass a guard more than once (once in its node,
again in the reducer): a guard must be idempotent (guarding its own output changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, convert_to_messages
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit._engine.compat import transform_input
from middleware_kit.errors import HookReturnError

__all__ = ["Guards"]

GuardFn = Callable[[Sequence[AnyMessage], "Runtime[Any] | None"], "Sequence[AnyMessage] | None"]
ResumeGuardFn = Callable[[Any, "Runtime[Any] | None"], Any]


@dataclass(frozen=True, slots=True)
class Guards:
    """The guards of one agent, in list order; falsy when there are no message guards."""

    guards: tuple[tuple[str, GuardFn], ...] = ()
    resume_guards: tuple[tuple[str, ResumeGuardFn], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.guards)

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(owner for owner, _ in self.guards)

    def messages(self, messages: Sequence[Any], runtime: Runtime[Any] | None) -> list[Any]:
        """``messages`` through every guard, first listed first."""
        current: list[Any] = list(messages)
        for owner, guard in self.guards:
            result = guard(current, runtime)
            if result is None:
                continue
            if isinstance(result, (str, BaseMessage)) or not isinstance(result, Sequence) or not all(
                isinstance(m, BaseMessage) for m in result
            ):
                raise HookReturnError.for_guard(owner, result)
            current = list(result)
        return current

    def value(self, value: Any, runtime: Runtime[Any] | None) -> Any:
        """A ``messages`` write (a message, a list, message-likes) guarded; non-messages left as they are."""
        if isinstance(value, BaseMessage):
            return self.messages([value], runtime)
        if isinstance(value, (list, tuple)):
            return self.messages(convert_to_messages(value), runtime)
        return value

    def resume(self, value: Any) -> Any:
        """A resume value through every resume guard, first listed first."""
        for _owner, guard in self.resume_guards:
            guarded = guard(value, None)
            if guarded is not None:
                value = guarded
        return value

    def input(self, value: Any) -> Any:
        """An outside write (graph input, input ``Command``, ``update_state`` values) guarded."""
        if self.resume_guards and isinstance(value, Command) and value.resume is not None:
            resume = self.resume(value.resume)
            if resume is not value.resume:
                value = Command(graph=value.graph, update=value.update, resume=resume, goto=value.goto)
        return self.update(value, None)

    def update(self, output: Any, runtime: Runtime[Any] | None) -> Any:
        """A node's return value (None, a dict, a ``Command``, or a list of them) with its ``messages`` guarded."""
        if not self.guards or output is None:
            return output
        if isinstance(output, dict):
            if "messages" not in output:
                return output
            return {**output, "messages": self.value(output["messages"], runtime)}
        if isinstance(output, Command):
            update = output.update
            if isinstance(update, dict) and "messages" in update:
                update = self.update(update, runtime)
            elif isinstance(update, (list, tuple)) and any(
                isinstance(pair, tuple) and len(pair) == 2 and pair[0] == "messages" for pair in update
            ):
                update = [
                    (key, self.value(val, runtime)) if key == "messages" else (key, val) for key, val in update
                ]
            else:
                return output
            return Command(graph=output.graph, update=update, resume=output.resume, goto=output.goto)
        if isinstance(output, list):
            return [self.update(item, runtime) for item in output]
        return output

    def install(self, compiled: Any) -> None:
        """Guard the graph input of ``compiled`` before LangGraph stores it (its first checkpoint included), and an
        input ``Command``'s resume value (with resume guards); nothing when the agent has no guard of either kind."""
        if self.guards or self.resume_guards:
            transform_input(compiled, self.input)

    def reducer(self) -> Callable[[Any, Any], Any]:
        """``add_messages`` with the guards applied to the incoming messages (``runtime`` None)."""

        def guarded_add_messages(left: Any, right: Any) -> Any:
            return add_messages(left, self.value(right, None))

        return guarded_add_messages
