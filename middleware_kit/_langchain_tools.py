"""What ``langchain.tools`` holds, for :mod:`middleware_kit.langchain_alias`: langchain-core's tool names plus
LangGraph's injected-argument types (LangChain re-exports the same objects)."""

from langchain_core.tools import BaseTool, InjectedToolArg, InjectedToolCallId, ToolException, tool
from langgraph.prebuilt import InjectedState, InjectedStore, ToolRuntime

__all__ = [
    "BaseTool",
    "InjectedState",
    "InjectedStore",
    "InjectedToolArg",
    "InjectedToolCallId",
    "ToolException",
    "ToolRuntime",
    "tool",
]
