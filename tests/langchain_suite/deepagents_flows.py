"""deepagents' documented flows, unchanged library code, on middleware_kit (run by ``test_deepagents.py`` in a
subprocess whose ``langchain.*`` imports are served by :mod:`middleware_kit.langchain_alias`).

Every model is a scripted one: the files a run writes, the sub-agent a ``task`` call starts, the review a write
pauses for, the summary a long conversation gets, each is asserted on what the user gets back.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit.testing import ScriptedChatModel, tool_call

MODES = ["invoke", "ainvoke"]


def _served_by_middleware_kit() -> None:
    import langchain.agents

    assert langchain.agents.create_agent.__module__.startswith("middleware_kit"), "the redirect is not installed"
    assert "langchain" not in {m.split(".")[0] for m in sys.modules if getattr(sys.modules[m], "__file__", None)
                               and "site-packages/langchain/" in (sys.modules[m].__file__ or "")}


async def _run(agent: Any, mode: str, payload: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    if mode == "invoke":
        result: dict[str, Any] = agent.invoke(payload, config)
    else:
        result = await agent.ainvoke(payload, config)
    return result


def _ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def test_deepagents_imports_on_middleware_kit() -> None:
    from deepagents import create_deep_agent

    _served_by_middleware_kit()
    agent = create_deep_agent(model=ScriptedChatModel(["hello"]))
    assert "model" in agent.get_graph().nodes


@pytest.mark.parametrize("mode", MODES)
async def test_files_are_written_and_read_back(mode: str) -> None:
    from deepagents import create_deep_agent

    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("write_file", {"file_path": "/notes.txt", "content": "buy milk\n"})]),
        AIMessage("", tool_calls=[tool_call("read_file", {"file_path": "/notes.txt"})]),
        "The note says: buy milk",
    ])
    result = await _run(create_deep_agent(model=model), mode, _ask("Write a note, then read it back."))
    assert result["messages"][-1].content == "The note says: buy milk"
    assert "/notes.txt" in result["files"]
    read = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "read_file"]
    assert len(read) == 1 and "buy milk" in str(read[0].content)
    # The model saw deepagents' filesystem tools.
    offered = set(model.calls[0].tools)
    assert {"write_file", "read_file", "ls", "edit_file", "task"} <= offered


@pytest.mark.parametrize("mode", MODES)
async def test_a_task_runs_a_sub_agent_and_returns_its_answer(mode: str) -> None:
    from deepagents import create_deep_agent

    researcher = ScriptedChatModel(["The capital of France is Paris."])
    parent = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("task", {"description": "Find the capital of France.",
                                                     "subagent_type": "researcher"})]),
        "Paris.",
    ])
    agent = create_deep_agent(
        model=parent,
        subagents=[{"name": "researcher", "description": "Looks things up.", "system_prompt": "You research.",
                    "model": researcher}],
    )
    result = await _run(agent, mode, _ask("What is the capital of France?"))
    assert result["messages"][-1].content == "Paris."
    answer = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "task"]
    assert len(answer) == 1 and "Paris" in str(answer[0].content)
    # The sub-agent got the task as its own conversation, with its own system prompt.
    (call,) = researcher.calls
    assert any("Find the capital of France." in str(m.content) for m in call.messages)
    assert "You research." in str(call.messages[0].content)


@pytest.mark.parametrize("mode", MODES)
async def test_interrupt_on_pauses_a_write_until_approved(mode: str) -> None:
    from deepagents import create_deep_agent

    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("write_file", {"file_path": "/plan.md", "content": "step 1\n"})]),
        "Written.",
    ])
    agent = create_deep_agent(model=model, interrupt_on={"write_file": True}, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"review-{mode}"}}
    paused = await _run(agent, mode, _ask("Write the plan."), config)
    (pending,) = paused["__interrupt__"]
    (action,) = pending.value["action_requests"]
    assert action["name"] == "write_file" and action["args"]["file_path"] == "/plan.md"
    assert "/plan.md" not in paused.get("files", {})
    done = await _run(agent, mode, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert done["messages"][-1].content == "Written."
    assert "/plan.md" in done["files"]


@pytest.mark.parametrize("mode", MODES)
async def test_interrupt_on_rejection_leaves_no_file(mode: str) -> None:
    from deepagents import create_deep_agent

    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("write_file", {"file_path": "/x.md", "content": "x"})]),
        "Understood, not written.",
    ])
    agent = create_deep_agent(model=model, interrupt_on={"write_file": True}, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"reject-{mode}"}}
    await _run(agent, mode, _ask("Write x."), config)
    done = await _run(
        agent, mode, Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), config
    )
    assert "/x.md" not in done.get("files", {})
    rejected = [m for m in done["messages"] if isinstance(m, ToolMessage) and m.name == "write_file"]
    assert len(rejected) == 1 and rejected[0].status == "error"


@pytest.mark.parametrize("mode", MODES)
async def test_a_long_conversation_is_summarized(mode: str) -> None:
    from deepagents import create_deep_agent

    history: list[Any] = []
    for i in range(30):
        history += [HumanMessage(f"question {i} " + "lorem ipsum " * 20), AIMessage(f"answer {i} " + "dolor " * 20)]
    model = ScriptedChatModel(
        ["A summary of the thirty questions.", "Final answer."], profile={"max_input_tokens": 4000}
    )
    result = await _run(create_deep_agent(model=model), mode, {"messages": [*history, HumanMessage("And now?")]})
    assert result["messages"][-1].content == "Final answer."
    # The model's last call saw a summary instead of the whole history.
    last = model.calls[-1].messages
    assert len(last) < len(history)
    assert any("A summary of the thirty questions." in str(m.content) for m in last)
