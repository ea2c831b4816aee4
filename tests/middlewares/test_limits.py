"""ModelCallLimitMiddleware and ToolCallLimitMiddleware: thread limits across invocations, run limits per invocation."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import MiddlewareConfigError, MiddlewareError, create_agent
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.limits import (
    ModelCallLimitExceededError,
    ModelCallLimitMiddleware,
    ToolCallLimitExceededError,
    ToolCallLimitMiddleware,
)
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add, echo
from tests.helpers import kinds


def ask(text: str = "q") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def calls(*names: str) -> AIMessage:
    args = {"add": {"a": 1, "b": 2}, "echo": {"text": "x"}}
    return AIMessage("", tool_calls=[tool_call(n, args[n]) for n in names])


def assert_paired(messages: list[Any]) -> None:
    """Every tool call has exactly one ToolMessage, right after its AIMessage's other answers."""
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            answers = []
            for later in messages[i + 1 :]:
                if not isinstance(later, ToolMessage):
                    break
                answers.append(later.tool_call_id)
            assert sorted(answers) == sorted(c["id"] for c in message.tool_calls)


# -- model calls ------------------------------------------------------------------------------------------------
def test_run_limit_ends_the_run_with_a_message(run: Runner) -> None:
    model = ScriptedChatModel([calls("add")], cycle=True)  # would loop forever
    agent = create_agent(model, [add], middleware=[ModelCallLimitMiddleware(run_limit=2)])
    result = run(agent, ask())
    assert model.call_count == 2
    assert result["messages"][-1].content == "Model call limits exceeded: run limit (2/2)"
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage",
                                         "AIMessage"]
    assert_paired(result["messages"])
    assert "run_model_call_count" not in result and "thread_model_call_count" not in result


def test_thread_limit_persists_across_invocations_and_run_limit_resets(run: Runner) -> None:
    model = ScriptedChatModel(["answer"], cycle=True)
    agent = create_agent(model, middleware=[ModelCallLimitMiddleware(thread_limit=3, run_limit=1)],
                         checkpointer=InMemorySaver())
    for _ in range(3):  # run_limit=1 each time: the run count starts again at 0
        assert run(agent, ask(), config=thread())["messages"][-1].content == "answer"
    result = run(agent, ask(), config=thread())
    assert result["messages"][-1].content == "Model call limits exceeded: thread limit (3/3)"
    assert model.call_count == 3
    assert agent.get_state(thread()).values["thread_model_call_count"] == 3

    assert run(agent, ask(), config=thread("other"))["messages"][-1].content == "answer"  # another thread


def test_exit_behavior_error_raises_with_the_counts(run: Runner) -> None:
    model = ScriptedChatModel([calls("add")], cycle=True)
    agent = create_agent(model, [add], middleware=[ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")])
    with pytest.raises(ModelCallLimitExceededError) as err:
        run(agent, ask())
    error = err.value
    assert isinstance(error, MiddlewareError)
    assert (error.thread_count, error.run_count, error.thread_limit, error.run_limit) == (1, 1, None, 1)
    assert (error.middleware, error.hook) == ("ModelCallLimitMiddleware", "before_model")
    assert str(error).startswith("Model call limits exceeded: run limit (1/1). ")
    assert "exit_behavior='end'" in str(error)
    assert pickle.loads(pickle.dumps(error)).run_count == 1


def test_a_retried_model_call_counts_once(run: Runner) -> None:
    model = ScriptedChatModel([ConnectionError(), calls("add"), ConnectionError(), "done"])
    limit = ModelCallLimitMiddleware(run_limit=2, exit_behavior="error")
    agent = create_agent(model, [add], middleware=[limit, ModelRetryMiddleware(sleep=lambda s: None)],
                         checkpointer=InMemorySaver())
    assert run(agent, ask(), config=thread())["messages"][-1].content == "done"
    assert agent.get_state(thread()).values["run_model_call_count"] == 2


def test_several_model_limits_share_the_counts(run: Runner) -> None:
    soft = ModelCallLimitMiddleware(run_limit=2)
    class HardModelLimit(ModelCallLimitMiddleware):  # a second instance needs its own name
        pass

    hard = HardModelLimit(thread_limit=10, exit_behavior="error")
    model = ScriptedChatModel([calls("add")], cycle=True)
    agent = create_agent(model, [add], middleware=[soft, hard], checkpointer=InMemorySaver())
    result = run(agent, ask(), config=thread())
    assert model.call_count == 2 and result["messages"][-1].content.startswith("Model call limits exceeded")
    assert agent.get_state(thread()).values["thread_model_call_count"] == 2  # not 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, r"^At least one limit must be specified \(thread_limit or run_limit\)\. ModelCallLimitMiddleware: pass"),
        ({"run_limit": -1}, "run_limit must be an int >= 0"),
        ({"thread_limit": "3"}, "thread_limit must be an int >= 0"),
        ({"run_limit": 1, "exit_behavior": "continue"},
         r"^Invalid exit_behavior: continue\. Must be 'end' or 'error'\. "),
    ],
)
def test_model_limit_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(MiddlewareConfigError, match=match) as err:
        ModelCallLimitMiddleware(**kwargs)
    assert isinstance(err.value, ValueError) and err.value.middleware == "ModelCallLimitMiddleware"


