"""LangChain 1.5 behaviour that middleware_kit's engine does not match yet (not deliberate differences). Each test
asserts LangChain's behaviour and is a strict xfail naming the exact change; the integrator removes the xfail with the
fix. (Engine gaps met on a documentation page are in that page's tests/compat/test_docs_*.py.)
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import END
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.stream import StreamChannel, StreamTransformer
from langgraph.types import Command

from middleware_kit import (
    AgentMiddleware,
    ExtendedModelResponse,
    after_agent,
    before_model,
    create_agent,
    wrap_model_call,
)
from middleware_kit.errors import AgentArgumentError
from middleware_kit.middlewares._stream import emit
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

HI = {"messages": [HumanMessage("hi")]}


def _commanding(**command: Any) -> Any:
    @wrap_model_call
    def commanding(request: Any, handler: Any) -> Any:
        return ExtendedModelResponse(model_response=handler(request), command=Command(**command))

    return commanding


@pytest.mark.parametrize(
    ("command", "sentence"),
    [
        ({"goto": "model"}, "Command goto is not yet supported in wrap_model_call middleware. Use the jump_to state "
                            "field with before_model/after_model hooks instead."),
        ({"resume": "yes"}, "Command resume is not yet supported in wrap_model_call middleware."),
        ({"graph": Command.PARENT}, "Command graph is not yet supported in wrap_model_call middleware."),
    ],
)
def test_command_routing_from_wrap_model_call_is_refused_with_langchains_message(
    run: Runner, command: dict[str, Any], sentence: str
) -> None:
    with pytest.raises(NotImplementedError) as err:
        run(create_agent(ScriptedChatModel(["ok"]), middleware=[_commanding(**command)]), HI)
    assert str(err.value).startswith(sentence)


def test_end_constant_as_a_jump_target(run: Runner) -> None:
    @before_model(can_jump_to=["__end__"])
    def stop(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "__end__"}

    model = ScriptedChatModel(["never"])
    run(create_agent(model, middleware=[stop]), HI)
    assert model.call_count == 0


def test_after_agent_jump_to_end_skips_the_remaining_after_agent_hooks(run: Runner) -> None:
    # LangChain 1.5: after_agent may declare can_jump_to=["end"]; the jump ends the run there (the outer after_agent
    # hooks, which run later in reverse order, are skipped), and the thread stays usable.
    ran: list[str] = []

    @after_agent
    def outer(state: Any, runtime: Any) -> None:
        ran.append("outer")

    @after_agent(can_jump_to=[END])
    def inner(state: Any, runtime: Any) -> dict[str, Any]:
        ran.append("inner")
        return {"messages": [AIMessage("stopped")], "jump_to": "end"}

    agent = create_agent(ScriptedChatModel(["a", "b"]), middleware=[outer, inner], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in (1, 2):
        result = run(agent, HI, config=config)
        assert result["messages"][-1].content == "stopped" and ran == ["inner"] * turn


@tool
def lookup(query: str) -> str:
    """Look something up, with a long description that costs tokens when the tools are bound to the model."""
    return query


def test_summarization_works_from_before_model_like_langchain() -> None:
    # Fixed: summarization is a before_model hook returning LangChain's update (RemoveMessage(REMOVE_ALL_MESSAGES),
    # the summary as a HumanMessage marked lc_source="summarization", the kept messages).
    mw = SummarizationMiddleware(ScriptedChatModel(["S"]), trigger=("messages", 3), keep=("messages", 1))
    state: Any = {"messages": [HumanMessage("q0"), HumanMessage("q1"), HumanMessage("q2")]}
    update = mw.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and is_summary(update["messages"][1])
    assert isinstance(update["messages"][0], RemoveMessage) and update["messages"][0].id == REMOVE_ALL_MESSAGES
    assert update["messages"][1].content == "Here is a summary of the conversation to date:\n\nS"
    assert update["messages"][1].additional_kwargs == {"lc_source": "summarization"}
    assert update["messages"][2:] == state["messages"][2:]


def test_summarization_is_ordered_among_node_hooks_like_langchain(run: Runner) -> None:
    # A before_model hook listed after SummarizationMiddleware sees the summarized history; one listed before, the
    # whole history (LangChain: each before_model hook is a node, in list order).
    seen: dict[str, int] = {}

    @before_model(name="Early")
    def early(state: Any, runtime: Any) -> None:
        seen["early"] = len(state["messages"])

    @before_model(name="Late")
    def late(state: Any, runtime: Any) -> None:
        seen["late"] = len(state["messages"])

    mw = SummarizationMiddleware(ScriptedChatModel(["S"]), trigger=("messages", 3), keep=("messages", 1))
    result = run(create_agent(ScriptedChatModel(["final"]), [lookup], middleware=[early, mw, late]),
                 {"messages": [HumanMessage("q0"), HumanMessage("q1"), HumanMessage("q2")]})
    assert is_summary(result["messages"][0]) and result["messages"][-1].content == "final"
    assert seen == {"early": 3, "late": 2}


class _Progress(StreamTransformer):
    """A projection of the custom stream: the names of the progress events."""

    required_stream_modes = ("custom",)

    def init(self) -> dict[str, Any]:
        self.events: StreamChannel[Any] = StreamChannel()
        return {"progress": self.events}

    def process(self, event: Any) -> bool:
        data = event["params"]["data"]
        if event["method"] == "custom" and isinstance(data, dict):
            self.events.push(data.get("event"))
        return True


class _Reporter(AgentMiddleware):
    transformers = (_Progress,)

    def before_model(self, state: Any, runtime: Any) -> None:
        emit(runtime, {"event": "thinking", "middleware": self.name})


def test_middleware_transformers_attribute_defaults_to_an_empty_tuple() -> None:
    assert AgentMiddleware.transformers == () and _Reporter().transformers == (_Progress,)


def test_middleware_transformers_are_registered_on_the_agent_like_langchain() -> None:
    # LangChain 1.5: AgentMiddleware.transformers are StreamTransformer factories that create_agent registers on the
    # compiled graph, after the built-in ToolCallTransformer (and SubagentTransformer) and before
    # create_agent(transformers=...).
    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[_Reporter()])
    names = [getattr(t, "__name__", "") for t in getattr(agent, "stream_transformers", ())]
    assert names == ["ToolCallTransformer", "SubagentTransformer", "_Progress"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangGraph marks the v3 protocol experimental
        run = agent.stream_events(HI, version="v3")
        assert list(run.extensions["progress"]) == ["thinking"]
        output = run.output
        assert output is not None and output["messages"][-1].content == "ok"
    own = create_agent(ScriptedChatModel(["ok"]), middleware=[_Reporter()], transformers=[_Progress])
    # LangChain 1.5.2 also registers its sub-agent projection, and a factory listed twice is registered once.
    assert [t.__name__ for t in own.stream_transformers] == ["ToolCallTransformer", "SubagentTransformer", "_Progress"]
    with pytest.raises(AgentArgumentError, match=r"create_agent\(transformers=\.\.\.\) holds 'progress'"):
        create_agent(ScriptedChatModel(["ok"]), transformers=["progress"])  # type: ignore[list-item]
