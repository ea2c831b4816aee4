"""``run.subagents``: nested named agents as stream handles of ``stream_events(version="v3")`` (LangChain 1.5).

``create_agent(name=...)`` puts ``lc_agent_name`` in its run metadata, and LangGraph's task bookkeeping records the
name each nested run starts with. A nested run that carries a name (an agent called from a tool, or a subgraph that
inherited its parent's name) is a *subagent*: it surfaces on ``run.subagents`` as a handle with its ``name`` and the
tool call that started it (``cause``), and its events flow into the handle, which is read like the run itself.

LangGraph's :class:`~langgraph.stream.transformers.SubgraphTransformer` already finds direct child runs, builds their
handles and closes them; this one keeps only the named ones and publishes them under ``subagents``.
"""

from __future__ import annotations

from typing import Any

from langgraph.stream.run_stream import AsyncSubgraphRunStream, SubgraphRunStream
from langgraph.stream.transformers import SubgraphTransformer

__all__ = ["AsyncSubagentRunStream", "SubagentRunStream", "SubagentTransformer"]


class _SubagentFacts:
    """What a subagent handle adds to a subgraph handle: the agent's name and the tool call that started it."""

    graph_name: str | None
    _cause: Any = None

    @property
    def name(self) -> str | None:
        """The nested agent's ``lc_agent_name``."""
        return self.graph_name

    @property
    def cause(self) -> Any:
        """``{"type": "toolCall", "tool_call_id": ...}`` for the tool call that started the subagent, when known."""
        return self._cause


class SubagentRunStream(_SubagentFacts, SubgraphRunStream):
    """A nested named agent of a ``stream_events(version="v3")`` run (sync)."""


class AsyncSubagentRunStream(_SubagentFacts, AsyncSubgraphRunStream):
    """A nested named agent of an ``astream_events(version="v3")`` run (async)."""


class SubagentTransformer(SubgraphTransformer):
    """Publishes direct child runs that carry an ``lc_agent_name`` on ``run.subagents`` (unnamed ones are left to
    ``run.subgraphs``). Registered by ``create_agent`` after ``ToolCallTransformer``."""

    def init(self) -> dict[str, Any]:
        return {"subagents": self._log}

    def _on_started(self, ns: tuple[str, ...], graph_name: str | None, trigger_call_id: str | None) -> None:
        if self._lc_by_ns.get(ns) is None or self._mux is None or ns in self._handles:
            return
        try:
            child = self._mux._make_child(ns)
        except RuntimeError:  # the run is closing: nothing more to surface
            return
        handle_cls = AsyncSubagentRunStream if child.is_async else SubagentRunStream
        handle = handle_cls(mux=child, path=ns, graph_name=graph_name, trigger_call_id=trigger_call_id)
        handle._cause = self._pending_cause
        self._handles[ns] = handle
        self._log.push(handle)
