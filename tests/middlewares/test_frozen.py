"""Configuration is a value (DESIGN §8.5): the FrozenConfig rule shared by every bundled middleware.

Settable (and validated as by the constructor) until an agent adopts the instance; read-only from then on."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import AgentMiddleware, MiddlewareConfigError, create_agent
from middleware_kit.middlewares._frozen import ConstructorArgumentError, FrozenConfig, FrozenMiddlewareError
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel


class Box(FrozenConfig, AgentMiddleware):
    def __init__(self, first: str, *more: str, items: list[int] | None = None, table: dict[str, Any] | None = None):
        self.first = first
        self.more = more
        self.items = items if items is not None else []
        self.table = table if table is not None else {}


class Tagged(Box):
    def __init__(self, tag: str, **kwargs: Any) -> None:
        super().__init__(tag, "x", **kwargs)
        self.tag = tag


def _adopted(mw: Any) -> Any:
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])
    return mw


def test_after_adoption_assignment_and_deletion_raise_with_the_fix() -> None:
    box = _adopted(Box("a"))
    with pytest.raises(FrozenMiddlewareError) as info:
        box.first = "b"
    assert isinstance(info.value, AttributeError) and isinstance(info.value, MiddlewareConfigError)
    assert info.value.middleware == "Box" and info.value.hook == "first"
    assert "mw.replace(first=...)" in str(info.value) and "adopted" in str(info.value)
    with pytest.raises(FrozenMiddlewareError):
        del box.first
    assert box.first == "a"


def test_before_adoption_a_parameter_goes_through_the_constructor() -> None:
    retry = ModelRetryMiddleware(max_retries=1)
    retry.max_retries = 4
    assert retry.max_retries == 4 and retry.replace(initial_delay=0).max_retries == 4
    with pytest.raises(MiddlewareConfigError) as set_later:
        retry.max_retries = -1
    with pytest.raises(MiddlewareConfigError) as at_construction:
        ModelRetryMiddleware(max_retries=-1)
    assert str(set_later.value) == str(at_construction.value)
    assert retry.max_retries == 4  # the bad value was not kept


def test_before_adoption_other_attributes_are_set_as_they_are() -> None:
    box = Box("a", items=[1])
    box.note = "mine"
    box.items = [2]
    assert (box.note, box.items, box.first) == ("mine", [2], "a")  # type: ignore[attr-defined]
    box.first = "b"  # re-runs the constructor: the direct attribute survives
    assert (box.note, box.items, box.first) == ("mine", [2], "b")  # type: ignore[attr-defined]
    del box.note  # type: ignore[attr-defined]
    assert not hasattr(box, "note")


class Greeter(FrozenConfig, AgentMiddleware):
    def __init__(self, greeting: str = "hello") -> None:
        if not greeting:
            raise MiddlewareConfigError("Greeter: greeting must not be empty.", middleware="Greeter", hook="greeting")
        self.greeting = greeting
        self.line = AIMessage(greeting.upper())  # derived from the argument

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [self.line]}


async def test_a_value_set_before_building_is_the_one_the_agent_uses() -> None:
    greeter = Greeter()
    greeter.greeting = "welcome"
    with pytest.raises(MiddlewareConfigError, match="Greeter: greeting must not be empty"):
        greeter.greeting = ""
    agent = create_agent(ScriptedChatModel(["ok"], cycle=True), middleware=[greeter])
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'greeting'"):
        greeter.greeting = "bye"
    sync = agent.invoke({"messages": [HumanMessage("hi")]})
    async_ = await agent.ainvoke({"messages": [HumanMessage("hi")]})
    for result in (sync, async_):
        assert [m.content for m in result["messages"]] == ["hi", "WELCOME", "ok"]


def test_a_failed_build_does_not_adopt() -> None:
    retry = ModelRetryMiddleware()
    with pytest.raises(MiddlewareConfigError):
        create_agent(ScriptedChatModel(["hi"]), middleware=[retry, ModelRetryMiddleware()])  # duplicate names
    retry.max_retries = 0
    assert retry.max_retries == 0


def test_container_arguments_are_copied_deeply() -> None:
    items: list[int] = [1, 2]
    table: dict[str, Any] = {"k": [1]}
    box = Box("a", items=items, table=table)
    items.append(3)
    table["k"].append(2)
    table["new"] = 1
    assert box.items == [1, 2] and box.table == {"k": [1]}


def test_replace_reruns_the_constructor_with_changes_only() -> None:
    box = Box("a", "b", "c", items=[1])
    changed = box.replace(items=[9])
    assert (changed.first, changed.more, changed.items) == ("a", ("b", "c"), [9])
    assert box.items == [1]
    sub = Tagged("t", items=[1])
    assert sub.replace(tag="u").tag == "u" and sub.replace(items=[5]).items == [5]
    assert sub.replace(items=[5]).tag == "t"


def test_replace_refuses_unknown_arguments_and_revalidates() -> None:
    with pytest.raises(MiddlewareConfigError, match=r"unknown argument\(s\) \['nope'\]"):
        Box("a").replace(nope=1)
    with pytest.raises(MiddlewareConfigError):
        ModelRetryMiddleware().replace(max_retries=-1)


def test_bad_constructor_calls_name_the_class_and_the_parameters() -> None:
    with pytest.raises(ConstructorArgumentError) as info:
        Box()  # type: ignore[call-arg]
    assert isinstance(info.value, TypeError)
    assert "Box(...): missing a required argument: 'first'" in str(info.value)
    assert "required: first" in str(info.value)
    with pytest.raises(ConstructorArgumentError, match="unexpected keyword argument 'retries'"):
        ModelRetryMiddleware(retries=3)  # type: ignore[call-arg]


def test_name_is_identity_not_configuration() -> None:
    a, b = ModelCallLimitMiddleware(run_limit=1), ModelCallLimitMiddleware(run_limit=2)
    b.name = "second_limit"
    create_agent(ScriptedChatModel(["hi"]), middleware=[a, b])  # no duplicate-name error
    assert a.replace(name="x").name == "x"
    assert b.replace(run_limit=3).name == "second_limit"


def test_a_shared_instance_cannot_be_changed_under_a_built_agent() -> None:
    retry = ModelRetryMiddleware(max_retries=3)
    create_agent(ScriptedChatModel(["hi"]), middleware=[retry])
    with pytest.raises(FrozenMiddlewareError):
        retry.max_retries = 0
    assert retry.max_retries == 3


def test_frozen_errors_pickle() -> None:
    try:
        _adopted(Box("a")).first = "b"
    except FrozenMiddlewareError as exc:
        again = pickle.loads(pickle.dumps(exc))
        assert str(again) == str(exc) and again.middleware == "Box"


def test_replace_keeps_an_instance_s_inherited_choice_and_accepts_it() -> None:
    from middleware_kit.middlewares import PIIMiddleware

    opted_out = PIIMiddleware("email")
    opted_out.inherited = False  # before any agent adopts it
    assert opted_out.replace(strategy="mask").inherited is False
    assert PIIMiddleware("email").replace(inherited=False).inherited is False
    assert ModelRetryMiddleware().replace(inherited=True).inherited is True
    assert ModelRetryMiddleware().replace(max_retries=3).inherited is False
