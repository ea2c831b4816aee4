"""AutoModeMiddleware: low-risk calls run, risky ones are blocked, or sent to HumanInTheLoopMiddleware for review."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.decisions import NoulCriteria
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import Field, ValidationError

from middleware_kit import MiddlewareConfigError, create_agent, omit_payload
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.auto_mode import DEFAULT_INSTRUCTIONS, AutoModeMiddleware, ClassificationError
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner
from tests.middlewares.test_model_router import ScriptedDecisionModel

RAN: list[tuple[str, str]] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    RAN.append(("read_file", path))
    return f"contents of {path}"


@tool
def delete_file(path: str) -> str:
    """Delete a file permanently."""
    RAN.append(("delete_file", path))
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


Q = {"messages": [HumanMessage("Tidy up my notes folder.")]}


def calls(*pairs: tuple[str, str]) -> AIMessage:
    return AIMessage("", tool_calls=[tool_call(name, {"path": path}, id=f"{name}:{path}") for name, path in pairs])


def results(result: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}


def collect(agent: Any, inp: Any, mode: str, stream_mode: Any = "custom", config: Any = None) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, config, stream_mode=stream_mode))

    async def go() -> list[Any]:
        return [c async for c in agent.astream(inp, config, stream_mode=stream_mode)]

    return asyncio.run(go())


_ANSWERING = threading.Lock()


class RiskByPath(ScriptedDecisionModel):
    """Answers with the risk of the classified call's path: parallel calls may be classified in either order."""

    risks: dict[str, float] = Field(default_factory=dict)

    def _classify(self, state: Any, questions: Any) -> Any:
        with _ANSWERING:
            self.answers.append(self.risks[state["tool_call"]["args"]["path"]])
            return super()._classify(state, questions)


# -- blocking (LangChain 1.5's behaviour) -------------------------------------------------------------------------
def test_low_risk_calls_run_and_risky_ones_are_blocked_without_running(run: Runner) -> None:
    classifier = RiskByPath(risks={"notes/tmp.txt": 0.1, "/": 0.97}, requests=[])
    model = ScriptedChatModel([calls(("delete_file", "notes/tmp.txt"), ("delete_file", "/")), "Done."])
    agent = create_agent(
        model, [read_file, delete_file], middleware=[AutoModeMiddleware([delete_file], classifier=classifier)]
    )
    answers = results(run(agent, Q))
    assert RAN == [("delete_file", "notes/tmp.txt")]
    assert answers["delete_file:notes/tmp.txt"].status == "success"
    blocked = answers["delete_file:/"]
    assert blocked.status == "error" and blocked.name == "delete_file"
    assert str(blocked.content).startswith("Tool call 'delete_file' was blocked and did not run")
    assert "risk 0.97 >= 0.5" in blocked.content


def test_the_classifier_gets_a_noul_question_the_call_the_description_and_recent_messages(run: Runner) -> None:
    classifier = ScriptedDecisionModel(answers=[0.2], requests=[])
    history: list[BaseMessage] = []
    for i in range(20):
        history += [HumanMessage(f"q{i}"), AIMessage(f"a{i}")]
    model = ScriptedChatModel([calls(("delete_file", "a.txt")), "ok"])
    criteria = NoulCriteria(true="Deletes outside notes/.", false="Deletes inside notes/.")
    mw = AutoModeMiddleware(["delete_file"], classifier=classifier, criteria=criteria)
    run(create_agent(model, [delete_file], middleware=[mw]), {"messages": history})
    state, questions = classifier.requests[0]
    assert list(questions) == ["is_risky"]
    assert questions["is_risky"].type == "noul" and questions["is_risky"].instructions == DEFAULT_INSTRUCTIONS
    assert questions["is_risky"].criteria == criteria
    assert state["tool_call"] == {"id": "delete_file:a.txt", "name": "delete_file", "args": {"path": "a.txt"}}
    assert state["tool_description"] == "Delete a file permanently."
    assert len(state["messages"]) == 30 and state["messages"][-1].tool_calls[0]["name"] == "delete_file"


