"""LangGraph features work unchanged on the compiled agent: interrupt_before/after, stores, streaming, names."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from middleware_kit import MiddlewareConfigError, before_agent, before_model, create_agent, wrap_model_call
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner, add
from tests.helpers import tool_then_answer


def test_interrupt_before_tools_pauses_and_resumes(run: Runner) -> None:
    agent = create_agent(tool_then_answer(), [add], checkpointer=InMemorySaver(), interrupt_before=["tools"])
    config = {"configurable": {"thread_id": "t"}}
    paused = run(agent, {"messages": [HumanMessage("q")]}, config=config)
    assert paused["messages"][-1].tool_calls
    assert agent.get_state(config).next == ("tools",)
    done = run(agent, None, config=config)
    assert done["messages"][-1].content == "done"


def test_interrupt_after_a_fused_node(run: Runner) -> None:
    @before_agent
    def a(state: Any, runtime: Any) -> None: ...

    @before_agent
    def b(state: Any, runtime: Any) -> None: ...

    agent = create_agent(ScriptedChatModel(["x"]), middleware=[a, b], checkpointer=InMemorySaver(),
                         interrupt_after=["before_agent"])
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("q")]}, config=config)
    assert agent.get_state(config).next == ("model",)
    assert run(agent, None, config=config)["messages"][-1].content == "x"


def test_unknown_interrupt_node_is_explained() -> None:
    @before_model
    def a(state: Any, runtime: Any) -> None: ...

    with pytest.raises(MiddlewareConfigError, match=r"inside the 'model' node") as err:
        create_agent(ScriptedChatModel([]), middleware=[a], interrupt_before=["before_model"])
    assert err.value.hook == "interrupt_before"


def test_store_is_reachable_from_hooks(run: Runner) -> None:
    store = InMemoryStore()
    store.put(("prefs",), "ada", {"tone": "formal"})

    @wrap_model_call
    def tone(request: Any, handler: Any) -> Any:
        item = request.runtime.store.get(("prefs",), "ada")
        return handler(request.override(system_prompt=f"Be {item.value['tone']}."))

    model = ScriptedChatModel(["ok"])
    run(create_agent(model, middleware=[tone], store=store), {"messages": [HumanMessage("q")]})
    assert model.calls[0].messages[0].content == "Be formal."


def test_stream_updates_show_fused_nodes_and_the_model() -> None:
    @before_model
    def a(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [HumanMessage("from a")]}

    @before_model
    def b(state: Any, runtime: Any) -> None: ...

    agent = create_agent(ScriptedChatModel([AIMessage("hi")]), middleware=[a, b], name="streamer")
    chunks = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="updates"))
    assert [next(iter(chunk)) for chunk in chunks] == ["model"]  # before_model hooks run inside the model node
    # The node's writes as one update (issue 18), in order: the hook's message, then the model's.
    assert [m.content for m in chunks[0]["model"]["messages"]] == ["from a", "hi"]
    assert agent.name == "streamer"


def test_messages_stream_yields_model_tokens() -> None:
    agent = create_agent(ScriptedChatModel(["streamed answer"]))
    chunks = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="messages"))
    assert any(getattr(msg, "content", "") == "streamed answer" for msg, _meta in chunks)
