"""Unit-testing your own middleware with ``middleware_kit.testing``: no graph, no provider, no API key.

What it shows
    Four small middlewares (a turn limit, a retry on timeouts, an e-mail redactor, a tool guard) and the tests that
    pin their behaviour, one helper at a time:

    * ``run_hook`` / ``arun_hook``: run one node hook as an agent would (return value validated, async twins driven);
    * ``make_request`` / ``make_runtime``: build the ``ModelRequest`` and ``Runtime`` hooks receive;
    * ``run_model_chain``: run ``modify_model_request`` and ``wrap_model_call`` layers around the model (or a stub);
    * ``run_tool_chain``: run ``before_tool`` / ``wrap_tool_call`` / ``after_tool`` around a tool (or a stub);
    * ``TraceRecorder``: a probe middleware that records the order of every hook;
    * ``ScriptedChatModel``: a fake chat model replaying text, ``tool_call(...)`` steps and exceptions, and recording
      every call it receives (``model.calls``, ``model.call_count``).

    The tests are plain functions named ``test_*``: this script runs them all, and pytest collects them if you point
    it at this file (``pytest recipes/unit_testing_your_middleware.py``). Copy the pattern into your own test suite.

When to use it
    For every middleware you write: test each hook alone first (fast, precise failures), then once inside an agent
    under both ``invoke`` and ``ainvoke``.

Run it: ``python recipes/unit_testing_your_middleware.py``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import (
    AgentMiddleware,
    InvalidJumpError,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
    after_model,
    after_tool,
    before_model,
    before_tool,
    create_agent,
    modify_model_request,
)
from middleware_kit.hooks import ModelHandler, ToolResult
from middleware_kit.testing import (
    ScriptedChatModel,
    TraceRecorder,
    arun_hook,
    make_request,
    make_runtime,
    run_hook,
    run_model_chain,
    run_tool_chain,
    tool_call,
)

# =====================================================================================================================
# The middlewares under test
# =====================================================================================================================


@before_model(can_jump_to=["end"])
def turn_limit(state: Any, runtime: Any) -> dict[str, Any] | None:
    """End the run once the model has answered 3 times (reads the limit from the context if given)."""
    limit = getattr(runtime.context, "max_turns", 3)  # run_hook passes make_runtime() (context None) by default
    turns = sum(isinstance(m, AIMessage) for m in state["messages"])
    if turns < limit:
        return None
    runtime.stream_writer({"turn_limit": turns})
    return {"messages": [AIMessage(f"Stopping after {turns} turns.")], "jump_to": "end"}


class RetryOnTimeout(AgentMiddleware):
    """Call the model again when it times out, up to ``attempts`` times in all."""

    def __init__(self, attempts: int = 2) -> None:
        self.attempts = attempts

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any] | AIMessage:
        for attempt in range(1, self.attempts + 1):
            try:
                return handler(request)
            except TimeoutError:
                if attempt == self.attempts:
                    raise
        raise AssertionError("unreachable")


EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


@modify_model_request
def redact_emails(request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
    """The model never sees e-mail addresses (state keeps the original messages)."""
    messages = [
        m.model_copy(update={"content": EMAIL.sub("<email>", m.content)}) if isinstance(m.content, str) else m
        for m in request.messages
    ]
    return request.override(messages=messages)


@before_tool
def no_deletes(request: ToolCallRequest) -> ToolMessage | None:
    """Refuse every ``delete_*`` tool without running it."""
    name = request.tool_call["name"]
    if not name.startswith("delete_"):
        return None
    return ToolMessage(f"{name} is not allowed.", tool_call_id=request.tool_call["id"], name=name, status="error")


@after_tool
def truncate_results(request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
    """Cut tool outputs longer than 20 characters."""
    if isinstance(result, ToolMessage) and isinstance(result.content, str) and len(result.content) > 20:
        return result.model_copy(update={"content": result.content[:20] + "..."})
    return None


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: " + "x" * 40


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("no_deletes must keep this tool from running")


# =====================================================================================================================
# The tests
# =====================================================================================================================


def test_turn_limit_lets_early_turns_through() -> None:
    state = {"messages": [HumanMessage("hi"), AIMessage("hello")]}
    assert run_hook(turn_limit, "before_model", state) is None


def test_turn_limit_ends_the_run_and_reports_on_the_stream() -> None:
    events: list[Any] = []
    state = {"messages": [HumanMessage("q"), AIMessage("1"), AIMessage("2"), AIMessage("3")]}
    update = run_hook(turn_limit, "before_model", state, make_runtime(stream_writer=events.append))
    assert update is not None and update["jump_to"] == "end"
    assert update["messages"][0].text == "Stopping after 3 turns."
    assert events == [{"turn_limit": 3}]


def test_turn_limit_reads_the_context_and_runs_under_async() -> None:
    class Ctx:
        max_turns = 1

    state = {"messages": [HumanMessage("q"), AIMessage("1")]}
    update = asyncio.run(arun_hook(turn_limit, "before_model", state, make_runtime(Ctx())))
    assert update is not None and update["jump_to"] == "end"


def test_an_undeclared_jump_is_caught() -> None:
    @after_model  # forgot can_jump_to=["end"]
    def sloppy(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    try:
        run_hook(sloppy, "after_model", {"messages": []})
    except InvalidJumpError as exc:
        assert exc.middleware == "sloppy" and "can_jump_to" in str(exc)
    else:
        raise AssertionError("an undeclared jump_to must raise InvalidJumpError")


def test_retry_calls_the_model_again_after_a_timeout() -> None:
    model = ScriptedChatModel([TimeoutError("slow"), "ok"])
    response = run_model_chain(RetryOnTimeout(), make_request(["hi"], model=model))
    assert response.result[0].text == "ok"
    assert model.call_count == 2


def test_retry_gives_up_after_its_attempts() -> None:
    model = ScriptedChatModel([TimeoutError("1"), TimeoutError("2"), "never reached"])
    try:
        run_model_chain(RetryOnTimeout(attempts=2), make_request(["hi"], model=model))
    except TimeoutError as exc:
        assert str(exc) == "2"
    else:
        raise AssertionError("the second timeout must propagate")
    assert model.call_count == 2


def test_redaction_changes_the_request_not_the_original() -> None:
    request = make_request(["mail me at ada@example.com"], system_prompt="Be brief.")
    seen: list[ModelRequest[Any]] = []
    run_model_chain(redact_emails, request, handler=lambda r: seen.append(r) or AIMessage("ok"))
    assert seen[0].messages[0].text == "mail me at <email>"
    assert seen[0].system_prompt == "Be brief."
    assert request.messages[0].text == "mail me at ada@example.com"  # requests are immutable


def test_retry_reruns_inner_layers_only() -> None:
    """TraceRecorder probes around the middlewares show what a retry re-runs."""
    trace: list[str] = []
    model = ScriptedChatModel([TimeoutError("slow"), "ok"])
    chain = [TraceRecorder("outer", trace), redact_emails, RetryOnTimeout(), TraceRecorder("inner", trace)]
    run_model_chain(chain, make_request(["hi"], model=model))
    assert trace == [
        "outer.modify_model_request",
        "inner.modify_model_request",  # every modify_model_request runs once, before any wrapper
        "outer.wrap_model_call>",
        "inner.wrap_model_call>",  # first attempt: the model raises, so inner never returns
        "inner.wrap_model_call>",  # the retry re-enters the layers inside RetryOnTimeout only
        "inner.wrap_model_call<",
        "outer.wrap_model_call<",
    ]


def test_no_deletes_skips_the_tool() -> None:
    call = tool_call("delete_file", {"path": "/etc/passwd"}, id="call_del")
    result = run_tool_chain(no_deletes, ToolCallRequest(call, delete_file, {"messages": []}))
    assert isinstance(result, ToolMessage)
    assert result.status == "error" and result.tool_call_id == "call_del"


def test_tool_hooks_order_and_truncation() -> None:
    trace: list[str] = []
    request = ToolCallRequest(tool_call("read_file", {"path": "a.txt"}), read_file, {"messages": []})
    result = run_tool_chain([TraceRecorder("outer", trace), no_deletes, truncate_results], request)
    assert isinstance(result, ToolMessage)
    assert result.content == "contents of a.txt: x..."
    assert trace == ["outer.before_tool", "outer.wrap_tool_call>", "outer.wrap_tool_call<", "outer.after_tool"]


def test_inside_an_agent_under_invoke_and_ainvoke() -> None:
    """One end-to-end run per mode: a timeout, a refused tool call, an allowed one, then the answer."""
    for mode in ("invoke", "ainvoke"):
        trace: list[str] = []
        model = ScriptedChatModel(
            [
                TimeoutError("slow"),
                AIMessage(
                    "", tool_calls=[tool_call("delete_file", {"path": "x"}), tool_call("read_file", {"path": "y"})]
                ),
                "done",
            ]
        )
        agent = create_agent(
            model,
            [read_file, delete_file],
            middleware=[TraceRecorder("probe", trace), RetryOnTimeout(), redact_emails, no_deletes, truncate_results],
        )
        inp = {"messages": [HumanMessage("clean up, reply to bob@example.com")]}
        result = agent.invoke(inp) if mode == "invoke" else asyncio.run(agent.ainvoke(inp))

        assert model.call_count == 3, mode  # timeout, tool calls, answer
        assert model.calls[0].messages[0].text == "clean up, reply to <email>", mode
        assert model.calls[0].tools == ("read_file", "delete_file"), mode
        assert result["messages"][0].text == "clean up, reply to bob@example.com", mode  # state is untouched
        tools = {m.name: m for m in result["messages"] if isinstance(m, ToolMessage)}
        assert tools["delete_file"].status == "error", mode
        assert tools["read_file"].content == "contents of y: xxxxx...", mode  # truncated by after_tool
        assert result["messages"][-1].text == "done", mode
        assert trace.count("probe.before_tool") == 2 and trace.count("probe.wrap_model_call>") == 2, mode


TESTS = [value for name, value in list(globals().items()) if name.startswith("test_") and callable(value)]


def main() -> None:
    failures = []
    for test in TESTS:
        try:
            test()
        except Exception as exc:  # report every failing test, not just the first
            failures.append(f"{test.__name__}: {type(exc).__name__}: {exc}")
            print(f"  FAIL {test.__name__}: {type(exc).__name__}: {exc}")
        else:
            print(f"  ok   {test.__name__}")
    if failures:
        raise SystemExit(f"{len(failures)} of {len(TESTS)} tests failed:\n" + "\n".join(failures))
    print(f"\nOK: {len(TESTS)} tests passed.")


if __name__ == "__main__":
    main()