def test_tools_not_listed_are_never_classified(run: Runner) -> None:
    classifier = ScriptedDecisionModel(answers=[], requests=[])
    model = ScriptedChatModel([calls(("read_file", "a"), ("read_file", "b")), "ok"])
    run(
        create_agent(
            model, [read_file, delete_file], middleware=[AutoModeMiddleware(["delete_file"], classifier=classifier)]
        ),
        Q,
    )
    assert classifier.requests == [] and sorted(RAN) == [("read_file", "a"), ("read_file", "b")]


@pytest.mark.parametrize(("risk", "ran"), [(0.49, True), (0.5, False), (0.8, False)])
def test_the_threshold_blocks_at_or_above(run: Runner, risk: float, ran: bool) -> None:
    model = ScriptedChatModel([calls(("delete_file", "x")), "ok"])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedDecisionModel(answers=[risk], requests=[]))
    run(create_agent(model, [delete_file], middleware=[mw]), Q)
    assert (RAN == [("delete_file", "x")]) is ran


def test_events_report_each_decision(mode: str) -> None:
    model = ScriptedChatModel([calls(("delete_file", "a")), calls(("delete_file", "b")), "ok"])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedDecisionModel(answers=[0.05, 0.9], requests=[]))
    events = collect(create_agent(model, [delete_file], middleware=[mw]), Q, mode)
    assert events == [
        {
            "event": "tool_call_classified",
            "middleware": "AutoModeMiddleware",
            "tool": "delete_file",
            "tool_call_id": "delete_file:a",
            "risk": 0.05,
            "decision": "allowed",
        },
        {
            "event": "tool_call_classified",
            "middleware": "AutoModeMiddleware",
            "tool": "delete_file",
            "tool_call_id": "delete_file:b",
            "risk": 0.9,
            "decision": "blocked",
        },
    ]


# -- failures -----------------------------------------------------------------------------------------------------
def test_a_classifier_failure_propagates_and_the_tool_does_not_run(run: Runner) -> None:
    model = ScriptedChatModel([calls(("delete_file", "a")), "ok", "next turn"])
    mw = AutoModeMiddleware(
        ["delete_file"], classifier=ScriptedDecisionModel(answers=[ConnectionError("down")], requests=[])
    )
    agent = create_agent(model, [delete_file], middleware=[mw], checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": "f"}}
    with pytest.raises(ConnectionError, match="down"):
        run(agent, Q, config=cfg)
    assert RAN == []
    # the thread stays usable: the unanswered call is still pending and the next classification decides it
    assert agent.get_state(cfg).values["messages"][-1].tool_calls[0]["id"] == "delete_file:a"


def test_on_error_block_fails_closed_without_ending_the_run(run: Runner) -> None:
    model = ScriptedChatModel([calls(("delete_file", "a")), "I could not delete it."])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel(["perhaps"]), on_error="block")
    result = run(create_agent(model, [delete_file], middleware=[mw]), Q)
    message = results(result)["delete_file:a"]
    assert message.status == "error" and "could not classify it, so it was blocked to be safe" in message.content
    assert RAN == [] and result["messages"][-1].content == "I could not delete it."


# -- beyond LangChain: chat models as classifiers -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "ran"),
    [("0.1", True), ("Risk: 0.85", False), ("yes", False), ("No.", True), ("1", False), (".3", True)],
)
def test_a_chat_model_answers_a_probability(run: Runner, answer: str, ran: bool) -> None:
    model = ScriptedChatModel([calls(("delete_file", "x")), "ok"])
    classifier = ScriptedChatModel([answer])
    run(create_agent(model, [delete_file], middleware=[AutoModeMiddleware(["delete_file"], classifier=classifier)]), Q)
    assert (RAN == [("delete_file", "x")]) is ran
    system, proposal = classifier.calls[0].messages
    assert (
        str(system.content).startswith(DEFAULT_INSTRUCTIONS)
        and "Proposed tool call: delete_file({'path': 'x'})" in proposal.content
    )


def test_an_unreadable_chat_answer_is_a_classification_error(run: Runner) -> None:
    model = ScriptedChatModel([calls(("delete_file", "x")), "ok"])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel(["It depends."]))
    with pytest.raises(ClassificationError, match="not a probability from 0 to 1"):
        run(create_agent(model, [delete_file], middleware=[mw]), Q)


