"""Every deliberate difference from LangChain 1.5 that docs/migration.md lists, shown by running it.

Each test asserts what middleware_kit does and says in a comment what LangChain 1.5 does instead; the migration page
links here. (Differences that are bugs to fix live in tests/compat/test_docs_*.py as strict xfails.)
"""

from __future__ import annotations

import dataclasses
from typing import Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    InvalidJumpError,
    MiddlewareConfigError,
    ModelResponse,
    UnknownStateKeyError,
    after_model,
    before_model,
    create_agent,
    wrap_model_call,
)
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares._tokens import TiktokenCounter
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware, ToolCallLimitMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware, calculate_delay
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.middlewares.todo_list import TodoListMiddleware
from middleware_kit.testing import ScriptedChatModel, make_request, run_model_chain, tool_call
from tests.conftest import Runner

Q = {"messages": [HumanMessage("hi")]}


def test_requests_are_frozen() -> None:
    # LangChain 1.5: assigning a ModelRequest attribute only warns (DeprecationWarning).
    # The lists are LangChain's (an agent gives each model call copies of its own: see
    # tests/integration/test_model_request.py::test_in_place_edits_cannot_leak_into_state).
    request = make_request(["hi"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.messages = []
    assert request.override(messages=[]).messages == [] and len(request.messages) == 1
    assert isinstance(request.messages, list) and isinstance(request.tools, list)


def test_an_undeclared_jump_raises(run: Runner) -> None:
    # LangChain 1.5: the jump is silently ignored.
    @before_model
    def stop(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    with pytest.raises(InvalidJumpError, match="can_jump_to"):
        run(create_agent(ScriptedChatModel(["ok"]), middleware=[stop]), Q)


def test_an_undeclared_state_key_raises(run: Runner) -> None:
    # LangChain 1.5: the key is silently dropped.
    @before_model
    def remember(state: Any, runtime: Any) -> dict[str, Any]:
        return {"last_question": "hi"}

    with pytest.raises(UnknownStateKeyError, match="last_question"):
        run(create_agent(ScriptedChatModel(["ok"]), middleware=[remember]), Q)


def test_a_sync_only_wrap_hook_runs_under_ainvoke_and_an_async_one_under_invoke(run: Runner) -> None:
    # LangChain 1.5: NotImplementedError when the wrap hook exists only in the other mode.
    @wrap_model_call
    def sync_only(request: Any, handler: Any) -> Any:
        return handler(request.override(system_prompt="sync"))

    @wrap_model_call
    async def async_only(request: Any, handler: Any) -> Any:
        return await handler(request)

    model = ScriptedChatModel(["ok"])
    assert run(create_agent(model, middleware=[sync_only, async_only]), Q)["messages"][-1].content == "ok"
    assert model.calls[0].messages[0].content == "sync"


class Seen(AgentState):
    seen: NotRequired[int]


def test_fused_nodes_names_and_the_values_stream() -> None:
    # LangChain 1.5: one node per hook ("a.before_model", "model", "b.after_model"), and stream_mode="values" yields a
    # snapshot after each of them. Here the hooks and the model call share the node "model": one snapshot.
    @before_model(state_schema=Seen)
    def a(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [AIMessage("from a")], "seen": 1}

    @after_model
    def b(state: Any, runtime: Any) -> None:
        return None

    agent = create_agent(ScriptedChatModel(["ok"], cycle=True), middleware=[a, b])
    updates = [next(iter(chunk)) for chunk in agent.stream(Q, stream_mode="updates")]
    assert updates == ["model"]
    snapshots = [[m.content for m in chunk["messages"]] for chunk in agent.stream(Q, stream_mode="values")]
    assert snapshots == [["hi"], ["hi", "from a", "ok"]]
    with pytest.raises(MiddlewareConfigError, match="model"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[a, b], interrupt_before=["a.before_model"])


def test_bundled_middleware_configuration_is_frozen() -> None:
    # LangChain 1.5: attributes of a middleware can be reassigned at any time (and affect every run of every agent
    # built with it). Here too until an agent adopts the instance (validated as a constructor argument), then never.
    retry = ModelRetryMiddleware(max_retries=1)
    retry.max_retries = 2
    with pytest.raises(MiddlewareConfigError, match="max_retries"):
        retry.max_retries = -1
    create_agent(ScriptedChatModel(["ok"]), middleware=[retry])
    with pytest.raises(FrozenMiddlewareError) as err:
        retry.max_retries = 5
    assert isinstance(err.value, AttributeError) and "replace(max_retries=...)" in str(err.value)
    assert retry.max_retries == 2 and retry.replace(max_retries=5).max_retries == 5
    # `name` is identity, not configuration: a second instance of one class gets its own name, as in LangChain.
    hard = ModelCallLimitMiddleware(thread_limit=50)
    hard.name = "HardLimit"
    create_agent(ScriptedChatModel(["ok"]), middleware=[ModelCallLimitMiddleware(run_limit=5), hard])
    assert ModelCallLimitMiddleware(run_limit=1).replace(name="Soft").name == "Soft"


def test_bundled_wrap_hooks_keep_langchains_signatures() -> None:
    # LangChain 1.5: mw.wrap_model_call(request, handler) can be called directly on any bundled middleware; so can it
    # here (both twins drive the middleware's one flow), and through middleware_kit.testing.run_model_chain.
    model = ScriptedChatModel([ConnectionError("down")])
    backup = ScriptedChatModel(["from the backup"])
    response = run_model_chain(ModelFallbackMiddleware(backup), make_request(["hi"], model=model))
    assert response.result[-1].content == "from the backup"  # type: ignore[union-attr]
    direct = ModelFallbackMiddleware(ScriptedChatModel(["direct"])).wrap_model_call(
        make_request(["hi"], model=ScriptedChatModel([ConnectionError("down")])),
        lambda r: ModelResponse(result=[r.model.invoke(list(r.messages))]),
    )
    assert direct.result[-1].content == "direct"  # type: ignore[union-attr]


def test_summarization_counts_the_whole_request_and_its_default_trigger_fires() -> None:
    # LangChain 1.5: the trigger measures the messages only, and without `trigger` it never summarizes. Here it also
    # counts the agent's system prompt and bound tools (exactly, with tiktoken by default), and defaults to 75% of
    # the model's window (100k tokens without a profile).
    assert SummarizationMiddleware(ScriptedChatModel([])).trigger == ("tokens", 100_000)
    assert SummarizationMiddleware(ScriptedChatModel([], profile={"max_input_tokens": 1000})).trigger == (
        "fraction", 0.75)
    history = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    prompt = "Answer in full sentences. " * 50
    whole = TiktokenCounter()([SystemMessage(prompt), *history])
    mw = SummarizationMiddleware(ScriptedChatModel(["S"]), trigger=("tokens", whole), keep=("messages", 1))
    bare = create_agent(ScriptedChatModel(["final"]), middleware=[mw]).invoke({"messages": history})
    prompted = create_agent(ScriptedChatModel(["final"]), system_prompt=prompt, middleware=[mw]).invoke(
        {"messages": history})
    assert not is_summary(bare["messages"][0]) and is_summary(prompted["messages"][0])


def test_retry_differences() -> None:
    # LangChain 1.5: retry_on defaults to every Exception and a rejected error goes through on_failure; a jittered
    # delay may exceed max_delay by 25%. Here rejected errors propagate and max_delay is never exceeded.
    assert all(
        calculate_delay(20, backoff_factor=2.0, initial_delay=1.0, max_delay=10.0, jitter=True) <= 10.0
        for _ in range(200)
    )
    with pytest.raises(PermissionError):
        model = ScriptedChatModel([PermissionError("no")])
        run_model_chain(ModelRetryMiddleware(retry_on=(ConnectionError,), sleep=lambda s: None),
                        make_request(["hi"], model=model))


def test_todo_prompt_keeps_the_system_messages_identity() -> None:
    # LangChain 1.5 builds a new SystemMessage from the content blocks (dropping its id and additional_kwargs);
    # here the same blocks are appended to a copy of the message, which keeps them.
    system = SystemMessage("Base.", id="sys", additional_kwargs={"k": 1})
    response_holder: list[Any] = []

    def handler(request: Any) -> AIMessage:
        response_holder.append(request.system_message)
        return AIMessage("ok")

    run_model_chain(TodoListMiddleware(system_prompt="Plan."), make_request(["hi"], system_message=system),
                    handler=handler)
    sent = response_holder[0]
    assert (sent.id, sent.additional_kwargs) == ("sys", {"k": 1})
    assert sent.content == [{"type": "text", "text": "Base."}, {"type": "text", "text": "\n\nPlan."}]


def test_limits_validate_more() -> None:
    # LangChain 1.5 accepts negative or non-int limits and an empty tool_name; here they are refused at construction.
    for kwargs in ({"run_limit": -1}, {"thread_limit": 1.5}, {"tool_name": "", "run_limit": 1}):
        with pytest.raises(MiddlewareConfigError):
            ToolCallLimitMiddleware(**kwargs)


class _Plain(AgentMiddleware):
    pass


def test_agent_middleware_subclasses_need_no_super_init() -> None:
    # Identical to LangChain (listed here because FrozenConfig only applies to the bundled middlewares).
    mw = _Plain()
    mw.anything = 1  # type: ignore[attr-defined]
    assert mw.name == "_Plain"


def _hitl_agent(mode: str) -> tuple[Any, list[str]]:
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(f"send_email({to})")
        return f"sent to {to}"

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(f"read_file({path})")
        return "contents"

    model = ScriptedChatModel([AIMessage("", tool_calls=[
        tool_call("send_email", {"to": "alice"}, id="c_1"), tool_call("send_email", {"to": "carol"}, id="c_2"),
        tool_call("read_file", {"path": "y.txt"}, id="c_3"),
    ]), "done"])
    hitl = HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode=mode)  # type: ignore[arg-type]
    return create_agent(model, [send_email, read_file], middleware=[hitl], checkpointer=InMemorySaver()), ran


def test_hitl_edit_keeps_the_models_call_in_the_ai_message() -> None:
    # As LangChain 1.5 (no longer a difference): the AIMessage keeps the model's own call, the reviewer's runs in its
    # place, and the ToolMessage starts with LangChain's edit notice naming what ran. Ours on top: the audit trail
    # (requested and executed calls, every decision) is kept in the thread's private state, never in the message.
    agent, ran = _hitl_agent("batched")
    config: Any = {"configurable": {"thread_id": "edit"}}
    agent.invoke(Q, config)
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}
    out = agent.invoke(Command(resume={"decisions": [edit, {"type": "approve"}]}), config)
    ai = out["messages"][1]
    assert ai.tool_calls[0]["args"] == {"to": "alice"}
    assert "human_review" not in ai.response_metadata
    review = agent.get_state(config).values["human_review"]["c_1"]
    assert (review["requested"]["args"], review["executed"]["args"]) == ({"to": "alice"}, {"to": "bob"})
    answer = next(m for m in out["messages"] if getattr(m, "tool_call_id", None) == "c_1")
    assert answer.content.startswith("Note: a human reviewer replaced this tool call before it ran.")
    assert 'Executed instead: send_email with arguments {"to": "bob"}.' in answer.content
    assert sorted(ran) == ["read_file(y.txt)", "send_email(bob)", "send_email(carol)"]


def test_hitl_per_call_pauses_one_call_at_a_time_before_any_call_runs() -> None:
    # LangChain 1.5 raises per_call interrupts in the tool node: every gated call of the turn pauses at once and the
    # ungated read_file runs meanwhile. Here they come one after the other from after_model, and no call of the turn
    # runs until every gated call is decided (a resume never re-runs a tool).
    agent, ran = _hitl_agent("per_call")
    config: Any = {"configurable": {"thread_id": "per-call"}}
    (first,) = agent.invoke(Q, config)["__interrupt__"]
    assert first.value["tool_call_id"] == "c_1" and ran == []
    (second,) = agent.invoke(Command(resume={first.id: {"type": "approve"}}), config)["__interrupt__"]
    assert second.value["tool_call_id"] == "c_2" and ran == []
    agent.invoke(Command(resume={second.id: {"type": "reject", "message": "no"}}), config)
    assert sorted(ran) == ["read_file(y.txt)", "send_email(alice)"]
