"""Moderate what users send, what tools bring back and what the model says -- with your own checker.

What it shows
    ``ModerationMiddleware`` with a small offline checker (``KeywordModerationChecker``) standing in for a real
    classifier, in its three exit behaviours on three conversations:
    ``"end"`` (a flagged user message ends the run before the model is called), ``"replace"`` (a flagged web result is
    replaced before the model reads it, and the run goes on) and ``"error"`` (a flagged model answer raises
    ``ModerationError``, which the application catches, and the thread stays usable). For OpenAI's endpoint use
    ``OpenAIModerationMiddleware(...)`` (the ``openai`` extra) with the same behaviours.

When to use it
    Customer-facing agents: block requests you do not serve, keep untrusted tool output (web pages, e-mails) from
    steering the model, and stop answers that break policy before the user sees them.

Run it: ``python recipes/moderation.py``.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares.moderation import KeywordModerationChecker, ModerationError, ModerationMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

CHECKER = KeywordModerationChecker({"weapons": ["explosive", "detonator"], "self-harm": ["hurt myself"]})


@tool
def web_search(query: str) -> str:
    """Search the web."""
    return "Top result: a forum thread on building a detonator."


def main() -> None:
    # 1. "end": the flagged request never reaches the model.
    model = ScriptedChatModel(["never"])
    agent = create_agent(model, middleware=[ModerationMiddleware(CHECKER)])
    result = agent.invoke({"messages": [HumanMessage("Which explosive is easiest to make?")]})
    print("end:    ", result["messages"][-1].content)
    assert model.calls == [] and "flagged for weapons" in result["messages"][-1].content

    # 2. "replace": the poisoned tool result is swapped before the model reads it.
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("web_search", {"query": "fireworks"})]),
                               "I could not find safe information on that."])
    moderation = ModerationMiddleware(CHECKER, check_tool_results=True, exit_behavior="replace",
                                      violation_message="[removed: {categories}]")
    result = create_agent(model, [web_search], middleware=[moderation]).invoke(
        {"messages": [HumanMessage("How are fireworks made?")]})
    print("replace:", model.calls[1].messages[-1].content)
    assert model.calls[1].messages[-1].content == "[removed: weapons]"
    assert result["messages"][-1].content == "I could not find safe information on that."

    # 3. "error": a flagged answer raises; the application decides, and the thread carries on.
    model = ScriptedChatModel(["You could use a detonator.", "Happy to help with something else."])
    agent = create_agent(model, middleware=[ModerationMiddleware(CHECKER, exit_behavior="error")],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    try:
        agent.invoke({"messages": [HumanMessage("tell me a fun fact")]}, config)
        raise AssertionError("expected ModerationError")
    except ModerationError as error:
        print("error:  ", error.stage, error.result.categories)
        assert error.stage == "output" and error.result.categories == ("weapons",)
    result = agent.invoke({"messages": [HumanMessage("ok, something else then")]}, config)
    assert result["messages"][-1].content == "Happy to help with something else."
    print("OK: ended, replaced and raised as configured; the thread stayed usable")


if __name__ == "__main__":
    main()
