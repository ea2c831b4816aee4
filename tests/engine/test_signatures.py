"""Hook signatures are checked when the agent is built: every hook kind, method or decorator, sync or async, flow."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit import decorators as deco
from middleware_kit._engine.signatures import PARAMETERS, check_hook_function
from middleware_kit.errors import HookSignatureError, MiddlewareConfigError
from middleware_kit.hooks import HOOKS
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import add

NODE_HOOKS = ["before_agent", "before_model", "after_model", "after_agent"]


def build(mw: AgentMiddleware[Any, Any]) -> Any:
    return create_agent(ScriptedChatModel(["ok"]), [add], middleware=[mw])


@pytest.mark.parametrize("hook", list(HOOKS))
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_decorated_hook_with_too_few_parameters_fails_at_build(hook: str, is_async: bool) -> None:
    if is_async:

        async def log() -> None:
            return None

    else:

        def log() -> None:  # type: ignore[misc]
            return None

    mw = getattr(deco, hook)(log)
    with pytest.raises(HookSignatureError) as info:
        build(mw)
    err = info.value
    params = PARAMETERS[HOOKS[hook].kind]
    method = ("a" + hook) if is_async else hook
    assert (err.middleware, err.hook) == ("log", method)
    assert err.expected == f"{'async def' if is_async else 'def'} {method}({', '.join(params)})"
    assert err.found == f"{'async def' if is_async else 'def'} log()"
    assert err.expected in str(err) and err.found in str(err)
    assert isinstance(err, MiddlewareConfigError) and isinstance(err, TypeError)


def test_the_issue_example_names_middleware_hook_expected_and_found() -> None:
    @deco.before_model
    def log(state: Any) -> None:
        return None

    with pytest.raises(HookSignatureError) as info:
        build(log)
    assert str(info.value) == (
        "log.before_model has the signature def log(state), but the engine calls it as "
        "def before_model(state, runtime) (too many positional arguments). Change it to "
        "def before_model(state, runtime); extra parameters need defaults."
    )


@pytest.mark.parametrize("hook", list(HOOKS))
def test_method_with_a_required_keyword_only_parameter_fails_at_build(hook: str) -> None:
    params = ", ".join(PARAMETERS[HOOKS[hook].kind])
    namespace: dict[str, Any] = {}
    exec(f"def {hook}(self, {params}, *, extra): return None", namespace)
    cls = type("Bad", (AgentMiddleware,), {hook: namespace[hook]})
    with pytest.raises(HookSignatureError) as info:
        build(cls())
    assert info.value.middleware == "Bad"
    assert info.value.expected == f"def {hook}(self, {params})"
    assert info.value.found == f"def {hook}(self, {params}, *, extra)"
    # Python's own reason, in its words (3.12 says "missing a required keyword-only argument: 'extra'")
    assert re.search(r"missing a required (keyword-only )?argument: 'extra'", str(info.value))


@pytest.mark.parametrize("hook", list(HOOKS))
def test_extra_parameters_with_defaults_and_varargs_are_accepted(hook: str) -> None:
    params = ", ".join(PARAMETERS[HOOKS[hook].kind])
    namespace: dict[str, Any] = {}
    exec(f"def {hook}(self, {params}, extra=1, *args, flag=True, **kw): return None", namespace)
    exec("def loose(self, *args): return None", namespace)
    for fn in (namespace[hook], namespace["loose"]):
        cls = type("Ok", (AgentMiddleware,), {hook: fn})
        build(cls())


def test_async_method_with_wrong_parameters_fails_at_build() -> None:
    class Audit(AgentMiddleware):
        async def awrap_tool_call(self, request: Any) -> ToolMessage:  # type: ignore[override]
            raise AssertionError

    with pytest.raises(HookSignatureError) as info:
        build(Audit())
    assert info.value.hook == "awrap_tool_call"
    assert info.value.expected == "async def awrap_tool_call(self, request, handler)"
    assert info.value.found == "async def awrap_tool_call(self, request)"


def test_flow_hook_with_a_handler_parameter_is_refused() -> None:
    class Flowy(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = yield request
            return response

    with pytest.raises(MiddlewareConfigError) as info:
        build(Flowy())
    assert info.value.hook == "wrap_model_call"
    assert "a flow hook takes only the request" in str(info.value)


def test_flow_hooks_with_the_right_signature_build() -> None:
    class Flowy(AgentMiddleware):
        def wrap_model_call(self, request: Any) -> Any:
            return (yield request)

        def wrap_tool_call(self, request: Any) -> Any:
            return (yield request)

    build(Flowy())


@pytest.mark.parametrize("hook", [*NODE_HOOKS, "modify_model_request", "before_tool", "after_tool"])
def test_generator_outside_wrap_hooks_is_refused(hook: str) -> None:
    params = ", ".join(PARAMETERS[HOOKS[hook].kind])
    namespace: dict[str, Any] = {}
    exec(f"def {hook}(self, {params}):\n    yield None", namespace)
    cls = type("Gen", (AgentMiddleware,), {hook: namespace[hook]})
    with pytest.raises(HookSignatureError, match="only wrap_model_call and wrap_tool_call may be written as flows"):
        build(cls())


def test_async_generator_is_refused() -> None:
    class AGen(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            yield await handler(request)

    with pytest.raises(HookSignatureError, match="hooks are never async generators"):
        build(AGen())


def test_guard_messages_signature_is_checked() -> None:
    class Guard(AgentMiddleware):
        def guard_messages(self, messages: Sequence[AnyMessage]) -> None:  # type: ignore[override]
            return None

    with pytest.raises(HookSignatureError) as info:
        build(Guard())
    assert info.value.hook == "guard_messages"
    assert info.value.expected == "def guard_messages(self, messages, runtime)"


def test_guard_resume_signature_is_checked() -> None:
    class Guard(AgentMiddleware):
        def guard_resume(self, value: Any) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(HookSignatureError) as info:
        build(Guard())
    assert info.value.hook == "guard_resume" and info.value.middleware == "Guard"
    assert info.value.expected == "def guard_resume(self, value, runtime)"


def test_callable_objects_and_partials_are_checked_by_their_call_signature() -> None:
    import functools

    def node(tag: str, state: Any, runtime: Runtime[Any]) -> None:
        return None

    check_hook_function("P", "before_model", functools.partial(node, "x"))
    with pytest.raises(HookSignatureError):
        check_hook_function("P", "before_model", functools.partial(node, "x", {}))

    class Callable_:
        def __call__(self, state: Any) -> None:
            return None

    fn: Callable[..., Any] = Callable_()
    with pytest.raises(HookSignatureError) as info:
        check_hook_function("C", "after_agent", fn)
    assert info.value.found.startswith("def Callable_")
    check_hook_function("B", "before_model", print)  # a builtin: nothing to read, accepted