# -- tool calls -------------------------------------------------------------------------------------------------
def test_tool_limit_continue_refuses_the_calls_beyond_the_limit(run: Runner) -> None:
    model = ScriptedChatModel([calls("add", "add", "echo"), "done"])
    agent = create_agent(model, [add, echo], middleware=[ToolCallLimitMiddleware(tool_name="add", run_limit=1)])
    result = run(agent, ask())
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    first, second, third = (c["id"] for c in result["messages"][1].tool_calls)
    assert answers[first].content == "3" and answers[third].content == "x"
    assert answers[second].status == "error"
    assert answers[second].content == "Tool call limit exceeded. Do not call 'add' again."
    assert result["messages"][-1].content == "done"
    assert_paired(result["messages"])
    assert any(m.content == answers[second].content for m in model.calls[1].messages)  # the model was told


def test_tool_thread_limit_across_invocations(run: Runner) -> None:
    model = ScriptedChatModel([calls("add"), "ok"], cycle=True)
    agent = create_agent(model, [add], middleware=[ToolCallLimitMiddleware(thread_limit=2, run_limit=1)],
                         checkpointer=InMemorySaver())
    for _ in range(2):
        result = run(agent, ask(), config=thread())
        assert result["messages"][-2].content == "3"  # the tool ran
    result = run(agent, ask(), config=thread())
    assert result["messages"][-2].status == "error" and result["messages"][-2].content == (
        "Tool call limit exceeded. Do not make additional tool calls.")
    values = agent.get_state(thread()).values
    assert values["thread_tool_call_count"] == {"__all__": 2}
    assert values["run_tool_call_count"] == {"__all__": 1}  # the refused call was attempted in this run
    assert_paired(result["messages"])


def test_tool_run_limit_resets_each_invocation(run: Runner) -> None:
    model = ScriptedChatModel([calls("add"), calls("add"), "ok"], cycle=True)
    agent = create_agent(model, [add], middleware=[ToolCallLimitMiddleware(run_limit=1)],
                         checkpointer=InMemorySaver())
    for _ in range(2):
        result = run(agent, ask(), config=thread())
        ran = [m for m in result["messages"][-4:] if isinstance(m, ToolMessage)]
        assert [m.status for m in ran] == ["success", "error"]


def test_tool_limit_error_raises_with_the_counts(run: Runner) -> None:
    model = ScriptedChatModel([calls("add", "add"), "never"])
    limit = ToolCallLimitMiddleware(tool_name="add", thread_limit=1, exit_behavior="error")
    with pytest.raises(ToolCallLimitExceededError) as err:
        run(create_agent(model, [add], middleware=[limit]), ask())
    error = err.value
    assert (error.thread_count, error.run_count, error.thread_limit, error.run_limit, error.tool_name) == (
        2, 2, 1, None, "add")
    assert (error.middleware, error.hook) == ("ToolCallLimitMiddleware[add]", "after_model")
    assert str(error).startswith("'add' tool call limit reached: thread limit exceeded (2/1 calls). ")
    assert "exit_behavior='continue'" in str(error)


