"""``LLMToolEmulator``: a model answers chosen tool calls instead of the tools, for tests and dry runs.

Tools that send e-mail, charge cards or need credentials can stay untouched while the agent is exercised end to end:
each emulated call is answered by a model asked what the tool would plausibly return, and the tool never runs. Tools
not chosen run normally.

Beyond LangChain 1.5's version:

- **Works offline with ``ScriptedChatModel``**: pass ``model=ScriptedChatModel([...])`` and the emulated results are
  scripted (a string per call, or a callable step that reads the emulation prompt). The tool's name, description and
  arguments are in the prompt, so a callable step can answer per tool.
- The emulator's calls are tagged ``nostream`` (named ``"{name}.emulate"`` in traces): their tokens never reach the
  user's stream.
- Calls to a tool the agent does not have (``request.tool is None``) are emulated when chosen by name, so a dry run
  can cover tools not implemented yet.
- Each emulated call writes ``{"event": "tool_emulated", "middleware", "tool", "tool_call_id"}`` to the custom
  stream, and its ``ToolMessage`` carries ``response_metadata={"emulated": True}`` so transcripts show what was real.

An error of the emulation model propagates (an emulator is a testing tool: a silent fake answer would hide it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.hooks import AsyncToolHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import internal_call_config, resolve_chat_model, tool_names
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import ToolCallRequest

__all__ = ["DEFAULT_EMULATOR_MODEL", "EMULATION_PROMPT", "LLMToolEmulator"]

DEFAULT_EMULATOR_MODEL = "anthropic:claude-sonnet-4-5"
"""The emulation model when ``model`` is not given (LangChain's default; needs ``middleware_kit.models``)."""

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

    def __init__(
        self,
        *,
        tools: Sequence[str | BaseTool] | None = None,
        model: str | BaseChatModel | None = None,
    ) -> None:
        if tools is not None and (isinstance(tools, (str, BaseTool)) or not isinstance(tools, Sequence)):
            raise MiddlewareConfigError(
                f"{_NAME}: tools must be None (emulate every tool) or a list of tool names and/or BaseTool "
                f"instances; got {tools!r:.60}. Wrap a single tool in a list: tools=[{tools!r:.30}].",
                middleware=_NAME,
                hook="tools",
            )
        names = tool_names(tools or (), middleware=_NAME, parameter="tools")
        self.emulate_all: bool = tools is None
        """True when every tool is emulated."""
        self.tools_to_emulate: frozenset[str] = frozenset(names)
        """Names of the emulated tools (empty when ``emulate_all``)."""
        self.model: BaseChatModel = resolve_chat_model(
            DEFAULT_EMULATOR_MODEL if model is None else model, middleware=_NAME, parameter="model"
        )
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

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Emulate the call when its tool is chosen; run the tool otherwise."""
        if not self._emulates(request):
            return handler(request)
        reply = self.model.invoke(self._prompt(request), config=internal_call_config(self.name, "emulate"))
        return self._result(request, reply)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        """Async twin of :meth:`wrap_tool_call`."""
        if not self._emulates(request):
            return await handler(request)
        reply = await self.model.ainvoke(self._prompt(request), config=internal_call_config(self.name, "emulate"))
        return self._result(request, reply)
