"""``LLMToolEmulator``: a model answers chosen tool calls instead of the tools, for tests and dry runs.

Tools that send e-mail, charge cards or need credentials can stay untouched while the agent is exercised end to end:
each emulated call is answered by a model asked what the tool would plausibly return, and the tool never runs. Tools
not chosen run normally.

Beyond LangChain 1.5's version:

- **Works offline with ``ScriptedChatModel``**: pass ``model=ScriptedChatModel([...])`` and the emulated results are
  scripted (a string per call, or a callable step that reads the emulation prompt). The tool's name, description and
  arguments are in the prompt, so a callable step can answer per tool.
- The emulator's calls are tagged ``nostream`` and carry LangChain's metadata (``lc_source="tool_emulation"`` and the
  internal-call marker; named ``"{name}.emulate"`` in traces): their tokens never reach the user's stream.
- Calls to a tool the agent does not have (``request.tool is None``) are emulated when chosen by name, so a dry run
  can cover tools not implemented yet.
- Each emulated call writes ``{"event": "tool_emulated", "middleware", "tool", "tool_call_id"}`` to the custom
  stream, and its ``ToolMessage`` carries ``response_metadata={"emulated": True}`` so transcripts show what was real.

An error of the emulation model propagates (an emulator is a testing tool: a silent fake answer would hide it).

Without ``model=``, LangChain's default (:data:`DEFAULT_EMULATOR_MODEL`, at ``temperature=1``) is used, with a
``DeprecationWarning`` as in LangChain 1.5 (pass ``model`` explicitly); it needs ``langchain-anthropic``
(``ImportError`` otherwise). Model names are resolved through :data:`init_chat_model`, a module global looked up at
construction (tests may patch it).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from middleware_kit._engine.drive import Step, acall_step, call_step, run_async, run_sync
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.hooks import AsyncToolHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import TOOLS, Config
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import internal_call, internal_call_config, resolve_chat_model, tool_names
from middleware_kit.middlewares._stream import emit
from middleware_kit.models import resolve_model
from middleware_kit.types import ToolCallRequest

__all__ = ["DEFAULT_EMULATOR_MODEL", "EMULATION_PROMPT", "LLMToolEmulator", "init_chat_model"]

DEFAULT_EMULATOR_MODEL = "anthropic:claude-sonnet-4-5-20250929"
"""The emulation model when ``model`` is not given (LangChain's default, deprecated there too; needs
``langchain-anthropic``)."""

init_chat_model: Callable[..., BaseChatModel] = resolve_model
"""Resolves a model name to a chat model (``init_chat_model(name, temperature=1)``, as LangChain); looked up at
construction, so tests may patch it (``mock.patch("...llm_tool_emulator.init_chat_model")``)."""

_Emulation = Generator["Step | ToolCallRequest", Any, ToolResult]
"""The wrap hook's flow: yields the emulation model's call (a ``Step``) or the request for the next handler."""

EMULATION_PROMPT = """You are emulating a tool for a test or a dry run: answer exactly as the tool would.

Tool: {tool}
Description: {description}
Arguments: {args}

Reply with only the tool's output: realistic, consistent with the arguments, with no commentary."""
"""The emulation model's prompt. Placeholders: ``{tool}``, ``{description}``, ``{args}`` (JSON)."""

_NAME = "LLMToolEmulator"