def test_parallel_calls_are_classified_independently(run: Runner) -> None:
    paths = [f"/etc/f{i}" if i % 2 else f"notes/f{i}" for i in range(12)]

    def judge(messages: list[BaseMessage]) -> str:
        proposed = str(messages[-1].content).split("Proposed tool call: ", 1)[1].split("\n", 1)[0]
        return "0.9" if "'/etc/" in proposed else "0.1"

    model = ScriptedChatModel([calls(*[("delete_file", p) for p in paths]), "ok"])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel(default=judge))
    answers = results(run(create_agent(model, [delete_file], middleware=[mw]), Q))
    assert sorted(p for _, p in RAN) == sorted(p for p in paths if p.startswith("notes/"))
    assert {k: v.status for k, v in answers.items()} == {
        f"delete_file:{p}": ("error" if p.startswith("/etc/") else "success") for p in paths
    }


def test_a_chat_classifiers_tokens_never_stream(mode: str) -> None:
    model = ScriptedChatModel([calls(("delete_file", "x")), "Deleted."])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel(["0.123456"]))
    chunks = collect(create_agent(model, [delete_file], middleware=[mw]), Q, mode, "messages")
    assert not any("0.123456" in str(chunk.content) for chunk, _ in chunks)


# -- human review through HumanInTheLoopMiddleware ----------------------------------------------------------------
def test_risky_calls_go_to_human_review_and_low_risk_calls_run_unasked(mode: str) -> None:
    classifier = ScriptedChatModel(["0.05", "0.92"])
    auto = AutoModeMiddleware(["delete_file"], classifier=classifier)
    model = ScriptedChatModel([calls(("delete_file", "notes/old.txt"), ("delete_file", "/home")), "Done."])
    agent = create_agent(
        model,
        [delete_file],
        middleware=[HumanInTheLoopMiddleware(interrupt_on=auto.interrupt_on())],
        checkpointer=InMemorySaver(),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "h"}}
    chunks = collect(agent, Q, mode, ["custom", "updates"], cfg)
    interrupt = next(
        data["__interrupt__"][0].value for kind, data in chunks if kind == "updates" and "__interrupt__" in data
    )
    assert [a["name"] for a in interrupt["action_requests"]] == ["delete_file"]
    assert interrupt["action_requests"][0]["args"] == {"path": "/home"}
    assert interrupt["action_requests"][0]["description"].startswith(
        "Auto mode flagged this tool call for review (risk 92%)."
    )
    assert interrupt["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    decisions = [data for kind, data in chunks if kind == "custom" and data.get("event") == "tool_call_classified"]
    assert [(d["tool_call_id"], d["decision"]) for d in decisions] == [
        ("delete_file:notes/old.txt", "allowed"),
        ("delete_file:/home", "review"),
    ]
    collect(agent, Command(resume={"decisions": [{"type": "reject", "message": "Not /home."}]}), mode, "updates", cfg)
    final = agent.get_state(cfg).values
    assert RAN == [("delete_file", "notes/old.txt")]
    assert results(final)["delete_file:/home"].status == "error"
    assert classifier.call_count == 2  # resuming never re-classifies


def test_an_approved_risky_call_runs(run: Runner) -> None:
    auto = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel(["0.8"]))
    model = ScriptedChatModel([calls(("delete_file", "/tmp/x")), "Done."])
    agent = create_agent(
        model,
        [delete_file],
        checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on=auto.interrupt_on(["approve", "reject"]))],
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "a"}}
    paused = run(agent, Q, config=cfg)
    assert paused["__interrupt__"][0].value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    done = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg)
    assert RAN == [("delete_file", "/tmp/x")] and done["messages"][-1].content == "Done."


def test_a_classifier_failure_sends_the_call_to_a_human(run: Runner) -> None:
    auto = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel([ConnectionError("down")]))
    model = ScriptedChatModel([calls(("delete_file", "x")), "Done."])
    agent = create_agent(
        model,
        [delete_file],
        checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on=auto.interrupt_on())],
    )
    paused = run(agent, Q, config={"configurable": {"thread_id": "e"}})
    description = paused["__interrupt__"][0].value["action_requests"][0]["description"]
    assert "(the classifier failed)" in description and RAN == []


