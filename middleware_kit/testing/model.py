"""``ScriptedChatModel``: a real ``BaseChatModel`` that replays a script instead of calling a provider."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["ScriptExhaustedError", "ScriptedCall", "ScriptedChatModel", "tool_call"]

Step = AIMessage | str | BaseException | Callable[[list[BaseMessage]], "AIMessage | str"]
_ids = itertools.count(1)


def tool_call(name: str, args: dict[str, Any] | None = None, id: str | None = None) -> ToolCall:
    """A tool call for a scripted ``AIMessage(tool_calls=[...])``; the id is generated when not given."""
    return ToolCall(name=name, args=dict(args or {}), id=id or f"call_{next(_ids)}", type="tool_call")


class ScriptExhaustedError(AssertionError):
    """The scripted model was called more times than it has responses; the message names the model (its ``name=``),
    so a test with several scripted models says which one ran out."""


@dataclass(frozen=True)
class ScriptedCall:
    """One recorded call of the model."""

    messages: tuple[BaseMessage, ...]
    """What the model received (system message first, if any)."""
    tools: tuple[str, ...]
    """Names of the tools bound for this call."""
    kwargs: dict[str, Any]
    """Other bound arguments (``tool_choice``, model settings)."""


class ScriptedChatModel(BaseChatModel):
    """Replays ``responses`` in order, one per call; records every call in ``calls``.

    A step is an ``AIMessage`` (returned as a fresh copy, so one script can serve many runs), a ``str`` (an
    ``AIMessage`` with that text), an exception instance (raised), or a callable ``(messages) -> AIMessage | str``
    (for replies that depend on the request, e.g. under concurrency). When the script runs out, ``default`` is used
    if given, else :class:`ScriptExhaustedError` is raised. ``cycle=True`` loops over the script.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    responses: list[Any] = Field(default_factory=list)
    default: Any = None
    cycle: bool = False
    model_name: str = "scripted"

    _cursor: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _calls: list[ScriptedCall] = PrivateAttr(default_factory=list)

    def __init__(self, responses: Sequence[Step] = (), **kwargs: Any) -> None:
        super().__init__(responses=list(responses), **kwargs)  # type: ignore[call-arg]

    @property
    def _llm_type(self) -> str:
        return "middleware_kit-scripted"

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, in order."""
        with self._lock:
            return list(self._calls)

    @property
    def call_count(self) -> int:
        with self._lock:
            return len(self._calls)

    def reset(self) -> None:
        """Rewind the script and forget the recorded calls."""
        with self._lock:
            self._cursor = 0
            self._calls.clear()

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _next_step(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> Any:
        tools = tuple(t.get("function", t).get("name", "?") for t in kwargs.get("tools") or ())
        other = {k: v for k, v in kwargs.items() if k != "tools"}
        with self._lock:
            n = len(self._calls)
            self._calls.append(ScriptedCall(tuple(messages), tools, other))
            if self._cursor < len(self.responses):
                step = self.responses[self._cursor]
                self._cursor += 1
            elif self.cycle and self.responses:
                step = self.responses[0]
                self._cursor = 1
            elif self.default is not None:
                step = self.default
            else:
                who = f"(name={self.name!r})" if self.name else " (unnamed)"
                raise ScriptExhaustedError(
                    f"ScriptedChatModel{who} was called {n + 1} time(s) but scripted with {len(self.responses)} "
                    f"response(s). Add responses, pass default=..., or cycle=True."
                )
        return step

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        step = self._next_step(messages, kwargs)
        if isinstance(step, BaseException):
            raise step
        if callable(step) and not isinstance(step, AIMessage):
            step = step(messages)
        if isinstance(step, str):
            message = AIMessage(content=step)
        elif isinstance(step, AIMessage):
            message = step.model_copy(deep=True)
        else:
            raise TypeError(f"ScriptedChatModel step must be an AIMessage, str, exception or callable; got {step!r}")
        return ChatResult(generations=[ChatGeneration(message=message)])