class LLMToolEmulator(FrozenConfig, AgentMiddleware):
    """Answer the chosen tools' calls with a model instead of running the tools.

    Args:
        tools: Which tools to emulate: ``None`` (default) all of them; ``[]`` none; else tool names and/or
            ``BaseTool`` instances.
        model: The emulation model: a ``BaseChatModel`` (e.g. ``ScriptedChatModel`` in tests), or a name such as
            ``"anthropic:claude-sonnet-4-5"`` (resolved through ``middleware_kit.models`` when installed). Default:
            :data:`DEFAULT_EMULATOR_MODEL`.
    """

    __config__ = Config(
        tools=TOOLS.or_none(
            "None (emulate every tool) or a list of tool names and/or BaseTool instances",
            "{owner}: {param} must be {expected}; got {value!r:.60}. Wrap a single tool in a list: "
            "tools=[{value!r:.30}].",
        ),
    )

    def __init__(
        self,
        *,
        tools: Sequence[str | BaseTool] | None = None,
        model: str | BaseChatModel | None = None,
    ) -> None:
        names = tool_names(tools or (), middleware=_NAME, parameter="tools")
        self.emulate_all: bool = tools is None
        """True when every tool is emulated."""
        self.tools_to_emulate: frozenset[str] = frozenset(names)
        """Names of the emulated tools (empty when ``emulate_all``)."""
        self.model: BaseChatModel = _emulation_model(model)
        """The emulation model."""

    def _emulates(self, request: ToolCallRequest) -> bool:
        return self.emulate_all or request.tool_call["name"] in self.tools_to_emulate

    @staticmethod
    def _prompt(request: ToolCallRequest) -> list[BaseMessage]:
        call = request.tool_call
        tool = request.tool
        description = (tool.description if isinstance(tool, BaseTool) else "") or "(no description)"
        args = json.dumps(call["args"], ensure_ascii=False, sort_keys=True, default=str)
        return [HumanMessage(EMULATION_PROMPT.format(tool=call["name"], description=description, args=args))]

    def _result(self, request: ToolCallRequest, reply: Any) -> ToolMessage:
        call = request.tool_call
        emit(
            request.runtime,
            {"event": "tool_emulated", "middleware": self.name, "tool": call["name"], "tool_call_id": call["id"]},
        )
        content = reply.text if isinstance(reply, BaseMessage) else str(reply)
        return ToolMessage(
            content=content,
            tool_call_id=str(call["id"]),
            name=call["name"],
            response_metadata={"emulated": True},
        )

    def _emulation(self, request: ToolCallRequest) -> _Emulation:
        """Emulate the call when its tool is chosen, run the tool otherwise; one body for :meth:`wrap_tool_call` and
        :meth:`awrap_tool_call` (the emulation model's call is the ``Step`` it yields)."""
        if not self._emulates(request):
            result: ToolResult = yield request
            return result
        config = internal_call_config(self.name, "emulate")
        reply = yield internal_call(self.model, self._prompt(request), config, site=f"{self.name}.wrap_tool_call")
        return self._result(request, reply)

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Emulate the call when its tool is chosen; run the tool otherwise."""
        result: ToolResult = run_sync(self._emulation(request), _calls(handler))
        return result

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        """:meth:`wrap_tool_call` under ``ainvoke`` (the same flow, the calls awaited)."""
        result: ToolResult = await run_async(self._emulation(request), _acalls(handler))
        return result


def _calls(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """What the flow's yields mean under ``invoke``: a ``Step`` is the emulation call, a request the next handler."""
    return lambda command: call_step(command) if isinstance(command, Step) else handler(command)


def _acalls(handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """:func:`_calls` under ``ainvoke`` (each result awaited)."""
    return lambda command: acall_step(command) if isinstance(command, Step) else handler(command)


def _emulation_model(model: object) -> BaseChatModel:
    """The ``model=`` argument as a chat model: an instance as it is, a name through :data:`init_chat_model` (at
    ``temperature=1``, as LangChain), None LangChain's deprecated default."""
    if isinstance(model, BaseChatModel):
        return model
    if model is None:
        warnings.warn(
            f"LLMToolEmulator's default model ({DEFAULT_EMULATOR_MODEL!r}) is deprecated and will be removed in a "
            f"future release. Pass `model` explicitly instead.",
            DeprecationWarning,
            stacklevel=4,
        )
        try:
            return init_chat_model(DEFAULT_EMULATOR_MODEL, temperature=1)
        except (ImportError, MiddlewareConfigError) as exc:
            raise ImportError(
                f"{_NAME}'s default model ({DEFAULT_EMULATOR_MODEL!r}) requires `langchain-anthropic` to be "
                f"installed. Install it with `pip install langchain-anthropic`, or pass `model=...` explicitly "
                f"(e.g. ScriptedChatModel([...]) in tests)."
            ) from exc
    return resolve_chat_model(model, middleware=_NAME, parameter="model", resolver=init_chat_model, temperature=1)
