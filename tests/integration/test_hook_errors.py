"""An exception raised inside a user's hook reaches the caller unchanged (same object, same type) with one note naming
the middleware and the hook where it was raised: node hooks, wrap hooks (classic, async, flow), before/after_tool,
modify_model_request, dynamic prompts. What only passed through a wrap hook (the model's, the tool's, an inner hook's)
is not the hook's; middleware_kit's own errors and LangGraph's control flow get no note. Under invoke and ainvoke."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit import decorators as deco
from middleware_kit.errors import HookReturnError
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.types import ModelRequest, ModelResponse, ToolCallRequest
from tests.conftest import Runner

NOTE = "Raised in the middleware hook "


class Boom(ValueError):
    pass


def hook_notes(exc: BaseException) -> list[str]:
    return [n for n in getattr(exc, "__notes__", ()) if n.startswith(NOTE)]


def q() -> dict[str, Any]:
    return {"messages": [HumanMessage("q")]}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def broken(key: str) -> str:
    """A tool that fails."""
    raise Boom(f"tool failed on {key}")


def tool_agent(middleware: list[Any], tools: list[Any] | None = None, name: str = "lookup") -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call(name, {"key": "k"})]), "done"])
    return create_agent(model, tools or [lookup], middleware=middleware)


def raises_with(
    run: Runner, agent: Any, error: BaseException | None, where: str | None, **kwargs: Any
) -> BaseException:
    """Run ``agent``; the error is ``error`` itself (when given) and its hook notes are exactly ``where``'s."""
    with pytest.raises(Exception) as info:
        run(agent, q(), **kwargs)
    if error is not None:
        assert info.value is error
    assert hook_notes(info.value) == ([f"{NOTE}{where}."] if where else [])
    return info.value


# -- node hooks ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hook", ["before_agent", "before_model", "after_model", "after_agent"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_node_hook_that_raises_is_named(run: Runner, hook: str, kind: str) -> None:
    error = Boom(f"{hook} failed")
    if kind == "sync":

        def fn(state: Any, runtime: Any) -> None:
            raise error

    else:

        async def fn(state: Any, runtime: Any) -> None:  # type: ignore[misc]
            raise error

    quiet = deco.before_model(name="quiet")(lambda state, runtime: None)  # a neighbour sharing the fused node
    failing = getattr(deco, hook)(name="failing")(fn)
    raises_with(run, create_agent(ScriptedChatModel(["ok"]), middleware=[quiet, failing]), error,
                f"failing.{hook}")


