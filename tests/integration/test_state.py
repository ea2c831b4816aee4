"""State schemas: merge, conflicts, unknown keys, private/input/output keys, reducers inside fused nodes."""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

import pytest
from langchain_core.messages import HumanMessage

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    HookReturnError,
    OmitFromInput,
    OmitFromOutput,
    PrivateStateAttr,
    StateSchemaConflictError,
    UnknownStateKeyError,
    after_agent,
    before_agent,
    before_model,
    create_agent,
)
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner


class Audit(AgentState):
    audit: NotRequired[Annotated[list[str], operator.add]]


class Budget(AgentState):
    budget: NotRequired[int]
    secret: NotRequired[Annotated[str, PrivateStateAttr]]
    computed: NotRequired[Annotated[int, OmitFromInput]]
    internal: NotRequired[Annotated[int, OmitFromOutput]]


class UserState(AgentState):
    user_id: NotRequired[str]


def test_schemas_merge_and_custom_input_keys_survive(run: Runner) -> None:
    @before_model(state_schema=Audit)
    def log(state: Any, runtime: Any) -> dict[str, Any]:
        return {"audit": [f"user={state.get('user_id')}"]}

    @after_agent(state_schema=Budget)
    def spend(state: Any, runtime: Any) -> dict[str, Any]:
        return {"budget": state.get("budget", 0) - 1, "secret": "s", "computed": 7, "internal": 1}

    agent = create_agent(ScriptedChatModel(["a"]), middleware=[log, spend], state_schema=UserState)
    result = run(agent, {"messages": [HumanMessage("q")], "user_id": "u1", "budget": 10})
    assert result["user_id"] == "u1"
    assert result["audit"] == ["user=u1"]
    assert result["budget"] == 9
    assert result["computed"] == 7
    assert "secret" not in result and "internal" not in result and "jump_to" not in result


def test_private_and_omit_from_input_keys_are_ignored_on_input(run: Runner) -> None:
    seen: dict[str, Any] = {}

    @before_agent(state_schema=Budget)
    def look(state: Any, runtime: Any) -> None:
        seen.update(state)

    run(create_agent(ScriptedChatModel(["a"]), middleware=[look]),
        {"messages": [HumanMessage("q")], "secret": "forged", "computed": 1, "internal": 5})
    assert "secret" not in seen and "computed" not in seen
    assert seen["internal"] == 5


def test_hooks_in_one_fused_node_see_earlier_updates_through_reducers(run: Runner) -> None:
    seen: list[list[str]] = []

    def make(tag: str) -> AgentMiddleware:
        @before_model(state_schema=Audit, name=tag)
        def hook(state: Any, runtime: Any) -> dict[str, Any]:
            seen.append(list(state.get("audit", [])))
            return {"audit": [tag], "messages": [HumanMessage(f"note {tag}")]}

        return hook

    result = run(create_agent(ScriptedChatModel(["a"]), middleware=[make("A"), make("B"), make("C")]),
                 {"messages": [HumanMessage("q")]})
    assert seen == [[], ["A"], ["A", "B"]]
    assert result["audit"] == ["A", "B", "C"]
    assert [m.content for m in result["messages"]] == ["q", "note A", "note B", "note C", "a"]
    assert len(result["messages"]) == len({m.id for m in result["messages"]})


def test_last_value_keys_written_by_several_hooks_of_one_node_keep_the_last(run: Runner) -> None:
    def setter(value: int) -> AgentMiddleware:
        @before_model(state_schema=Budget, name=f"set{value}")
        def hook(state: Any, runtime: Any) -> dict[str, Any]:
            return {"budget": value}

        return hook

    result = run(create_agent(ScriptedChatModel(["a"]), middleware=[setter(1), setter(2)]),
                 {"messages": [HumanMessage("q")]})
    assert result["budget"] == 2


def test_conflicting_schemas_name_both_owners() -> None:
    class A(AgentState):
        level: NotRequired[int]

    class B(AgentState):
        level: NotRequired[str]

    @before_model(state_schema=A)
    def first(state: Any, runtime: Any) -> None: ...

    @before_model(state_schema=B)
    def second(state: Any, runtime: Any) -> None: ...

    with pytest.raises(StateSchemaConflictError) as err:
        create_agent(ScriptedChatModel([]), middleware=[first, second])
    message = str(err.value)
    assert "'level'" in message and "first" in message and "second" in message
    assert err.value.middleware == "second" and err.value.hook == "state_schema"


