"""LoopGuardMiddleware: repeats, unknown tools, A-B oscillation and no progress, acted on in steps; and a final
answer instead of GraphRecursionError, whatever the recursion limit."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError

from middleware_kit import create_agent
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.loop_guard import DEFAULT_FINAL_PROMPT, FALLBACK_ANSWER, LoopGuardMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


def calling(name: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[tool_call(name, args)])


def ask(text: str = "find it") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def make_search(runs: list[str], result: Any = None) -> Any:
    @tool
    def search(query: str) -> str:
        """Search."""
        runs.append(query)
        return result(query) if result else f"results for {query}"

    return search


def stream(agent: Any, inp: Any, mode: str, **kwargs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async def collect() -> list[tuple[str, Any]]:
        return [c async for c in agent.astream(inp, stream_mode=["values", "custom"], **kwargs)]

    chunks = list(agent.stream(inp, stream_mode=["values", "custom"], **kwargs)) if mode == "invoke" else \
        asyncio.run(collect())
    return [c for m, c in chunks if m == "values"][-1], [c for m, c in chunks if m == "custom"]


def assert_paired(messages: list[Any]) -> None:
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            answers = []
            for later in messages[i + 1 :]:
                if not isinstance(later, ToolMessage):
                    break
                answers.append(later.tool_call_id)
            assert sorted(answers) == sorted(str(c["id"]) for c in message.tool_calls)


def test_repeats_nudge_then_remove_the_tool_then_force_the_final_answer(mode: str) -> None:
    runs: list[str] = []
    model = ScriptedChatModel([calling("search", query="x")], cycle=True)
    agent = create_agent(model, [make_search(runs)], middleware=[LoopGuardMiddleware()])
    result, seen = stream(agent, ask(), mode)
    assert runs == ["x", "x"]  # two identical calls allowed; none of the refused ones ran
    loops = [(e["kind"], e["action"]) for e in seen if e["event"] == "loop_detected"]
    assert loops == [("repeat", "nudge"), ("repeat", "remove_tool"), ("unknown_tool", "final_answer")]
    assert [e["tool"] for e in seen if e["event"] == "loop_guard_tool_removed"] == ["search"]
    # After the removal the model was offered no tools; the forced final call too, with the final instruction.
    assert [c.tools for c in model.calls] == [("search",)] * 4 + [(), ()]
    assert model.calls[-1].messages[-1].content == DEFAULT_FINAL_PROMPT
    assert result["messages"][-1].content == FALLBACK_ANSWER  # the model still asked for tools: they were dropped
    nudges = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.text.startswith("[loop guard]")]
    assert "already called 'search' with these exact arguments 2 time(s)" in nudges[0].text
    assert "no longer available" in nudges[1].text
    assert_paired(result["messages"])
    assert DEFAULT_FINAL_PROMPT not in [m.content for m in result["messages"]]  # ephemeral


def test_unknown_tool_is_answered_with_the_available_tools(run: Runner) -> None:
    runs: list[str] = []
    model = ScriptedChatModel([calling("serach", query="x"), calling("search", query="x"), "found it"])
    agent = create_agent(model, [make_search(runs)], middleware=[LoopGuardMiddleware()])
    result = run(agent, ask())
    refusal = result["messages"][2]
    assert isinstance(refusal, ToolMessage) and refusal.status == "error"
    assert refusal.text == ("[loop guard] The tool 'serach' does not exist. Available tools: search.")
    assert runs == ["x"] and result["messages"][-1].content == "found it"
    assert "loop_guard" not in result  # private state


def test_a_b_oscillation_is_detected(run: Runner) -> None:
    runs: list[str] = []
    model = ScriptedChatModel([calling("search", query="a"), calling("search", query="b")], cycle=True)
    guard = LoopGuardMiddleware(max_identical_calls=10, actions=("final_answer",), no_progress_turns=None)
    agent = create_agent(model, [make_search(runs)], middleware=[guard])
    result = run(agent, ask())
    assert runs == ["a", "b", "a"]  # the 4th call completes A B A B: refused, then the final answer is forced
    assert "alternating between the same two tool calls" in result["messages"][8].text
    assert model.calls[-1].tools == () and result["messages"][-1].content == FALLBACK_ANSWER
    assert_paired(result["messages"])


def test_no_progress_nudges_the_next_call_only(mode: str) -> None:
    runs: list[str] = []
    queries = (calling("search", query=f"q{i}") for i in itertools.count())
    model = ScriptedChatModel([lambda m: next(queries)] * 4 + ["giving up: nothing found"])
    agent = create_agent(model, [make_search(runs, result=lambda q: "nothing found")],
                         middleware=[LoopGuardMiddleware(no_progress_turns=2)])
    result, seen = stream(agent, ask(), mode)
    # Turn 1 is new information, turns 2 and 3 repeat it: the 4th model call gets a note.
    [event] = [e for e in seen if e["event"] == "loop_detected"]
    assert event["kind"] == "no_progress" and event["tools"] == ["search"] and event["action"] == "nudge"
    note = model.calls[3].messages[-1]
    assert isinstance(note, HumanMessage) and "returned nothing new" in note.text
    assert all("returned nothing new" not in m.text for m in result["messages"])
    assert runs == ["q0", "q1", "q2", "q3"]


@pytest.mark.parametrize("limit", [3, 4, 5, 8, 9, 12, 25])
def test_final_answer_instead_of_graph_recursion_error(run: Runner, limit: int) -> None:
    runs: list[str] = []
    fresh = (calling("search", query=f"q{i}") for i in itertools.count())  # never a loop: new calls, new results
    model = ScriptedChatModel(default=lambda m: next(fresh) if m[-1].content != DEFAULT_FINAL_PROMPT else "summary")
    agent = create_agent(model, [make_search(runs)], middleware=[LoopGuardMiddleware()])
    result = run(agent, ask(), config={"recursion_limit": limit})
    assert result["messages"][-1].content == "summary"
    assert model.calls[-1].tools == ()
    assert_paired(result["messages"])

    unguarded = create_agent(ScriptedChatModel(default=lambda m: next(fresh)), [make_search(runs)])
    with pytest.raises(GraphRecursionError):
        run(unguarded, ask(), config={"recursion_limit": limit})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(min_value=3, max_value=40), spare=st.integers(min_value=3, max_value=6),
       pattern=st.lists(st.sampled_from(["a", "b", "c", "ghost"]), min_size=1, max_size=6))
def test_no_script_reaches_the_recursion_limit(limit: int, spare: int, pattern: list[str]) -> None:
    """Whatever the model calls (repeats, unknown tools, cycles), the run ends with an answer."""
    steps = itertools.cycle(pattern)
    model = ScriptedChatModel(default=lambda m: calling("search" if (s := next(steps)) != "ghost" else "ghost",
                                                         query=s))
    agent = create_agent(model, [make_search([])], middleware=[LoopGuardMiddleware(steps_to_spare=spare)])
    result = agent.invoke(ask(), {"recursion_limit": limit})
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert_paired(result["messages"])


def test_default_recursion_limit_forces_nothing(run: Runner) -> None:
    model = ScriptedChatModel([calling("search", query="a"), "done"])
    agent = create_agent(model, [make_search([])], middleware=[LoopGuardMiddleware()])
    assert run(agent, ask())["messages"][-1].content == "done"
    assert model.calls[-1].tools == ("search",)


def test_other_calls_of_a_final_answer_turn_are_closed(run: Runner) -> None:
    runs: list[str] = []
    twice = AIMessage("", tool_calls=[tool_call("search", {"query": "x"}), tool_call("search", {"query": "y"})])
    model = ScriptedChatModel([calling("search", query="x"), twice, "final"])
    agent = create_agent(model, [make_search(runs)],
                         middleware=[LoopGuardMiddleware(max_identical_calls=1, actions=("final_answer",))])
    result = run(agent, ask())
    assert runs == ["x"] and result["messages"][-1].content == "final"
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)][1:]
    assert [a.status for a in answers] == ["error", "error"]
    assert "was not executed: the loop guard asked for a final answer" in answers[1].text
    assert_paired(result["messages"])


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"max_identical_calls": 0}, "max_identical_calls"),
        ({"oscillation_cycles": 0}, "oscillation_cycles"),
        ({"no_progress_turns": True}, "no_progress_turns"),
        ({"steps_to_spare": -1}, "steps_to_spare"),
        ({"actions": ("nudge", "explode")}, "actions"),
        ({"actions": "nudge"}, "actions"),
        ({"actions": ()}, "actions"),
        ({"final_prompt": " "}, "final_prompt"),
        ({"detect_unknown_tools": "yes"}, "detect_unknown_tools"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], param: str) -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        LoopGuardMiddleware(**kwargs)
    assert err.value.hook == param and str(err.value).startswith(f"LoopGuardMiddleware: {param}")


def test_configuration_is_frozen() -> None:
    actions: list[Any] = ["nudge", "final_answer"]
    guard = LoopGuardMiddleware(actions=actions)
    actions.append("remove_tool")
    assert guard.actions == ("nudge", "final_answer")
    strict = guard.replace(max_identical_calls=1, actions=("final_answer",))
    runs: list[str] = []
    model = ScriptedChatModel([calling("search", query="x")] * 2 + ["final"])
    agent = create_agent(model, [make_search(runs)], middleware=[strict])
    with pytest.raises(FrozenMiddlewareError):  # read-only once an agent adopts it
        strict.max_identical_calls = 5
    result = agent.invoke(ask())
    assert runs == ["x"] and result["messages"][-1].content == "final"
    assert guard.max_identical_calls == 2
    guard.max_identical_calls = 5  # before adoption, as in LangChain
    assert guard.max_identical_calls == 5


def test_one_instance_serves_concurrent_runs() -> None:
    guard = LoopGuardMiddleware()

    async def one(i: int) -> list[BaseMessage]:
        runs: list[str] = []
        model = ScriptedChatModel([calling("search", query=str(i))] * 2 + [f"answer {i}"])
        agent = create_agent(model, [make_search(runs)], middleware=[guard])
        out = await agent.ainvoke(ask())
        assert runs == [str(i)] * 2
        return list(out["messages"])

    async def many() -> list[list[BaseMessage]]:
        return await asyncio.gather(*(one(i) for i in range(12)))

    for i, messages in enumerate(asyncio.run(many())):
        assert messages[-1].content == f"answer {i}"


def test_recursion_limit_counts_per_invocation_on_a_thread(run: Runner) -> None:
    """Step numbers keep growing on a checkpointed thread; each invocation still gets its own answer in time."""
    from langgraph.checkpoint.memory import InMemorySaver

    fresh = (calling("search", query=f"q{i}") for i in itertools.count())
    model = ScriptedChatModel(default=lambda m: next(fresh) if m[-1].content != DEFAULT_FINAL_PROMPT else "summary")
    agent = create_agent(model, [make_search([])], middleware=[LoopGuardMiddleware()], checkpointer=InMemorySaver())
    config = {"recursion_limit": 9, "configurable": {"thread_id": "long"}}
    for _ in range(3):
        result = run(agent, ask(), config=config)
        assert result["messages"][-1].content == "summary"
        assert_paired(result["messages"])
    calls_per_turn = sum(1 for c in model.calls if c.tools) / 3
    assert calls_per_turn >= 2  # each turn used its steps, not a budget left over from the previous turn


def test_no_progress_can_remove_the_stale_tools(run: Runner) -> None:
    queries = (calling("search", query=f"q{i}") for i in itertools.count())
    model = ScriptedChatModel([lambda m: next(queries)] * 3 + ["done"])
    guard = LoopGuardMiddleware(no_progress_turns=1, actions=("remove_tool",))
    agent = create_agent(model, [make_search([], result=lambda q: "same")], middleware=[guard])
    result = run(agent, ask())
    # Turn 1 is new, turn 2 repeats it: the 3rd call is made without `search`.
    assert [c.tools for c in model.calls] == [("search",), ("search",), (), ()]
    refusal = result["messages"][-2]  # the model called the removed tool once more: refused, not run
    assert isinstance(refusal, ToolMessage) and "was removed for the rest of this run" in refusal.text
    assert result["messages"][-1].content == "done"
