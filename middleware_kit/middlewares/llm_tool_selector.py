"""``LLMToolSelectorMiddleware``: a model picks the tools relevant to the user's query before each model call.

With many tools bound, the main model pays for every schema on every call and chooses worse. Before each model call
this middleware asks a selection model (``model=``, else the agent's own model) which of the request's tools matter
for the latest user message, and sends the main model only those (plus ``always_include``). Provider tools given as
dicts are never filtered.

Beyond LangChain 1.5's version:

- **The selector's tokens never reach the user's stream**: its call is tagged ``nostream`` (and
  ``middleware_kit:select_tools``, named ``"{name}.select_tools"`` in traces) and carries LangChain's metadata
  (``lc_source="tool_selection"`` and the internal-call marker), so ``stream_mode="messages"`` and
  ``stream_events(version="v3")`` show only the main model.
- **A malformed answer** (no ``tools`` list, free text) is asked again up to ``max_retries`` times (default 1), then
  handled by ``on_parsing_failure`` as in LangChain 1.5: ``"error"`` (default) raises :class:`ToolSelectionError`
  (a ``ValueError``), ``"none"`` sends no selectable tool, ``"all"`` every tool, a list of names those tools, a
  callable ``fn(last_answer) -> names`` its names (``last_answer`` is the ``tools`` call's arguments, else the
  message). Fallback selections are not capped by ``max_tools``.
- **A selection model that raises, or no user message to select for, never breaks the run**: the call goes ahead
  with every tool and a ``tool_selection_failed`` event says why. Names the selector invents are dropped (reported
  as ``invalid``), not raised. LangGraph control flow (``GraphInterrupt``) and cancellation still propagate.
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
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from middleware_kit._engine.drive import Step, acall_step, call_step, run_async, run_sync
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.hooks import AsyncModelHandler, ModelHandler
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import INT_AT_LEAST_0, INT_AT_LEAST_1, NON_EMPTY_STR, Config
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import internal_call, internal_call_config, resolve_chat_model, tool_names
from middleware_kit.middlewares._stream import emit
from middleware_kit.models import resolve_model
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "SELECT_TOOLS_NAME",
    "LLMToolSelectorMiddleware",
    "OnParsingFailure",
    "ToolSelectionError",
    "init_chat_model",
]

DEFAULT_SYSTEM_PROMPT = "Your goal is to select the most relevant tools for answering the user's query."
"""The selection model's instructions when ``system_prompt`` is not given (LangChain's default)."""
SELECT_TOOLS_NAME = "select_tools"
"""Name of the tool the selection model is asked to call with ``{"tools": [names]}``."""

_NAME = "LLMToolSelectorMiddleware"
_POLICIES = ("error", "none", "all")

OnParsingFailure: TypeAlias = "Literal['error', 'none', 'all'] | list[str] | Callable[[Any], list[str]]"
"""What happens when the selection model's answer is still malformed after ``max_retries`` retries (LangChain's)."""

init_chat_model: Callable[..., BaseChatModel] = resolve_model
"""Resolves a ``model=`` name (``"openai:gpt-4o-mini"``) to a chat model; looked up when a selector is constructed,
so tests may patch it (``mock.patch("...llm_tool_selector.init_chat_model")``)."""

_Selection = Generator["Step | ModelRequest[Any]", Any, Any]
"""The wrap hook's flow: yields the selection model's calls (``Step``\\ s) and the request for the next handler."""


@dataclass(frozen=True)
class _Plan:
    """One selection to make: the candidates, what is kept anyway, and the messages for the selection model."""

    candidates: tuple[BaseTool, ...]
    always: frozenset[str]
    messages: tuple[BaseMessage, ...]


class _SelectionError(Exception):
    """The selection model's answer could not be read as a list of tool names."""


