"""Where a run goes next: after the model turn, on a jump, after the tools. Each rule stated once, here.

- After the model turn (the loop's last node): pending tool calls go to the tool node, one task per call whose input
  holds its call (so parallel calls are separate tasks, and stream consumers such as LangGraph's
  ``SubgraphTransformer`` read a task's call from its input, as in LangChain). Several calls go as one
  ``Send("tools", [call])`` each; a lone call (the usual turn) by the node's edge, its task's input made from the
  state by :func:`tool_task_input` (a ``Send`` is serialized into every checkpoint and task write holding it:
  LangGraph's serializer checks it against a runtime protocol, slow before Python 3.12). Calls the agent has no
  tools for are closed and the run ends; a turn whose calls were all answered (by a middleware) loops back; an
  answer without calls ends the run, closing any call left.
- Jumps (``jump_to``): ``model`` -> the loop's entry; ``tools`` -> the pending calls (or the loop's entry when none);
  ``end`` -> the end, closing pending calls.
- After the tools: a structured answer or a ``return_direct`` tool ends the run; otherwise back to the model. Each
  tool task decides for itself, from the state it started from and its own writes (what a conditional edge after
  the node would read, without LangGraph's fresh read of the state: :meth:`LifecycleRouter.after_tools_in_run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.graph import END
from langgraph.types import Command, Send

from middleware_kit._engine.compat import map_node_input
from middleware_kit._engine.layout import TOOLS_NODE, Layout
from middleware_kit._engine.pairing import close_pending, closing_messages, last_ai_index, pending_tool_calls
from middleware_kit.events import run_lifecycle
from middleware_kit.hooks import JUMP_TARGETS
from middleware_kit.structured_output import is_structured_answer

__all__ = ["JUMP_TARGETS", "LifecycleRouter", "Router", "install_tool_task_input", "tool_task_input"]


def to_tools(pending: list[Any]) -> str | list[Send]:
    """The route of ``pending`` (at least one) calls to the tool node: one task per call."""
    if len(pending) == 1:
        return TOOLS_NODE  # its task's input: tool_task_input
    return [Send(TOOLS_NODE, [call]) for call in pending]


def tool_task_input(state: Any) -> Any:
    """The input of a tool task its edge started (a lone pending call): the call with the state it runs in, as
    LangChain's ``Send`` payload carries it (``ToolCallWithContext``). Any other start of the node (no or several
    calls pending) keeps the state as its input."""
    pending = pending_tool_calls(state.get("messages") or ()) if isinstance(state, dict) else ()
    if len(pending) != 1:
        return state
    return {"__type": "tool_call_with_context", "tool_call": pending[0], "state": state}


def install_tool_task_input(compiled: Any) -> None:
    """Make :func:`tool_task_input` the input of ``compiled``'s tool node (when it has one) when its edge starts it."""
    if TOOLS_NODE in compiled.nodes:
        map_node_input(compiled, TOOLS_NODE, tool_task_input)