def test_tool_limit_end_closes_every_call_and_ends(run: Runner) -> None:
    model = ScriptedChatModel([calls("add"), calls("echo", "add"), "next run"])
    saver = InMemorySaver()
    limit = ToolCallLimitMiddleware(tool_name="add", thread_limit=1, exit_behavior="end")
    agent = create_agent(model, [add, echo], middleware=[limit], checkpointer=saver)
    result = run(agent, ask(), config=thread())
    assert model.call_count == 2
    tail = result["messages"][3:]
    assert kinds(tail) == ["AIMessage", "ToolMessage", "ToolMessage", "AIMessage"]
    echo_answer, add_answer = tail[1], tail[2]  # in call order
    assert echo_answer.content.startswith("Tool call 'echo' was not executed") and echo_answer.status == "error"
    assert add_answer.content == "Tool call limit exceeded. Do not call 'add' again." and add_answer.status == "error"
    assert tail[-1].content == "'add' tool call limit reached: thread limit exceeded (2/1 calls)."
    assert_paired(result["messages"])
    # The thread is left valid: the next invocation sends the model a complete history.
    assert run(agent, ask("again"), config=thread())["messages"][-1].content == "next run"
    assert_paired(list(model.calls[-1].messages))


def test_several_tool_limits_in_one_agent(run: Runner) -> None:
    per_tool = ToolCallLimitMiddleware(tool_name="add", run_limit=1)
    overall = ToolCallLimitMiddleware(run_limit=2)
    assert (per_tool.name, overall.name) == ("ToolCallLimitMiddleware[add]", "ToolCallLimitMiddleware")
    model = ScriptedChatModel([calls("add", "echo"), calls("add", "echo"), "done"])
    agent = create_agent(model, [add, echo], middleware=[overall, per_tool], checkpointer=InMemorySaver())
    result = run(agent, ask(), config=thread())
    statuses = [(m.name, m.status) for m in result["messages"] if isinstance(m, ToolMessage)]
    assert statuses == [("add", "success"), ("echo", "success"), ("add", "error"), ("echo", "error")]
    # Refused calls count toward the run (LangChain): add 1 ran + 1 refused; overall 2 ran + the echo call it
    # refused (per_tool's after_model runs first and had already answered the second add call).
    assert agent.get_state(thread()).values["run_tool_call_count"] == {"add": 2, "__all__": 3}
    assert_paired(result["messages"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tool_name": "add"}, r"^At least one limit must be specified \(thread_limit or run_limit\)\. "),
        ({"run_limit": True}, "run_limit must be an int >= 0"),
        ({"run_limit": 1, "exit_behavior": "stop"},
         r"^Invalid exit_behavior: 'stop'\. Must be one of \('continue', 'error', 'end'\)\. "),
        ({"thread_limit": 3, "run_limit": 5},
         r"^run_limit \(5\) cannot exceed thread_limit \(3\)\. The run limit should be less than or equal to the "
         r"thread limit\. ToolCallLimitMiddleware: "),
        ({"tool_name": "", "run_limit": 1}, "tool_name must be"),
    ],
)
def test_tool_limit_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ToolCallLimitMiddleware(**kwargs)


def test_equal_run_and_thread_limits_are_valid() -> None:
    assert ToolCallLimitMiddleware(thread_limit=5, run_limit=5).run_limit == 5


def test_a_subclass_names_a_second_instance() -> None:
    class AddBudget(ToolCallLimitMiddleware):
        pass

    assert AddBudget(tool_name="add", run_limit=1).name == "AddBudget[add]"
    assert AddBudget(run_limit=1).name == "AddBudget"


# -- frozen configuration ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mw", "attribute"),
    [(ModelCallLimitMiddleware(run_limit=2), "run_limit"), (ToolCallLimitMiddleware(run_limit=2), "exit_behavior")],
)
def test_configuration_is_frozen(mw: Any, attribute: str) -> None:
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match=f"cannot set '{attribute}'") as err:
        setattr(mw, attribute, 1)
    assert isinstance(err.value, MiddlewareConfigError) and isinstance(err.value, AttributeError)
    assert mw.run_limit == 2
    # `name` is identity, not configuration: a renamed copy (or `mw.name = ...`) tells two instances apart.
    renamed = mw.replace(name="Other")
    assert (renamed.name, renamed.run_limit) == ("Other", 2) and mw.name != "Other"


def test_before_adoption_settings_are_validated_like_constructor_arguments(run: Runner) -> None:
    limit = ModelCallLimitMiddleware(run_limit=5)
    limit.run_limit = 1  # as LangChain users do, before building the agent
    with pytest.raises(MiddlewareConfigError, match="run_limit must be an int >= 0"):
        limit.run_limit = -1
    model = ScriptedChatModel([calls("add")], cycle=True)
    result = run(create_agent(model, [add], middleware=[limit]), ask())
    assert model.call_count == 1 and result["messages"][-1].content == "Model call limits exceeded: run limit (1/1)"