class ToolSelectionError(MiddlewareError, ValueError):
    """The selection model's answer was still malformed after ``max_retries`` retries
    (``on_parsing_failure="error"``)."""


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

    __config__ = Config(
        template="{owner}: {param} must be {expected}; got {value!r}.",
        system_prompt=NON_EMPTY_STR.saying(
            "a non-empty str", "{owner}: {param} must be {expected}; got {value!r:.60}."  # a prompt: its start only
        ),
        max_tools=INT_AT_LEAST_1.or_none(
            "a positive int or None",
            "{owner}: {param} must be {expected}; got {value!r}. Use always_include for tools that must always be "
            "sent.",
        ),
        max_retries=INT_AT_LEAST_0.saying(">= 0 (an int: how many times a malformed selection is asked again)"),
    )

    def __init__(
        self,
        *,
        model: str | BaseChatModel | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_tools: int | None = None,
        always_include: Sequence[str | BaseTool] | None = None,
        max_retries: int = 1,
        on_parsing_failure: OnParsingFailure = "error",
    ) -> None:
        self.model: BaseChatModel | None = None if model is None else _selection_model(model)
        """The selection model (None: the agent's model)."""
        self.system_prompt = system_prompt
        self.max_tools = max_tools
        names = tool_names(always_include or (), middleware=_NAME, parameter="always_include")
        self.always_include: tuple[str, ...] = names
        """Names of the tools sent on every call."""
        self.max_retries = max_retries
        self.on_parsing_failure: OnParsingFailure = _checked_policy(on_parsing_failure)

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

    def _apply(
        self, request: ModelRequest[Any], plan: _Plan, names: Sequence[str], *, capped: bool = True
    ) -> ModelRequest[Any]:
        """``request`` with the selectable tools cut to ``names`` (the first ``max_tools`` of them when
        ``capped``), plus the tools kept anyway, in the request's order."""
        known = {t.name for t in plan.candidates}
        invalid = list(dict.fromkeys(n for n in names if n not in known))
        chosen = list(dict.fromkeys(n for n in names if n in known))
        if capped and self.max_tools is not None:
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

    def _after_malformed(
        self, request: ModelRequest[Any], plan: _Plan, reply: Any, error: _SelectionError
    ) -> ModelRequest[Any]:
        """The request once every answer was malformed: what ``on_parsing_failure`` says (raise, or a fallback
        selection that ``max_tools`` does not cap)."""
        policy = self.on_parsing_failure
        if policy == "error":
            raise ToolSelectionError(
                f"{self.name}: the selection model returned a malformed response after {self.max_retries} retries "
                f"(expected a 'tools' list of tool names): {error}. Fix: pass on_parsing_failure='all' (send every "
                f"tool), 'none', a list of tool names or a callable, or raise max_retries.",
                middleware=self.name,
                hook="wrap_model_call",
            )
        self._fallback(request, f"unreadable selection: {error}", None)
        if policy == "all":
            return request
        if policy == "none":
            names: Sequence[str] = []
        elif callable(policy):
            names = policy(_last_answer(reply))
        else:
            names = policy
        return self._apply(request, plan, names, capped=False)

    def _selection(self, request: ModelRequest[Any]) -> _Selection:
        """Select the tools, then call the model with them; written once for :meth:`wrap_model_call` and
        :meth:`awrap_model_call` (the selection model's calls are the ``Step``\\ s it yields)."""
        plan = self._plan(request)
        if isinstance(plan, _Plan):
            request = yield from self._selected(request, plan)
        elif isinstance(plan, str):
            request = self._fallback(request, plan, None)
        return (yield request)

    def _selected(self, request: ModelRequest[Any], plan: _Plan) -> Generator[Step, Any, ModelRequest[Any]]:
        selector = self._selector(request, plan)
        config = internal_call_config(self.name, "select_tools")
        for _attempt in range(self.max_retries + 1):
            try:
                reply = yield internal_call(selector, list(plan.messages), config, site=f"{self.name}.wrap_model_call")
            except GraphBubbleUp:
                raise
            except Exception as exc:
                return self._fallback(request, "the selection model raised", exc)
            try:
                names = self._parse(reply)
            except _SelectionError as exc:
                error = exc
                continue
            return self._apply(request, plan, names)
        return self._after_malformed(request, plan, reply, error)

    # -- hooks ------------------------------------------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
        """Select the tools, then call the model with them."""
        result: ModelResponse[Any] = run_sync(self._selection(request), _calls(handler))
        return result

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> ModelResponse[Any]:
        """:meth:`wrap_model_call` under ``ainvoke`` (the same flow, the calls awaited)."""
        result: ModelResponse[Any] = await run_async(self._selection(request), _acalls(handler))
        return result


def _calls(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """What the flow's yields mean under ``invoke``: a ``Step`` is a selection call, a request the next handler."""
    return lambda command: call_step(command) if isinstance(command, Step) else handler(command)


def _acalls(handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """:func:`_calls` under ``ainvoke`` (each result awaited)."""
    return lambda command: acall_step(command) if isinstance(command, Step) else handler(command)


def _last_answer(reply: Any) -> Any:
    """What a callable ``on_parsing_failure`` receives: the arguments of the selection call, else the reply."""
    if isinstance(reply, AIMessage) and reply.tool_calls:
        call = next((c for c in reply.tool_calls if c["name"] == SELECT_TOOLS_NAME), reply.tool_calls[0])
        return call["args"]
    return reply


def _selection_model(model: object) -> BaseChatModel:
    """``model=`` as a chat model: an instance as it is, a name through :data:`init_chat_model`."""
    return resolve_chat_model(model, middleware=_NAME, parameter="model", resolver=init_chat_model)


def _checked_policy(policy: object) -> OnParsingFailure:
    if policy in _POLICIES or callable(policy):
        return policy  # type: ignore[return-value]
    if isinstance(policy, (list, tuple)) and all(isinstance(n, str) for n in policy):
        return list(policy)
    raise MiddlewareConfigError(
        f"{_NAME}: on_parsing_failure must be 'error', 'none', 'all', a list of tool names or a callable "
        f"fn(last_answer) -> list of tool names; got {policy!r:.60}.",
        middleware=_NAME,
        hook="on_parsing_failure",
    )


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