# -- configuration ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "parameter", "text"),
    [
        ({"tools": [None]}, "tools", "tools must hold tool names or BaseTool"),
        ({"classifier": 3}, "classifier", "classifier must be a BaseDecisionModel or a chat model"),
        ({"instructions": ""}, "instructions", "instructions must be a non-empty str"),
        ({"criteria": {"maybe": 1}}, "criteria", "criteria must be NoulCriteria"),
        ({"threshold": 0}, "threshold", r"threshold must be a number in \(0, 1\]"),
        ({"threshold": 1.2}, "threshold", r"threshold must be a number in \(0, 1\]"),
        ({"context_messages": -1}, "context_messages", "context_messages must be an int >= 0"),
        ({"on_error": "review"}, "on_error", "on_error must be 'raise' or 'block'"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], parameter: str, text: str) -> None:
    arguments: dict[str, Any] = {"tools": ["delete_file"], "classifier": ScriptedChatModel([])}
    arguments.update(kwargs)
    with pytest.raises(MiddlewareConfigError, match=f"^AutoModeMiddleware: {text}") as err:
        AutoModeMiddleware(**arguments)
    assert (err.value.middleware, err.value.hook) == ("AutoModeMiddleware", parameter)


@pytest.mark.parametrize("tools", [[], "delete_file"])
def test_invalid_tools_are_a_validation_error(tools: Any) -> None:
    """As LangChain (which validates ``tools`` with pydantic): a ``pydantic.ValidationError``, with our message."""
    with pytest.raises(ValidationError, match="AutoModeMiddleware: tools must be a non-empty list") as err:
        AutoModeMiddleware(tools, classifier=ScriptedChatModel([]))
    assert err.value.errors()[0]["loc"] == ("tools",)


def test_config_tool_names_and_trace_policy_match_langchain() -> None:
    criteria = NoulCriteria(true="Deletes.", false="Reads.")
    mw = AutoModeMiddleware([delete_file, "read_file"], classifier=ScriptedChatModel([]), criteria=criteria)
    assert mw._tool_names == {"delete_file", "read_file"}
    assert mw.config.tools == (delete_file, "read_file") and mw.config.criteria == criteria
    assert mw.config.instructions == DEFAULT_INSTRUCTIONS
    assert mw.trace_policy is not None and mw.trace_policy.process_inputs is omit_payload


def test_a_tool_without_a_description_sends_none(run: Runner) -> None:
    @tool(description="")
    def wipe(path: str) -> str:
        return "wiped"

    wipe.description = ""
    classifier = ScriptedDecisionModel(answers=[0.1], requests=[])
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("wipe", {"path": "x"})]), "ok"])
    run(create_agent(model, [wipe], middleware=[AutoModeMiddleware(["wipe"], classifier=classifier)]), Q)
    state, _ = classifier.requests[0]
    assert "tool_description" not in state


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    names = ["delete_file"]
    mw = AutoModeMiddleware(names, classifier=ScriptedChatModel(["0.6"], cycle=True), criteria={"true": "risky"})
    names.append("read_file")
    assert mw.tools_to_classify == ("delete_file",) and mw.criteria == NoulCriteria(true="risky")
    create_agent(ScriptedChatModel([]), [delete_file], middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'threshold'"):
        mw.threshold = 0.9
    lenient = mw.replace(threshold=0.7)
    model = ScriptedChatModel([calls(("delete_file", "x")), "ok"])
    run(create_agent(model, [delete_file], middleware=[lenient]), Q)
    assert RAN == [("delete_file", "x")] and mw.threshold == 0.5


# -- trying to break it ---------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=30),
        st.floats(0, 1).map(lambda p: f"{p:.3f}"),
        st.sampled_from(["yes", "no", "0.5", "1", "0", "risk: high", "0.49999"]),
    ),
    st.sampled_from(["invoke", "ainvoke"]),
)
def test_with_on_error_block_no_answer_breaks_the_run_and_only_a_low_risk_reading_runs_the_tool(
    answer: str, mode: str
) -> None:
    RAN.clear()
    model = ScriptedChatModel([calls(("delete_file", "x")), "ok"])
    mw = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel([answer]), on_error="block")
    agent = create_agent(model, [delete_file], middleware=[mw])
    result = agent.invoke(Q) if mode == "invoke" else asyncio.run(agent.ainvoke(Q))
    message = results(result)["delete_file:x"]
    assert result["messages"][-1].content == "ok"
    assert (message.status == "success") is (RAN == [("delete_file", "x")])
    if RAN:  # it ran: the classifier's answer must have read as a probability below the threshold
        stripped = answer.strip().lower().strip(" .!")
        assert stripped in ("no", "safe", "false") or any(ch.isdigit() for ch in answer)


