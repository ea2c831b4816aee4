"""``LLMToolSelectorMiddleware``: a model picks the tools relevant to the user's query before each model call.

With many tools bound, the main model pays for every schema on every call and chooses worse. Before each model call
this middleware asks a selection model (``model=``, else the agent's own model) which of the request's tools matter
for the latest user message, and sends the main model only those (plus ``always_include``). Provider tools given as
dicts are never filtered.

Beyond LangChain 1.5's version:

- **The selector's tokens never reach the user's stream**: its call is tagged ``nostream`` (and
  ``middleware_kit:tool_selection``, named ``"{name}.select_tools"`` in traces), so ``stream_mode="messages"`` shows
  only the main model.
- **A selector failure never breaks the run**: a selection model that raises, an answer that cannot be parsed (no
  ``tools`` key, not a list, free text), or no user message to select for: the call goes ahead with every tool and a
  ``tool_selection_failed`` event says why. Names the selector invents are dropped (reported as ``invalid``), not
  raised. LangGraph control flow (``GraphInterrupt``) and cancellation still propagate.
- A tool the request's ``tool_choice`` forces is always kept (the provider would reject a call forcing a tool it
  was not sent).
- **The selection keeps the request's tool order**, so the tool block of the prompt stays byte-stable for prompt
  caching whatever order the selector ranked them in (ranking only decides which survive ``max_tools``).
- The selection model answers through a ``select_tools`` tool call, or in plain text (a JSON list, ``{"tools":
  [...]}``, or comma/line separated names), so models without tool calling and ``ScriptedChatModel`` work too.

Events on the custom stream: ``{"event": "tools_selected", "middleware", "selected", "dropped", "invalid"}`` and
``{"event": "tool_selection_failed", "middleware", "reason", "error"}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.hooks import AsyncModelHandler, ModelHandler
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import internal_call_config, resolve_chat_model, tool_names
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = ["DEFAULT_SYSTEM_PROMPT", "SELECT_TOOLS_NAME", "LLMToolSelectorMiddleware"]

DEFAULT_SYSTEM_PROMPT = "Your goal is to select the most relevant tools for answering the user's query."
"""The selection model's instructions when ``system_prompt`` is not given (LangChain's default)."""
SELECT_TOOLS_NAME = "select_tools"
"""Name of the tool the selection model is asked to call with ``{"tools": [names]}``."""

_NAME = "LLMToolSelectorMiddleware"


@dataclass(frozen=True)
class _Plan:
    """One selection to make: the candidates, what is kept anyway, and the messages for the selection model."""

    candidates: tuple[BaseTool, ...]
    always: frozenset[str]
    messages: tuple[BaseMessage, ...]


class _SelectionError(Exception):
    """The selection model's answer could not be read as a list of tool names."""


