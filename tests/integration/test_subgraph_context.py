"""An agent used as a subgraph (a node of a parent graph, or invoked inside a parent's node) runs with the parent's
context: the context check neither rejects it nor replaces it with the schema's defaults (tenants would mix). A resume
without context on an agent whose context_schema has required fields is a ContextError naming them, before any hook.
Every run under invoke and ainvoke."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel
from typing_extensions import TypedDict

from middleware_kit import create_agent
from middleware_kit import decorators as deco
from middleware_kit.errors import ContextError
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

_threads = itertools.count()


def thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"sub{next(_threads)}"}}


def q(text: str = "q") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


@dataclass
class ParentCtx:
    tenant: str
    user: str = "u"


@dataclass
class ChildDefaults:
    tenant: str = "public"
    verbose: bool = False


@dataclass
class ChildRequired:
    tenant: str


class ChildModel(BaseModel):
    tenant: str = "public"


class ChildTD(TypedDict):
    tenant: str


def child_agent(schema: type[Any], seen: list[Any]) -> Any:
    @deco.before_model
    def record(state: Any, runtime: Any) -> None:
        seen.append(runtime.context)

    return create_agent(ScriptedChatModel(["child says hi"], cycle=True), middleware=[record], context_schema=schema)


def parent_with(child: Any, *, as_node: bool) -> Any:
    """A parent graph running ``child``: as a node itself, or invoked inside a node function."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState, context_schema=ParentCtx)
    if as_node:
        builder.add_node("child", child)
    else:

        def call_child(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            return {"messages": child.invoke({"messages": state["messages"]})["messages"][-1:]}

        async def acall_child(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            return {"messages": (await child.ainvoke({"messages": state["messages"]}))["messages"][-1:]}

        from langchain_core.runnables import RunnableLambda

        builder.add_node("child", RunnableLambda(call_child, afunc=acall_child))
    builder.add_edge(START, "child")
    return builder.compile()


@pytest.mark.parametrize("as_node", [True, False], ids=["node", "inside-a-node"])
def test_a_child_whose_fields_all_have_defaults_sees_the_parents_tenant(run: Runner, as_node: bool) -> None:
    seen: list[Any] = []
    parent = parent_with(child_agent(ChildDefaults, seen), as_node=as_node)
    out = run(parent, q(), context=ParentCtx(tenant="a"))
    assert out["messages"][-1].content == "child says hi"
    assert [c.tenant for c in seen] == ["a"]  # not "public", the schema's default
    assert isinstance(seen[0], ChildDefaults) and seen[0].verbose is False  # seen through the child's schema
    run(parent, q(), context=ParentCtx(tenant="b"))
    assert [c.tenant for c in seen] == ["a", "b"]


def test_a_child_with_a_required_field_is_not_rejected(run: Runner) -> None:
    seen: list[Any] = []
    parent = parent_with(child_agent(ChildRequired, seen), as_node=True)
    run(parent, q(), context=ParentCtx(tenant="a"))
    assert seen == [ChildRequired("a")]


def test_a_parent_context_of_the_childs_own_type_is_passed_as_is(run: Runner) -> None:
    seen: list[Any] = []
    parent = parent_with(child_agent(ParentCtx, seen), as_node=True)
    given = ParentCtx(tenant="a", user="x")
    run(parent, q(), context=given)
    assert seen[0] is given


@pytest.mark.parametrize("schema", [ChildModel, ChildTD])
def test_pydantic_and_typeddict_children_see_the_parents_tenant(run: Runner, schema: type[Any]) -> None:
    seen: list[Any] = []
    parent = parent_with(child_agent(schema, seen), as_node=True)
    run(parent, q(), context=ParentCtx(tenant="a"))
    tenant = seen[0]["tenant"] if schema is ChildTD else seen[0].tenant
    assert tenant == "a"


def test_a_parent_context_lacking_a_required_field_is_a_clear_error(run: Runner) -> None:
    @dataclass
    class NeedsRegion:
        region: str

    seen: list[Any] = []
    parent = parent_with(child_agent(NeedsRegion, seen), as_node=True)
    with pytest.raises(ContextError) as info:
        run(parent, q(), context=ParentCtx(tenant="a"))
    assert (info.value.schema, info.value.field) == ("test_a_parent_context_lacking_a_required_field_is_a_clear_error."
                                                     "<locals>.NeedsRegion", "region")
    message = str(info.value)
    assert "runs inside a parent graph whose context is a ParentCtx" in message
    assert "lacks 'region'" in message
    assert seen == []


def test_a_child_given_its_own_context_inside_a_node_keeps_it(run: Runner) -> None:
    seen: list[Any] = []
    child = child_agent(ChildDefaults, seen)

    def call_child(state: MessagesState) -> dict[str, Any]:
        return {"messages": child.invoke(state, context=ChildDefaults(tenant="own"))["messages"][-1:]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState, context_schema=ParentCtx)
    builder.add_node("child", call_child)
    builder.add_edge(START, "child")
    run(builder.compile(), q(), context=ParentCtx(tenant="a"))
    assert [c.tenant for c in seen] == ["own"]


def test_a_top_level_run_without_context_still_gets_the_defaults(run: Runner) -> None:
    seen: list[Any] = []
    run(child_agent(ChildDefaults, seen), q())
    assert seen == [ChildDefaults()]


# -- a resume without context ----------------------------------------------------------------------------------------
@dataclass
class Ctx:
    user_id: str


def paused_agent(schema: type[Any], seen: list[Any]) -> Any:
    @deco.before_model(may_interrupt=True)
    def ask(state: Any, runtime: Any) -> None:
        if len(state["messages"]) == 1:
            interrupt("review")
        seen.append(runtime.context)

    return create_agent(ScriptedChatModel(["ok"], cycle=True), middleware=[ask], context_schema=schema,
                        checkpointer=InMemorySaver())


def test_a_resume_without_context_names_the_schema_and_the_missing_fields(run: Runner) -> None:
    seen: list[Any] = []
    agent = paused_agent(Ctx, seen)
    config = thread()
    run(agent, q(), config=config, context=Ctx("u"))
    with pytest.raises(ContextError) as info:
        run(agent, Command(resume="yes"), config=config)
    assert (info.value.schema, info.value.field, info.value.hook) == ("Ctx", "user_id", "context")
    assert str(info.value) == (
        "This run resumes the thread (Command(resume=...)) without context, but the agent's context_schema is Ctx, "
        "which requires the field(s) ['user_id']. LangGraph does not keep the context in the checkpoint: pass it "
        "again on every invoke, resumes included: agent.invoke(Command(resume=...), config, "
        "context=Ctx(user_id=...))."
    )
    assert seen == []
    assert agent.get_state(config).next  # still paused: nothing was written
    out = run(agent, Command(resume="yes"), config=config, context=Ctx("u"))
    assert seen == [Ctx("u")]
    assert [m.content for m in out["messages"]] == ["q", "ok"]


def test_a_resume_without_context_gets_the_defaults_when_every_field_has_one(run: Runner) -> None:
    seen: list[Any] = []
    agent = paused_agent(ChildDefaults, seen)
    config = thread()
    run(agent, q(), config=config, context=ChildDefaults(tenant="a"))
    run(agent, Command(resume="yes"), config=config)
    assert seen == [ChildDefaults()]
