"""A method named close to a hook (``before_modle``) is an error when the agent is built, not silently never run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from middleware_kit import AgentMiddleware, MiddlewareConfigError, create_agent
from middleware_kit.middleware import HookNameError
from middleware_kit.testing import ScriptedChatModel


def _node(self: Any, state: Any, runtime: Any) -> None:
    return None


async def _anode(self: Any, state: Any, runtime: Any) -> None:
    return None


def _wrap(self: Any, request: Any, handler: Any) -> Any:
    return handler(request)


async def _awrap(self: Any, request: Any, handler: Any) -> Any:
    return await handler(request)


def _middleware(name: str, methods: dict[str, Callable[..., Any]], **attrs: Any) -> AgentMiddleware[Any, Any]:
    cls = type(name, (AgentMiddleware,), {**methods, **attrs, "__module__": __name__})
    instance: AgentMiddleware[Any, Any] = cls()
    return instance


@pytest.mark.parametrize(
    ("method", "fn", "hook"),
    [
        ("before_modle", _node, "before_model"),
        ("wrap_model_cal", _wrap, "wrap_model_call"),
        ("awrap_tool_cal", _awrap, "awrap_tool_call"),
        ("after_agnet", _node, "after_agent"),
        ("abefore_modle", _anode, "abefore_model"),
        ("guard_message", _node, "guard_messages"),
    ],
)
def test_a_misspelled_hook_fails_the_build_naming_the_middleware_the_method_and_the_hook(
    method: str, fn: Callable[..., Any], hook: str
) -> None:
    mw = _middleware("Audit", {method: fn})
    with pytest.raises(HookNameError) as err:
        create_agent(ScriptedChatModel(["ok"]), middleware=[mw])
    message = str(err.value)
    assert f"Audit.{method} is not a hook" in message
    assert f"did you mean {hook!r}?" in message
    assert f"not_hooks = ({method!r},)" in message  # how to keep a deliberate name
    assert isinstance(err.value, MiddlewareConfigError)
    assert (err.value.middleware, err.value.hook, err.value.suggestion) == ("Audit", method, hook)


def test_the_error_names_the_instance_and_the_class_that_defines_the_method() -> None:
    class Base(AgentMiddleware[Any, Any]):
        def after_modle(self, state: Any, runtime: Any) -> None:
            return None

    class Child(Base):
        pass

    mw = Child()
    mw.name = "audit_eu"
    with pytest.raises(HookNameError, match=r"^audit_eu: .*Base\.after_modle is not a hook.*'after_model'"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[mw])


def test_a_misspelling_fails_every_build_not_only_the_first() -> None:
    mw = _middleware("Audit", {"before_modle": _node})
    for _ in range(2):
        with pytest.raises(HookNameError):
            create_agent(ScriptedChatModel(["ok"]), middleware=[mw])


def test_hooks_and_names_far_from_hooks_build_and_run() -> None:
    calls: list[str] = []

    class Audit(AgentMiddleware[Any, Any]):
        def before_model(self, state: Any, runtime: Any) -> None:
            calls.append(self.summarize(state))

        async def abefore_model(self, state: Any, runtime: Any) -> None:
            calls.append("async")

        def summarize(self, state: Any) -> str:  # a helper: not close to any hook
            return f"{len(state['messages'])} message(s)"

        def before_model_check(self) -> bool:  # a longer name that starts like a hook
            return True

        def _before_modle(self) -> None:  # private names are never hooks
            return None

        @property
        def after_modle(self) -> int:  # not a method
            return 1

    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[Audit()])
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert calls == ["1 message(s)"]


def test_not_hooks_keeps_a_deliberate_near_name() -> None:
    calls: list[str] = []

    class Auditor(AgentMiddleware[Any, Any]):
        not_hooks = ("after_tools",)

        def after_tools(self, results: list[Any]) -> int:  # deliberate: a helper, not the after_tool hook
            return len(results)

        def before_model(self, state: Any, runtime: Any) -> None:
            calls.append(f"before_model saw {self.after_tools(state['messages'])}")

    class StrictAuditor(Auditor):  # not_hooks of a base class still applies
        def before_models(self) -> None:
            return None

    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[Auditor()])
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert calls == ["before_model saw 1"]
    with pytest.raises(HookNameError, match=r"StrictAuditor\.before_models .*did you mean 'before_model'\?"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[StrictAuditor()])

    class Both(StrictAuditor):
        not_hooks = ("before_models",)

    create_agent(ScriptedChatModel(["ok"]), middleware=[Both()])


def test_a_near_name_from_a_users_mixin_is_found_too() -> None:
    class Logging:
        def wrap_tool_calls(self, request: Any, handler: Any) -> Any:
            return handler(request)

    class Audit(Logging, AgentMiddleware[Any, Any]):
        pass

    with pytest.raises(HookNameError, match=r"Logging\.wrap_tool_calls .*did you mean 'wrap_tool_call'\?"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[Audit()])


def test_not_hooks_may_be_a_single_name() -> None:
    mw = _middleware("Audit", {"after_tools": _node}, not_hooks="after_tools")
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])


def test_the_error_pickles_with_its_attributes() -> None:
    import pickle

    mw = _middleware("Audit", {"before_modle": _node})
    with pytest.raises(HookNameError) as err:
        create_agent(ScriptedChatModel(["ok"]), middleware=[mw])
    copy = pickle.loads(pickle.dumps(err.value))
    assert (str(copy), copy.method, copy.suggestion) == (str(err.value), "before_modle", "before_model")
