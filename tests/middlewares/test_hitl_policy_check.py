"""HumanInTheLoopMiddleware's policy is checked against the agent's tools when the agent is built: a reviewed name
within a typo of one of the agent's tools is a MiddlewareConfigError with a "did you mean" (as written, the real tool
would run unreviewed); a name like none of them is an UnknownToolWarning (a policy shared with an agent that has the
tool); tools a middleware adds per call are declared in ``dynamic_tools``. The agent's tools are create_agent's, every
middleware's ``tools`` and the structured-output tool."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from middleware_kit import AgentMiddleware, create_agent, wrap_model_call, wrap_tool_call
from middleware_kit._engine.pipeline import AgentTools, build_pipeline
from middleware_kit.errors import MiddlewareConfigError, UnknownToolWarning
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.structured_output import ToolStrategy
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

_threads = itertools.count()
sent: list[str] = []


def config() -> RunnableConfig:
    return {"configurable": {"thread_id": f"policy{next(_threads)}"}}


@tool
def send_email(to: str) -> str:
    """Send an email."""
    sent.append(to)
    return f"sent to {to}"


@tool
def read_inbox() -> str:
    """Read the inbox."""
    return "empty"


def email_turn() -> ScriptedChatModel:
    return ScriptedChatModel([AIMessage("", tool_calls=[tool_call("send_email", {"to": "bob"}, id="c1")]), "done"])


def build(interrupt_on: Any, tools: list[Any] | None = None, **kw: Any) -> Any:
    return create_agent(email_turn(), [send_email, read_inbox] if tools is None else tools,
                        middleware=[HumanInTheLoopMiddleware(interrupt_on, **kw)], checkpointer=InMemorySaver())


# -- a misspelled tool is an error at build time -----------------------------------------------------------------
def test_a_misspelled_tool_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(MiddlewareConfigError) as info:
        build({"send_emial": True})
    err = info.value
    assert (err.middleware, err.hook) == ("HumanInTheLoopMiddleware", "interrupt_on")
    assert str(err) == (
        "HumanInTheLoopMiddleware: interrupt_on names the tool 'send_emial', which this agent does not have: did you "
        "mean 'send_email'? As written, 'send_email' would run without this policy. The agent's tools: 'send_email', "
        "'read_inbox' (create_agent's tools, every middleware's `tools`, the structured-output tool). Fix the name "
        "(the tool's `name`); if 'send_emial' is a tool a middleware adds per call (a wrap_model_call extending "
        "request.tools, run by a wrap_tool_call), declare it: HumanInTheLoopMiddleware(..., "
        "dynamic_tools=['send_emial'])."
    )


@pytest.mark.parametrize("name", ["Send_Email", "send-email", "sendemail", "send_emails", "snd_email"])
def test_near_misses_of_every_kind_are_typos(name: str) -> None:
    with pytest.raises(MiddlewareConfigError, match="did you mean 'send_email'"):
        build({name: {"allowed_decisions": ["approve"]}})


def test_the_error_names_a_renamed_middleware() -> None:
    with pytest.raises(MiddlewareConfigError) as info:
        create_agent(email_turn(), [send_email],
                     middleware=[HumanInTheLoopMiddleware({"send_emial": True}, name="approvals")])
    assert info.value.middleware == "approvals"
    assert str(info.value).startswith("approvals: interrupt_on names the tool 'send_emial'")


def test_the_corrected_policy_reviews_the_real_tool(run: Runner) -> None:
    sent.clear()
    agent = build({"send_email": True})
    cfg = config()
    paused = run(agent, {"messages": [HumanMessage("mail bob")]}, config=cfg)
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "send_email"
    assert sent == []  # not run before the review
    run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg)
    assert sent == ["bob"]


def test_names_listed_as_never_reviewed_are_not_checked() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build({"send_email": True, "read_inbx": False})


def test_a_callable_policy_names_no_tool_in_advance() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(lambda call, state, runtime: call["name"] == "send_email")


# -- the agent's tools: create_agent's, every middleware's, the structured-output tool ---------------------------------
class Mailer(AgentMiddleware):
    @property
    def tools(self) -> list[BaseTool]:  # type: ignore[override]
        return [send_email]


def test_a_middlewares_own_tool_may_be_reviewed(run: Runner) -> None:
    sent.clear()
    agent = create_agent(email_turn(), middleware=[HumanInTheLoopMiddleware({"send_email": True}), Mailer()],
                         checkpointer=InMemorySaver())
    paused = run(agent, {"messages": [HumanMessage("mail bob")]}, config=config())
    assert "__interrupt__" in paused and sent == []


class Answer(BaseModel):
    text: str


def test_the_structured_output_tool_is_one_of_the_agents_tools() -> None:
    hitl = HumanInTheLoopMiddleware({"Answer": True})
    build_pipeline([hitl], client_tools=[send_email], structured_tools=["Answer"])
    with pytest.raises(MiddlewareConfigError, match="did you mean 'Answer'"):
        build_pipeline([HumanInTheLoopMiddleware({"Answr": True})], client_tools=[send_email],
                       structured_tools=["Answer"])


def test_create_agent_counts_the_structured_output_tool() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        create_agent(email_turn(), [send_email], middleware=[HumanInTheLoopMiddleware({"Answer": True})],
                     response_format=ToolStrategy(Answer))


def test_a_middleware_sees_the_agent_tools_through_check_agent_tools() -> None:
    seen: list[AgentTools] = []

    class Inspector(AgentMiddleware):
        def check_agent_tools(self, tools: AgentTools) -> None:
            seen.append(tools)

    build_pipeline([Inspector(), Mailer()], client_tools=[read_inbox], structured_tools=["Answer"])
    assert seen == [AgentTools(client=("read_inbox",), middleware=("send_email",), structured=("Answer",))]
    assert seen[0].names == ("read_inbox", "send_email", "Answer")
    build_pipeline([Inspector()], client_tools=[], validate_jumps=False)  # the testing harness: no agent to check
    assert len(seen) == 1


# -- a name like none of the agent's tools: a warning -------------------------------------------------------------
def test_a_name_unlike_every_tool_is_a_warning_not_an_error(run: Runner) -> None:
    with pytest.warns(UnknownToolWarning) as record:
        agent = build({"send_email": True, "task": True})
    (warning,) = record
    assert str(warning.message).startswith(
        "HumanInTheLoopMiddleware: interrupt_on names the tool 'task', which this agent does not have, so it never "
        "applies here. The agent's tools: 'send_email', 'read_inbox'"
    )
    assert warning.filename == __file__  # points at the create_agent call
    assert "__interrupt__" in run(agent, {"messages": [HumanMessage("mail bob")]}, config=config())


# -- tools added per call: dynamic_tools ---------------------------------------------------------------------------
@tool
def wire_money(amount: int) -> str:
    """Wire money (offered only by a wrapper)."""
    sent.append(f"wired {amount}")
    return "wired"


@wrap_model_call
def offer_wire(request: Any, handler: Any) -> Any:
    return handler(request.override(tools=[*request.tools, wire_money]))


@wrap_tool_call
def run_wire(request: Any, handler: Any) -> Any:
    return handler(request.override(tool=wire_money) if request.tool is None else request)


def wire_agent(hitl: HumanInTheLoopMiddleware) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("wire_money", {"amount": 5}, id="w1")]), "ok"])
    return create_agent(model, [send_email], middleware=[hitl, offer_wire, run_wire], checkpointer=InMemorySaver())


def test_a_declared_dynamic_tool_is_reviewed(run: Runner) -> None:
    sent.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = wire_agent(HumanInTheLoopMiddleware({"wire_money": True}, dynamic_tools=["wire_money"]))
    cfg = config()
    paused = run(agent, {"messages": [HumanMessage("wire 5")]}, config=cfg)
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "wire_money"
    assert sent == []
    run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg)
    assert sent == ["wired 5"]


def test_an_undeclared_dynamic_tool_warns_and_a_typo_of_a_declared_one_is_refused() -> None:
    with pytest.warns(UnknownToolWarning, match="dynamic_tools=\\['wire_money'\\]"):
        wire_agent(HumanInTheLoopMiddleware({"wire_money": True}))
    with pytest.raises(MiddlewareConfigError, match="did you mean 'send_email'"):
        wire_agent(HumanInTheLoopMiddleware({"wire_money": True, "send_mail": True}, dynamic_tools=["wire_money"]))


@pytest.mark.parametrize("value", ["wire_money", [3], None])
def test_dynamic_tools_is_a_list_of_names(value: Any) -> None:
    with pytest.raises(MiddlewareConfigError) as info:
        HumanInTheLoopMiddleware({"wire_money": True}, dynamic_tools=value)
    assert (info.value.middleware, info.value.hook) == ("HumanInTheLoopMiddleware", "dynamic_tools")