def test_replace_gives_a_working_changed_copy(run: Runner) -> None:
    original = ToolCallLimitMiddleware(tool_name="add", run_limit=1)
    changed = original.replace(run_limit=2)
    assert (changed.run_limit, changed.tool_name, original.run_limit) == (2, "add", 1)
    model = ScriptedChatModel([calls("add", "add"), "done"])
    result = run(create_agent(model, [add], middleware=[changed]), ask())
    assert [m.status for m in result["messages"] if isinstance(m, ToolMessage)] == ["success", "success"]
    with pytest.raises(MiddlewareConfigError, match="cannot exceed thread_limit"):
        original.replace(thread_limit=1, run_limit=2)  # validated again


def test_end_mode_updates_have_langchains_keys() -> None:
    # Called directly, as LangChain users unit-test hooks: the same keys as LangChain 1.5's updates.
    tool_limit = ToolCallLimitMiddleware(tool_name="add", run_limit=1, exit_behavior="end")
    state: Any = {"messages": [HumanMessage("q"), calls("add", "add")], "run_tool_call_count": {"add": 0}}
    update = tool_limit.after_model(state, None)  # type: ignore[arg-type]
    assert update is not None
    assert set(update) == {"thread_tool_call_count", "run_tool_call_count", "jump_to", "messages"}
    # "end": no call of the turn runs, so the thread count stays; the run counts every call attempted (LangChain 1.5).
    assert update["run_tool_call_count"] == {"add": 2} and update["thread_tool_call_count"] == {"add": 0}
    continue_limit = tool_limit.replace(exit_behavior="continue")
    assert set(continue_limit.after_model(state, None)) == {  # type: ignore[arg-type]
        "thread_tool_call_count", "run_tool_call_count", "messages"}
    model_limit = ModelCallLimitMiddleware(run_limit=1)
    assert set(model_limit.before_model({"messages": [], "run_model_call_count": 1}, None)) == {  # type: ignore[arg-type]
        "jump_to", "messages"}


def test_model_limit_hooks_called_directly_do_langchains_work() -> None:
    # LangChain users unit-test the hooks: after_model returns the incremented counts, before_model the jump.
    import asyncio

    limit = ModelCallLimitMiddleware(run_limit=2)
    state: Any = {"messages": [HumanMessage("q"), AIMessage("a")], "thread_model_call_count": 4,
                  "run_model_call_count": 1}
    assert limit.after_model(state, None) == {"thread_model_call_count": 5, "run_model_call_count": 2}
    assert asyncio.run(limit.aafter_model(state, None)) == limit.after_model(state, None)
    assert asyncio.run(limit.abefore_model({**state, "run_model_call_count": 2}, None)) == {
        "jump_to": "end", "messages": [AIMessage("Model call limits exceeded: run limit (2/2)")]}


def test_the_model_call_is_counted_once_per_answer_by_the_first_instance_that_sees_it() -> None:
    limit = ModelCallLimitMiddleware(run_limit=5)
    answered: Any = {"messages": [HumanMessage("q"), AIMessage("a", id="m1")], "run_model_call_count": 1}
    update = limit.after_model(answered, None)
    assert update == {"thread_model_call_count": 1, "run_model_call_count": 2, "model_call_counted": "m1"}
    assert limit.after_model({**answered, **update}, None) is None  # a second instance: already counted


def test_tool_limit_end_counts_no_call_of_the_turn_in_the_thread(run: Runner) -> None:
    limit = ToolCallLimitMiddleware(tool_name="add", thread_limit=1, exit_behavior="end")
    model = ScriptedChatModel([calls("add", "echo"), "done", calls("add", "add", "echo")])
    agent = create_agent(model, [add, echo], middleware=[limit], checkpointer=InMemorySaver())
    run(agent, ask(), config=thread())
    assert agent.get_state(thread()).values["thread_tool_call_count"] == {"add": 1}
    result = run(agent, ask(), config=thread())
    assert agent.get_state(thread()).values["thread_tool_call_count"] == {"add": 1}  # none of the turn ran
    answers = [m.content for m in result["messages"][-4:-1]]
    assert answers[0] == answers[1] == "Tool call limit exceeded. Do not call 'add' again."
    assert "exceeded the limit" in answers[2]
    assert_paired(result["messages"])