def test_a_class_hook_is_named_after_the_middleware(run: Runner) -> None:
    class Guard(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> None:
            settings: dict[str, str] = {}
            settings["missing"]  # a KeyError inside the hook's own code

    err = raises_with(run, create_agent(ScriptedChatModel(["ok"]), middleware=[Guard()]), None, "Guard.before_model")
    assert type(err) is KeyError


# -- wrap hooks -------------------------------------------------------------------------------------------------
def passthrough(name: str) -> Any:
    @deco.wrap_model_call(name=name)
    def wrap(request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(request)

    return wrap


def raising_wrap(kind: str, error: BaseException) -> Any:
    if kind == "sync":

        @deco.wrap_model_call(name="middle")
        def wrap(request: ModelRequest, handler: Any) -> ModelResponse:
            raise error

        return wrap
    if kind == "async":

        @deco.wrap_model_call(name="middle")
        async def awrap(request: ModelRequest, handler: Any) -> ModelResponse:
            raise error

        return awrap

    @deco.wrap_model_call(name="middle")
    def flow(request: ModelRequest) -> Any:
        yield request
        raise error

    return flow


@pytest.mark.parametrize("kind", ["sync", "async", "flow"])
def test_a_wrap_hook_that_raises_is_named_once_not_by_the_layers_around_it(run: Runner, kind: str) -> None:
    error = Boom("wrap failed")
    agent = create_agent(ScriptedChatModel(["ok"]),
                         middleware=[passthrough("outer"), raising_wrap(kind, error), passthrough("inner")])
    raises_with(run, agent, error, "middle.wrap_model_call")


@pytest.mark.parametrize("raising", [True, False], ids=["hook-raises", "model-raises"])
def test_traced_runs_name_the_same_hook(run: Runner, raising: bool) -> None:
    """With callback handlers every hook is a traced run (another build of the chain): the same attribution."""
    error = Boom("traced")
    middle = raising_wrap("sync", error) if raising else passthrough("middle")
    model = ScriptedChatModel(["ok"] if raising else [error])
    agent = create_agent(model, middleware=[passthrough("outer"), middle, passthrough("inner")])
    raises_with(run, agent, error, "middle.wrap_model_call" if raising else None,
                config={"callbacks": [BaseCallbackHandler()]})


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_model_error_through_wrap_hooks_is_not_theirs(run: Runner, kind: str) -> None:
    error = Boom("the provider is down")

    @deco.wrap_model_call(name="flowing")
    def flowing(request: ModelRequest) -> Any:
        return (yield request)

    @deco.wrap_model_call(name="retrying")
    async def retrying(request: ModelRequest, handler: Any) -> Any:
        try:
            return await handler(request)
        except Boom:
            raise  # re-raised as it came: still the model's

    layers = [passthrough("outer"), flowing, retrying] if kind == "async" else [passthrough("outer"), flowing]
    agent = create_agent(ScriptedChatModel([error]), middleware=layers)
    raises_with(run, agent, error, None)


def test_a_wrap_hook_that_turns_a_model_error_into_its_own_is_named(run: Runner) -> None:
    @deco.wrap_model_call(name="translate")
    def translate(request: ModelRequest, handler: Any) -> Any:
        try:
            return handler(request)
        except Boom as exc:
            raise RuntimeError("the model failed; translated") from exc

    agent = create_agent(ScriptedChatModel([Boom("down")]), middleware=[passthrough("outer"), translate])
    err = raises_with(run, agent, None, "translate.wrap_model_call")
    assert type(err) is RuntimeError and isinstance(err.__cause__, Boom)
    assert hook_notes(err.__cause__) == []


def test_a_dynamic_prompt_that_raises_is_named(run: Runner) -> None:
    error = Boom("no persona")

    @deco.dynamic_prompt(name="persona")
    def persona(request: ModelRequest) -> str:
        raise error

    raises_with(run, create_agent(ScriptedChatModel(["ok"]), middleware=[passthrough("outer"), persona]), error,
                "persona.wrap_model_call")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_modify_model_request_that_raises_is_named(run: Runner, kind: str) -> None:
    error = Boom("bad request")
    if kind == "sync":

        def fn(request: ModelRequest, state: Any) -> ModelRequest:
            raise error

    else:

        async def fn(request: ModelRequest, state: Any) -> ModelRequest:  # type: ignore[misc]
            raise error

    rewrite = deco.modify_model_request(name="rewrite")(fn)
    raises_with(run, create_agent(ScriptedChatModel(["ok"]), middleware=[passthrough("outer"), rewrite]), error,
                "rewrite.modify_model_request")


# -- tool hooks -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hook", ["before_tool", "after_tool", "wrap_tool_call"])
def test_a_tool_hook_that_raises_is_named(run: Runner, hook: str) -> None:
    error = Boom(f"{hook} failed")

    def fn(*args: Any) -> Any:
        raise error

    @deco.wrap_tool_call(name="around")
    def around(request: ToolCallRequest, handler: Any) -> Any:
        return handler(request)

    failing = getattr(deco, hook)(name="failing")(fn)
    raises_with(run, tool_agent([around, failing]), error, f"failing.{hook}")


def test_a_flow_tool_hook_that_raises_after_the_tool_is_named(run: Runner) -> None:
    error = Boom("checked the result and refused it")

    @deco.wrap_tool_call(name="checker")
    def checker(request: ToolCallRequest) -> Any:
        yield request
        raise error

    raises_with(run, tool_agent([checker]), error, "checker.wrap_tool_call")


def test_a_tool_error_through_tool_hooks_is_the_tools_not_theirs(run: Runner) -> None:
    @deco.wrap_tool_call(name="around")
    def around(request: ToolCallRequest, handler: Any) -> Any:
        return handler(request)

    @deco.after_tool(name="audit")
    async def audit(request: ToolCallRequest, result: Any) -> None:
        return None

    err = raises_with(run, tool_agent([around, audit], [broken], "broken"), None, None)
    assert type(err) is Boom
    assert any("While running the tool 'broken'" in n for n in err.__notes__)


# -- what gets no note --------------------------------------------------------------------------------------------
def test_middleware_kits_own_errors_get_no_hook_note(run: Runner) -> None:
    @deco.wrap_model_call(name="sloppy")
    def sloppy(request: ModelRequest, handler: Any) -> Any:
        handler(request)
        return "not a response"

    err = raises_with(run, create_agent(ScriptedChatModel(["ok"]), middleware=[sloppy]), None, None)
    assert isinstance(err, HookReturnError) and (err.middleware, err.hook) == ("sloppy", "wrap_model_call")


def test_an_error_from_a_nested_agents_hook_names_the_innermost_hook(run: Runner) -> None:
    error = Boom("inner failed")

    @deco.before_model(name="inner_hook")
    def inner_hook(state: Any, runtime: Any) -> None:
        raise error

    inner = create_agent(ScriptedChatModel(["ok"]), middleware=[inner_hook])

    @deco.before_model(name="outer_hook")
    def outer_hook(state: Any, runtime: Any) -> None:
        inner.invoke(q())

    raises_with(run, create_agent(ScriptedChatModel(["ok"]), middleware=[outer_hook]), error,
                "inner_hook.before_model")


def test_the_happy_path_is_unchanged(run: Runner) -> None:
    agent = tool_agent([passthrough("outer")])
    assert run(agent, q())["messages"][-1].content == "done"