class LLMToolSelectorMiddleware(FrozenConfig, AgentMiddleware):
    """Let a model choose which tools the main model sees on each call.

    Args:
        model: The selection model: a ``BaseChatModel``, or a name such as ``"openai:gpt-4o-mini"`` (resolved through
            ``middleware_kit.models`` when installed). Default: the agent's own model (``request.model``).
        system_prompt: Instructions for the selection model.
        max_tools: Keep at most this many selected tools (the selector's first ones). ``None``: no limit.
        always_include: Tool names (or tools) sent every time, whatever the selection; they do not count against
            ``max_tools``. Each must be among the agent's tools when a model call is made.
    """

    def __init__(
        self,
        *,
        model: str | BaseChatModel | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_tools: int | None = None,
        always_include: Sequence[str | BaseTool] | None = None,
    ) -> None:
        self.model: BaseChatModel | None = (
            None if model is None else resolve_chat_model(model, middleware=_NAME, parameter="model")
        )
        """The selection model (None: the agent's model)."""
        if not isinstance(system_prompt, str) or not system_prompt.strip():
            raise MiddlewareConfigError(
                f"{_NAME}: system_prompt must be a non-empty str; got {system_prompt!r:.60}.",
                middleware=_NAME,
                hook="system_prompt",
            )
        self.system_prompt = system_prompt
        if max_tools is not None and (isinstance(max_tools, bool) or not isinstance(max_tools, int) or max_tools < 1):
            raise MiddlewareConfigError(
                f"{_NAME}: max_tools must be a positive int or None; got {max_tools!r}. Use always_include for "
                f"tools that must always be sent.",
                middleware=_NAME,
                hook="max_tools",
            )
        self.max_tools = max_tools
        names = tool_names(always_include or (), middleware=_NAME, parameter="always_include")
        self.always_include: tuple[str, ...] = names
        """Names of the tools sent on every call."""

    # -- the selection, shared by the sync and async hooks ------------------------------------------------------------
    def _plan(self, request: ModelRequest[Any]) -> _Plan | str | None:
        """What to select (a plan), why selection is impossible (a reason: all tools are sent), or None (nothing
        to select: pass the request through)."""
        tools = [t for t in request.tools if isinstance(t, BaseTool)]
        if not tools:
            return None
        present = {t.name for t in tools}
        missing = [n for n in self.always_include if n not in present]
        if missing:
            raise MiddlewareConfigError(
                f"Tools in always_include not found in request: {missing}. Available tools: {sorted(present)}. "
                f"Fix: list only tools the agent has in {self.name}(always_include=...), or add the tools to "
                f"create_agent(tools=...).",
                middleware=self.name,
                hook="always_include",
            )
        always = frozenset(self.always_include) | _forced_tool(request.tool_choice)
        candidates = tuple(t for t in tools if t.name not in always)
        if not candidates:
            return None
        query = next((m for m in reversed(request.messages) if isinstance(m, HumanMessage)), None)
        if query is None:
            return "no user message to select tools for"
        return _Plan(candidates, always, (SystemMessage(self._instructions(candidates)), HumanMessage(query.content)))

    def _instructions(self, candidates: Sequence[BaseTool]) -> str:
        listing = "\n".join(f"- {t.name}: {' '.join((t.description or '').split())}" for t in candidates)
        limit = (
            f"\nSelect at most {self.max_tools} tool(s); list them most relevant first (only the first "
            f"{self.max_tools} are used)."
            if self.max_tools is not None
            else "\nList the tools most relevant first."
        )
        return (
            f"{self.system_prompt}\n\nAvailable tools:\n{listing}\n{limit}\n"
            f"Answer by calling {SELECT_TOOLS_NAME} with the names, or with a JSON list of names."
        )

    def _selector(self, request: ModelRequest[Any], plan: _Plan) -> Any:
        model = self.model if self.model is not None else request.model
        schema = {
            "type": "function",
            "function": {
                "name": SELECT_TOOLS_NAME,
                "description": "Select the tools relevant to the user's query.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "tools": {
                            "type": "array",
                            "items": {"type": "string", "enum": [t.name for t in plan.candidates]},
                            "description": "Tools to use. Place the most relevant tools first.",
                        }
                    },
                    "required": ["tools"],
                },
            },
        }
        try:
            return model.bind_tools([schema], tool_choice="any")
        except NotImplementedError:  # a model without tool calling answers in text
            return model

    def _parse(self, reply: Any) -> list[str]:
        if isinstance(reply, AIMessage) and reply.tool_calls:
            call = next((c for c in reply.tool_calls if c["name"] == SELECT_TOOLS_NAME), reply.tool_calls[0])
            value: Any = call["args"].get("tools")
            if not isinstance(value, list):
                raise _SelectionError(f"the {SELECT_TOOLS_NAME} call has no 'tools' list (args: {call['args']!r:.120})")
        else:
            text = reply.text if isinstance(reply, BaseMessage) else str(reply)
            value = _names_from_text(text)
        if not all(isinstance(v, str) for v in value):
            raise _SelectionError(f"the selection holds non-string names: {value!r:.120}")
        return [str(v) for v in value]

    def _apply(self, request: ModelRequest[Any], plan: _Plan, reply: Any) -> ModelRequest[Any]:
        try:
            names = self._parse(reply)
        except _SelectionError as exc:
            return self._fallback(request, f"unreadable selection: {exc}", None)
        known = {t.name for t in plan.candidates}
        invalid = list(dict.fromkeys(n for n in names if n not in known))
        chosen = list(dict.fromkeys(n for n in names if n in known))
        if self.max_tools is not None:
            chosen = chosen[: self.max_tools]
        keep = set(chosen) | plan.always
        tools = [t for t in request.tools if not isinstance(t, BaseTool) or t.name in keep]
        emit(
            request.runtime,
            {
                "event": "tools_selected",
                "middleware": self.name,
                "selected": [t.name for t in tools if isinstance(t, BaseTool)],
                "dropped": [t.name for t in plan.candidates if t.name not in keep],
                "invalid": invalid,
            },
        )
        return request.override(tools=tools)

    def _fallback(self, request: ModelRequest[Any], reason: str, error: BaseException | None) -> ModelRequest[Any]:
        emit(
            request.runtime,
            {
                "event": "tool_selection_failed",
                "middleware": self.name,
                "reason": reason,
                "error": None if error is None else f"{type(error).__name__}: {error}"[:300],
            },
        )
        return request

    # -- hooks ------------------------------------------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
        """Select the tools, then call the model with them (with all of them if selection fails)."""
        plan = self._plan(request)
        if plan is None:
            return handler(request)
        if isinstance(plan, str):
            return handler(self._fallback(request, plan, None))
        config = internal_call_config(self.name, "select_tools")
        try:
            reply = self._selector(request, plan).invoke(list(plan.messages), config=config)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return handler(self._fallback(request, "the selection model raised", exc))
        return handler(self._apply(request, plan, reply))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> ModelResponse[Any]:
        """Async twin of :meth:`wrap_model_call`."""
        plan = self._plan(request)
        if plan is None:
            return await handler(request)
        if isinstance(plan, str):
            return await handler(self._fallback(request, plan, None))
        config = internal_call_config(self.name, "select_tools")
        try:
            reply = await self._selector(request, plan).ainvoke(list(plan.messages), config=config)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return await handler(self._fallback(request, "the selection model raised", exc))
        return await handler(self._apply(request, plan, reply))


