"""``agent.middleware_plan`` works out its rows when first read, once (issue 25 item 6: every build makes a plan, few
print it), and stays a value: equal plans for agents built alike, whatever has been read of them."""

from __future__ import annotations

from typing import Any

import pytest

from middleware_kit import AgentMiddleware, MiddlewarePlan, PlannedHook, create_agent
from middleware_kit.plan import PlanRows
from middleware_kit.testing import ScriptedChatModel, TraceRecorder
from tests.conftest import add


def counted_plan(calls: list[int]) -> MiddlewarePlan:
    def rows() -> PlanRows:
        calls.append(1)
        hook = PlannedHook("before_model", "A", "sync", "direct", "thread", "model")
        return PlanRows(hooks=(hook,), model_chain=("A.wrap_model_call",), tool_chain=())

    return MiddlewarePlan(name="calc", middleware=("A",), nodes=("model",), rows=rows)


@pytest.mark.parametrize(
    "read",
    [
        lambda plan: plan.hooks,
        lambda plan: plan.model_chain,
        lambda plan: plan.tool_chain,
        lambda plan: plan.phase("before_model"),
        str,
        repr,
    ],
    ids=["hooks", "model_chain", "tool_chain", "phase", "str", "repr"],
)
def test_the_rows_are_worked_out_on_first_read_once(read: Any) -> None:
    calls: list[int] = []
    plan = counted_plan(calls)
    assert (plan.name, plan.middleware, plan.nodes, plan.guards, plan.resume_guards) == (
        "calc", ("A",), ("model",), (), ()
    )
    assert calls == []  # made, and its cheap attributes read, without a row
    read(plan)
    assert calls == [1]
    assert plan.hooks[0].middleware == "A" and plan.model_chain == ("A.wrap_model_call",)
    assert "model call: A.wrap_model_call( model )" in str(plan) and "MiddlewarePlan(name='calc'" in repr(plan)
    assert calls == [1]


def test_the_rows_of_a_plan_are_read_only() -> None:
    plan = counted_plan([])
    with pytest.raises(AttributeError):
        plan.hooks = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        plan.name = "other"  # type: ignore[misc]


class Quiet(AgentMiddleware):
    def before_model(self, state: Any, runtime: Any) -> None:
        return None


def agent_of(*middleware: AgentMiddleware) -> Any:
    return create_agent(ScriptedChatModel(["hi"]), [add], middleware=list(middleware), name="calc")


def test_plans_of_agents_built_alike_are_equal_whatever_was_read() -> None:
    first = agent_of(TraceRecorder("A", []), Quiet()).middleware_plan
    second = agent_of(TraceRecorder("A", []), Quiet()).middleware_plan
    assert isinstance(first, MiddlewarePlan)
    str(first)  # one has worked out its rows, the other not yet
    assert first == second and hash(first) == hash(second)
    assert first.hooks == second.hooks and first.hooks is first.hooks
    other = agent_of(Quiet(), TraceRecorder("A", [])).middleware_plan
    assert other != first and other.middleware == ("Quiet", "A")
    assert other.phase("before_model") == ("Quiet", "A")


def test_every_build_makes_a_new_plan_of_its_own_pipeline() -> None:
    recorder = TraceRecorder("A", [])
    agents = [agent_of(recorder), agent_of(recorder, Quiet())]
    assert [a.middleware_plan.phase("before_model") for a in reversed(agents)] == [("A", "Quiet"), ("A",)]