async def _cancel_during_classification() -> tuple[bool, list[Any]]:
    started = asyncio.Event()

    class SlowClassifier(ScriptedChatModel):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            started.set()
            await asyncio.sleep(30)
            raise AssertionError("not reached")

    RAN.clear()
    model = ScriptedChatModel([calls(("delete_file", "x")), "ok"])
    agent = create_agent(
        model, [delete_file], middleware=[AutoModeMiddleware(["delete_file"], classifier=SlowClassifier())]
    )
    task = asyncio.create_task(agent.ainvoke(Q))
    await started.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True, list(RAN)
    return False, list(RAN)


def test_cancelling_during_classification_never_runs_the_tool() -> None:
    cancelled, ran = asyncio.run(asyncio.wait_for(_cancel_during_classification(), 10))
    assert cancelled and ran == []


def test_review_descriptions_of_concurrent_runs_never_mix_even_with_equal_call_ids() -> None:
    """HumanInTheLoopMiddleware asks `when`, then `description`, for a call; between the two, another run on the same
    instance may classify a call with the same id (ids like ``call_0`` repeat across runs). The memo was keyed by
    the id alone, so run A's review described run B's risk."""
    from middleware_kit.types import ToolCallRequest

    auto = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel(["0.9", "0.2"]))
    config = auto.interrupt_on()["delete_file"]
    when, describe = cast(Any, config["when"]), cast(Any, config["description"])
    call = tool_call("delete_file", {"path": "/home"}, id="call_0")
    state_a = {"messages": [HumanMessage("a"), AIMessage("", tool_calls=[call], id="run-a-msg")]}
    state_b = {"messages": [HumanMessage("b"), AIMessage("", tool_calls=[call], id="run-b-msg")]}
    assert when(ToolCallRequest(call, None, state_a)) is True  # risk 0.9
    assert when(ToolCallRequest(call, None, state_b)) is False  # risk 0.2, same id and args, another run
    assert "(risk 90%)" in describe(call, state_a, None)
    assert "(risk 20%)" in describe(call, state_b, None)


def test_tool_descriptions_on_the_instance_are_read_only() -> None:
    auto = AutoModeMiddleware([delete_file], classifier=ScriptedChatModel(["0.1"]))
    with pytest.raises(TypeError):
        auto._descriptions["delete_file"] = "harmless"  # type: ignore[index]


def test_one_instance_classifies_concurrent_runs_in_isolation() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def main(messages: list[BaseMessage]) -> AIMessage | str:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return f"{last.status}: {last.content}"[:60]
        path = str(last.content).split()[-1]
        return AIMessage("", tool_calls=[tool_call("delete_file", {"path": path}, id="call_0")])

    def risk(messages: list[BaseMessage]) -> str:
        return "0.95" if "/etc" in str(messages[-1].content) else "0.05"

    auto = AutoModeMiddleware(["delete_file"], classifier=ScriptedChatModel([risk], cycle=True))
    agent = create_agent(ScriptedChatModel([main], cycle=True), [delete_file], middleware=[auto])

    def ask(i: int) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"delete {'/etc/x' if i % 3 == 0 else f'notes/{i}.txt'}")]}

    async def many(ids: list[int]) -> list[Any]:
        return list(await asyncio.gather(*(agent.ainvoke(ask(i)) for i in ids)))

    with ThreadPoolExecutor(4) as pool:
        threaded = {i: pool.submit(agent.invoke, ask(i)) for i in range(0, 18, 2)}
        gathered = dict(zip(range(1, 18, 2), asyncio.run(many(list(range(1, 18, 2)))), strict=True))
        results = {i: f.result() for i, f in threaded.items()} | gathered
    assert sorted(RAN) == sorted(("delete_file", f"notes/{i}.txt") for i in range(18) if i % 3)
    for i, result in results.items():
        assert result["messages"][-1].content.startswith("error:" if i % 3 == 0 else "success:"), i