_SPLIT = re.compile(r"[,\n]+")
_CHOICE_MODES = frozenset({"auto", "any", "none", "required"})


def _forced_tool(tool_choice: Any) -> frozenset[str]:
    """The tool a request's ``tool_choice`` forces (kept whatever the selection: dropping it would make the provider
    reject the call), as a set of at most one name."""
    if isinstance(tool_choice, str) and tool_choice not in _CHOICE_MODES:
        return frozenset({tool_choice})
    if isinstance(tool_choice, dict):
        name = tool_choice.get("name") or (tool_choice.get("function") or {}).get("name")
        if isinstance(name, str):
            return frozenset({name})
    return frozenset()


def _names_from_text(text: str) -> list[Any]:
    """Tool names from a text answer: JSON (a list, or an object with a ``tools`` list) or separated names."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    if not stripped:
        raise _SelectionError("the selection model answered with empty text")
    if stripped[0] in "[{":
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise _SelectionError(f"invalid JSON ({exc.msg})") from None
        if isinstance(value, dict):
            value = value.get("tools")
        if not isinstance(value, list):
            raise _SelectionError("the JSON answer has no 'tools' list")
        return list(value)
    names = [part.strip().strip("-*•` '\"") for part in _SPLIT.split(stripped)]
    names = [n for n in names if n]
    if not names or any(" " in n for n in names):
        raise _SelectionError(f"free text instead of tool names: {stripped!r:.120}")
    return names