@dataclass(frozen=True, slots=True)
class Router:
    layout: Layout
    return_direct: frozenset[str] = frozenset()

    def destinations(self, successor: str | None, jumps: frozenset[str]) -> tuple[str, ...]:
        """Every node a node with this static ``successor`` (None: the deciding node) and these jumps may go to."""
        lay = self.layout
        dests: set[str] = {successor} if successor is not None else {lay.loop_entry, lay.end_entry}
        if successor is None and lay.has_tool_node:
            dests.add(TOOLS_NODE)
        targets = {"end": (lay.end_entry,), "model": (lay.loop_entry,), "tools": (TOOLS_NODE, lay.loop_entry)}
        for jump in jumps:
            dests.update(targets[jump])
        return tuple(sorted(dests))

    def after_model(self, messages: Sequence[Any]) -> tuple[Any, list[Any]]:
        """After the model turn: the destination, and a ``messages`` write closing calls that will never run.

        ``messages`` is the whole history, or just the model's one new message (then nothing needs a rewrite).
        """
        lay = self.layout
        newest = last_ai_index(messages)
        if newest < 0:
            return lay.end_entry, []
        if messages[newest].tool_calls:
            pending = pending_tool_calls(messages)
            if pending and lay.has_tool_node:
                return to_tools(pending), []
            if pending:  # the model called tools although the agent has none to run
                return lay.end_entry, closing_messages(pending, "this agent has no tools to run.")
            if structured_answered(messages, newest):  # the model answered through its structured tool
                return lay.end_entry, []
            return lay.loop_entry, []  # every call was answered by a middleware: let the model see the answers
        # The newest AIMessage answers without calls (a hook may have added it after a tool-calling one).
        return self._end(messages)

    def jump(self, target: str, view: Any) -> tuple[Any, list[Any]]:
        """Where ``jump_to=target`` goes, and what closes pending calls."""
        if target == "model":
            return self.layout.loop_entry, []
        if target == "tools":
            pending = pending_tool_calls(view.get("messages", ()))
            return (to_tools(pending) if pending else self.layout.loop_entry), []
        return self._end(view.get("messages", ()))

    def _end(self, messages: Sequence[Any]) -> tuple[Any, list[Any]]:
        fix = close_pending(messages, "the run ended before it ran.")
        return self.layout.end_entry, fix.update if fix is not None else []

    def after_tools(self, state: Any) -> str:
        """After the tool node: end on a structured answer or a ``return_direct`` tool, else back to the model."""
        messages = state["messages"]
        i = last_ai_index(messages)
        if i >= 0 and structured_answered(messages, i):  # the structured answer came with regular calls
            return self.layout.end_entry
        if i >= 0 and self.return_direct:
            # decided by the tool that ran (the ToolMessage's name; the call's when the answer has none): a reviewer
            # may have run another tool in place of the call the AIMessage records
            called = {c["id"]: c["name"] for c in messages[i].tool_calls}
            ran = (m.name or called[m.tool_call_id] for m in messages[i + 1 :]
                   if isinstance(m, ToolMessage) and m.tool_call_id in called)
            if any(name in self.return_direct for name in ran):
                return self.layout.end_entry
        return self.layout.loop_entry


def with_goto(output: Any, goto: Any) -> Any:
    """A node's output (None, a dict or a list of Commands) with ``goto`` added."""
    if output is None:
        return Command(goto=goto)
    if isinstance(output, dict):
        return Command(update=output, goto=goto)
    return [*output, Command(goto=goto)]


def structured_answered(messages: Sequence[Any], ai_index: int) -> bool:
    """Whether the ``AIMessage`` at ``ai_index`` was answered by a successful structured-output call (its answer
    stands among the ``ToolMessage``s right after it). O(answers of that message)."""
    for j in range(ai_index + 1, len(messages)):
        message = messages[j]
        if not isinstance(message, ToolMessage):
            return False
        if is_structured_answer(message):
            return True
    return False


# -- where a run ends (for the run_finished lifecycle event) ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LifecycleRouter(Router):
    """The agent's router, which also closes the run's lifecycle (``run_finished``) when a route goes to ``END``
    (after the model turn, on a jump, after the tools). ``after_agent`` nodes close it themselves
    (``NodeRunner``'s ``ends_run``), since they route statically."""

    def after_model(self, messages: Sequence[Any]) -> tuple[Any, list[Any]]:
        goto, closing = Router.after_model(self, messages)
        if goto == END:
            _finished()
        return goto, closing

    def jump(self, target: str, view: Any) -> tuple[Any, list[Any]]:
        goto, closing = Router.jump(self, target, view)
        if goto == END:
            _finished()
        return goto, closing

    def after_tools_in_run(self, state: Any, runtime: Any, config: RunnableConfig) -> str:
        """``after_tools`` in the tool node's run (``runtime`` and ``config``: the task's), closing the run's
        lifecycle when it ends the run."""
        goto = Router.after_tools(self, state)
        if goto == END:
            _finished(runtime, config)
        return goto


def _finished(runtime: Any = None, config: RunnableConfig | None = None) -> None:
    if config is None:
        config = var_child_runnable_config.get()
    life = run_lifecycle(runtime, config)
    if life is None:
        return
    token = var_child_runnable_config.set(config)  # LangGraph's stream writer reads the context config
    try:
        life.finished(runtime)
    finally:
        var_child_runnable_config.reset(token)