def test_same_field_with_same_type_in_two_schemas_is_fine() -> None:
    @before_model(state_schema=Audit)
    def one(state: Any, runtime: Any) -> None: ...

    @before_model(state_schema=Audit)
    def two(state: Any, runtime: Any) -> None: ...

    create_agent(ScriptedChatModel([]), middleware=[one, two])


def test_schema_without_messages_is_refused() -> None:
    from typing_extensions import TypedDict

    class Bare(TypedDict):
        x: int

    @before_model(state_schema=Bare)
    def hook(state: Any, runtime: Any) -> None: ...

    with pytest.raises(Exception, match="extend AgentState"):
        create_agent(ScriptedChatModel([]), middleware=[hook])


def test_unknown_state_key_names_middleware_hook_and_key(run: Runner) -> None:
    @before_model
    def typo(state: Any, runtime: Any) -> dict[str, Any]:
        return {"mesages": []}

    with pytest.raises(UnknownStateKeyError) as err:
        run(create_agent(ScriptedChatModel(["a"]), middleware=[typo]), {"messages": [HumanMessage("q")]})
    assert (err.value.middleware, err.value.hook, err.value.keys) == ("typo", "before_model", ("mesages",))
    assert "state_schema" in str(err.value)


@pytest.mark.parametrize("bad", [["not", "a", "dict"], "text", 3])
def test_node_hook_returning_non_dict_raises(run: Runner, bad: Any) -> None:
    @before_model
    def wrong(state: Any, runtime: Any) -> Any:
        return bad

    with pytest.raises(HookReturnError, match=r"wrong\.before_model returned"):
        run(create_agent(ScriptedChatModel(["a"]), middleware=[wrong]), {"messages": [HumanMessage("q")]})


def test_forgotten_await_is_explained() -> None:
    class Confused(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> Any:
            async def later() -> None:
                return None

            return later()

    agent = create_agent(ScriptedChatModel(["a"]), middleware=[Confused()])
    with pytest.raises(HookReturnError, match=r"un-awaited coroutine"):
        agent.invoke({"messages": [HumanMessage("q")]})


def test_async_def_under_a_sync_name_is_refused_at_build_time() -> None:
    class Misnamed(AgentMiddleware):
        async def before_model(self, state: Any, runtime: Any) -> None:  # type: ignore[override]
            return None

    with pytest.raises(Exception, match="abefore_model"):
        create_agent(ScriptedChatModel([]), middleware=[Misnamed()])


def test_bad_state_update_leaves_checkpointed_state_intact() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    calls = {"n": 0}

    @before_model
    def flaky(state: Any, runtime: Any) -> dict[str, Any] | None:
        calls["n"] += 1
        return {"oops": 1} if calls["n"] == 2 else None

    agent = create_agent(ScriptedChatModel(["one", "two"]), middleware=[flaky], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("first")]}, config)
    before = agent.get_state(config).values["messages"]
    with pytest.raises(UnknownStateKeyError):
        agent.invoke({"messages": [HumanMessage("second")]}, config)
    # The failed run's input was checkpointed (as LangGraph does) but nothing the hook returned was.
    after = agent.get_state(config).values["messages"]
    assert [m.content for m in after] == [*(m.content for m in before), "second"]


class ReducerBeforeMarker(AgentState):
    trail: NotRequired[Annotated[list[str], operator.add, PrivateStateAttr]]


def test_a_reducer_listed_before_a_privacy_marker_still_reduces(run: Runner) -> None:
    seen: list[list[str]] = []

    def make(tag: str) -> AgentMiddleware:
        @before_model(state_schema=ReducerBeforeMarker, name=tag)
        def hook(state: Any, runtime: Any) -> dict[str, Any]:
            seen.append(list(state.get("trail", [])))
            return {"trail": [tag]}

        return hook

    agent = create_agent(ScriptedChatModel(["a", "b"]), middleware=[make("A"), make("B")])
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert seen == [[], ["A"]]
    assert "trail" not in result  # still private
