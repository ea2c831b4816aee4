"""Custom state and jumps: retry the model once when it answers with nothing.

What it shows
    * A ``state_schema``: a TypedDict extending ``AgentState`` with the middleware's own keys. ``model_turns`` is
      ``Annotated[int, operator.add]``: hooks return ``{"model_turns": 1}`` and LangGraph's reducer adds it up.
      ``empty_retries`` is ``Annotated[int, PrivateStateAttr]``: it lives in the graph's state (and its checkpoints)
      but stays out of the agent's input and of the result of ``invoke``.
    * ``@after_model(can_jump_to=["model"])``: when the answer is empty, the hook removes it, adds a nudge and returns
      ``jump_to: "model"``, sending the run back to the model. The retry budget is per run: ``before_agent`` resets
      it at the start of every invocation (a checkpointed thread would otherwise remember it).
    * The hook is one ``AgentMiddleware`` subclass whose hooks share the schema; ``hook_config`` declares the jump on
      a method, as the decorator's ``can_jump_to=`` does on a function.

When to use it
    Whenever a middleware needs memory across the steps of a run (counters, budgets, flags) or must change where the
    run goes next (retry, skip to the end, go straight to the tools). Keep such data in state, never on ``self``:
    one middleware instance serves many concurrent runs.

Run it: ``python recipes/jump_and_state.py``.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, NotRequired

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, AgentState, PrivateStateAttr, create_agent, hook_config
from middleware_kit.testing import ScriptedChatModel

NUDGE = "Your last reply was empty. Please answer the question."


class RetryState(AgentState):
    """The keys this middleware adds to the agent's state."""

    model_turns: NotRequired[Annotated[int, operator.add]]
    """How many answers the model gave in this thread (public: in the result of invoke)."""
    empty_retries: NotRequired[Annotated[int, PrivateStateAttr]]
    """Retries used in the current run (private: never in the input nor the result)."""


class RetryEmptyAnswer(AgentMiddleware[RetryState]):
    """Ask the model once more when its answer has neither text nor tool calls."""

    state_schema = RetryState

    def __init__(self, max_retries: int = 1) -> None:
        self.max_retries = max_retries

    def before_agent(self, state: RetryState, runtime: Runtime[Any] | None) -> dict[str, Any]:
        return {"empty_retries": 0}  # a fresh budget for every invocation

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: RetryState, runtime: Runtime[Any] | None) -> dict[str, Any]:
        last = state["messages"][-1]
        update: dict[str, Any] = {"model_turns": 1}
        empty = isinstance(last, AIMessage) and not last.text.strip() and not last.tool_calls
        if empty and state.get("empty_retries", 0) < self.max_retries:
            assert last.id is not None  # add_messages gives every message in state an id
            update["messages"] = [RemoveMessage(id=last.id), HumanMessage(NUDGE)]
            update["empty_retries"] = state.get("empty_retries", 0) + 1
            update["jump_to"] = "model"
        return update


def main() -> None:
    retry = RetryEmptyAnswer()

    # 1. An empty answer, then a real one: the hook jumps back to the model once.
    model = ScriptedChatModel(["", "Paris."])
    agent = create_agent(model, middleware=[retry])
    print(agent.middleware_plan)
    result = agent.invoke({"messages": [HumanMessage("Capital of France?")]})
    print(f"\nretried run   -> {[m.text for m in result['messages']]}, model_turns={result.get('model_turns')}")
    if model.call_count != 2 or result["messages"][-1].text != "Paris.":
        raise SystemExit(f"the empty answer should be retried once: {result['messages']}")
    second_call = [m.text for m in model.calls[1].messages]
    if second_call != ["Capital of France?", NUDGE]:
        raise SystemExit(f"the retry should send the nudge, without the empty answer: {second_call}")
    if result["model_turns"] != 2:
        raise SystemExit(f"the operator.add reducer should count 2 model turns, got {result['model_turns']}")
    if "empty_retries" in result or "jump_to" in result:
        raise SystemExit(f"private state leaked into the result: {sorted(result)}")

    # 2. Empty twice: the budget is spent, the second empty answer stands (no endless loop).
    model = ScriptedChatModel(["", ""])
    agent = create_agent(model, middleware=[retry])
    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Capital of France?")]}))
    print(f"budget spent  -> {[m.text for m in result['messages']]}, model_turns={result.get('model_turns')}")
    if model.call_count != 2 or result["messages"][-1].text != "" or result["model_turns"] != 2:
        raise SystemExit(f"only one retry per run: {model.call_count} calls, {result['messages']}")

    # 3. With a checkpointer, state persists across invocations of a thread: the counter keeps adding up, the private
    #    key is in the checkpoint (but not in results), and before_agent gives each invocation a fresh retry budget.
    model = ScriptedChatModel(["", "Paris.", "", "Rome."])
    agent = create_agent(model, middleware=[retry], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("Capital of France?")]}, config)
    result = agent.invoke({"messages": [HumanMessage("And of Italy?")]}, config)
    stored = agent.get_state(config).values
    print(f"one thread    -> model_turns={result['model_turns']}, checkpointed empty_retries={stored['empty_retries']}")
    if model.call_count != 4 or result["messages"][-1].text != "Rome.":
        raise SystemExit(f"each invocation should get its own retry: {model.call_count} calls")
    if result["model_turns"] != 4 or stored["empty_retries"] != 1 or "empty_retries" in result:
        raise SystemExit(f"unexpected state: result keys {sorted(result)}, checkpoint {stored}")

    # The schemas the agent publishes (for LangGraph Server, UIs, validation) leave the private key out.
    inputs = sorted(agent.get_input_jsonschema()["properties"])
    outputs = sorted(agent.get_output_jsonschema()["properties"])
    print(f"input keys    -> {inputs}; output keys -> {outputs}")
    if "empty_retries" in inputs or "empty_retries" in outputs or "model_turns" not in inputs:
        raise SystemExit("PrivateStateAttr keys must stay out of the input and output schemas")
    print("\nOK: the empty answer was retried once per run, model_turns added up, empty_retries stayed private.")


if __name__ == "__main__":
    main()
