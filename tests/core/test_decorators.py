"""Every decorator, generated from one factory: bare, with (), with options; sync and async."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

import middleware_kit as mk
from middleware_kit import AgentMiddleware, AgentState, MiddlewareConfigError, hook_config
from middleware_kit._engine.pipeline import defined_hooks
from middleware_kit.testing import arun_hook, run_hook
from tests.conftest import echo

DECORATORS = [
    "before_agent", "before_model", "after_model", "after_agent", "modify_model_request",
    "wrap_model_call", "wrap_tool_call", "before_tool", "after_tool",
]
NODE = {"before_agent", "before_model", "after_model", "after_agent"}


def sample(hook: str) -> Any:
    if hook in NODE:
        return lambda state, runtime: None
    if hook in ("wrap_model_call", "wrap_tool_call"):
        return lambda request, handler: handler(request)
    if hook == "modify_model_request":
        return lambda request, state: request
    if hook == "after_tool":
        return lambda request, result: None
    return lambda request: None


@pytest.mark.parametrize("hook", DECORATORS)
@pytest.mark.parametrize("form", ["bare", "parens", "options"])
def test_each_decorator_in_each_form_makes_a_middleware_instance(hook: str, form: str) -> None:
    decorator = getattr(mk, hook)

    def my_hook(*args: Any) -> Any:
        return sample(hook)(*args)

    if form == "bare":
        mw = decorator(my_hook)
    elif form == "parens":
        mw = decorator()(my_hook)
    else:
        options: dict[str, Any] = {"name": "Custom", "state_schema": AgentState, "tools": [echo]}
        if hook in NODE and hook != "after_agent":
            options["can_jump_to"] = ["end"]
        mw = decorator(**options)(my_hook)
    assert isinstance(mw, AgentMiddleware)
    assert type(mw).__name__ == ("Custom" if form == "options" else "my_hook")
    assert mw.name == type(mw).__name__
    impl = defined_hooks(mw)[hook]
    assert impl.sync is my_hook and impl.async_ is None
    if form == "options":
        assert list(mw.tools) == [echo]
        if hook in NODE and hook != "after_agent":
            assert impl.can_jump_to == {"end"}


@pytest.mark.parametrize("hook", DECORATORS)
def test_async_functions_define_the_async_twin(hook: str) -> None:
    async def my_hook(*args: Any) -> Any:
        return None

    mw = getattr(mk, hook)(my_hook)
    impl = defined_hooks(mw)[hook]
    assert impl.sync is None and impl.async_ is my_hook
    assert impl.mode == "async"


def test_decorated_hooks_can_be_called_directly() -> None:
    @mk.before_model
    def add_note(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [HumanMessage("note")]}

    assert add_note.before_model({"messages": []}, None) == {"messages": [HumanMessage("note")]}
    assert run_hook(add_note, "before_model", {"messages": []}) == {"messages": [HumanMessage("note")]}


def test_run_hook_drives_async_twins_and_validates() -> None:
    @mk.after_model
    async def bad(state: Any, runtime: Any) -> list[str]:
        return ["not a dict"]

    with pytest.raises(mk.HookReturnError, match=r"bad\.after_model"):
        run_hook(bad, "after_model", {"messages": []})


async def test_arun_hook_runs_sync_hooks_off_the_loop() -> None:
    import threading

    main = threading.get_ident()
    seen: list[int] = []

    @mk.before_agent
    def where(state: Any, runtime: Any) -> None:
        seen.append(threading.get_ident())

    await arun_hook(where, "before_agent", {"messages": []})
    assert seen and seen[0] != main


def test_hook_config_sets_the_attributes_langchain_sets() -> None:
    @hook_config(can_jump_to=["end", "model"], may_interrupt=True)
    def fn(state: Any, runtime: Any) -> None: ...

    assert fn.__can_jump_to__ == ["end", "model"]  # type: ignore[attr-defined]
    assert fn.__may_interrupt__ is True  # type: ignore[attr-defined]


def test_decorating_something_not_callable_is_refused() -> None:
    with pytest.raises(MiddlewareConfigError, match="must decorate a function"):
        mk.before_model(42)  # type: ignore[call-overload]


def test_subclass_defaults_name_repr_and_no_super_init() -> None:
    class Quiet(AgentMiddleware):
        def __init__(self) -> None:  # no super().__init__()
            self.level = 1

        def before_model(self, state: Any, runtime: Any) -> None:
            return None

    mw = Quiet()
    assert mw.name == "Quiet"
    assert mw.state_schema is AgentState and tuple(mw.tools) == ()
    assert repr(mw) == "<Quiet name='Quiet' hooks=[before_model]>"
    mw.name = "Loud"
    assert mw.name == "Loud"

    class Named(AgentMiddleware):
        name = "fixed"  # type: ignore[assignment]

    assert Named().name == "fixed"
    assert AgentMiddleware().before_model({"messages": []}, None) is None
