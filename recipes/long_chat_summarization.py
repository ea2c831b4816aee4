"""Long chats: summarize old history so a thread can go on forever, without ever breaking the conversation.

What it shows
    ``SummarizationMiddleware(summarizer, trigger=("tokens", 400), keep=("messages", 4))`` on a checkpointed thread
    where the user chats and the agent calls a tool. Each model call measures the exact request (messages, system
    prompt, tool schema; tiktoken, offline) and, past 400 tokens, folds the older messages into one rolling summary.
    Checked along the way: the model never receives a tool result without its call (nor a call without its result);
    the newest question is always there; there is only ever one summary, and each new summary was written knowing
    the previous one; progress arrives on the custom stream (``summarization_started`` / ``_finished`` with the
    token counts); and when the summarizer fails, the thread's history is left exactly as it was.

When to use it
    Any long-lived thread (support chats, assistants with memory) whose history would outgrow the context window.

Run it: ``python recipes/long_chat_summarization.py``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.testing import ScriptedChatModel, tool_call


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"Sunny and 21 degrees in {city}."


def summarize(messages: list[Any]) -> str:
    """A stand-in for a summarizing model: it records what it saw (a real one would be a chat model)."""
    previous = next((str(m.content) for m in messages if m.type == "system"), "")
    cities = sorted({str(m.content).split(" in ")[-1].rstrip(".") for m in messages if isinstance(m, ToolMessage)})
    earlier = f"{previous.splitlines()[-1]} " if previous else ""
    return f"{earlier}Checked the weather in: {', '.join(cities) or 'nowhere yet'}."


def assistant(messages: list[BaseMessage]) -> AIMessage:
    """Calls the weather tool for a new question, then answers with the tool's result."""
    last = messages[-1]
    if isinstance(last, HumanMessage):
        city = str(last.content).rsplit(" ", 1)[-1].rstrip("?")
        return AIMessage("", tool_calls=[tool_call("weather", {"city": city})])
    return AIMessage(f"Here you go: {last.content} Anything else? " + "(details) " * 20)


def orphans(messages: list[BaseMessage]) -> list[str]:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answers = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return sorted((calls ^ answers) - {None})  # type: ignore[arg-type]


def main() -> None:
    model = ScriptedChatModel([assistant], cycle=True)
    summarization = SummarizationMiddleware(
        ScriptedChatModel([]), trigger=("tokens", 400), keep=("messages", 4), summarizer=summarize
    )
    agent = create_agent(model, [weather], system_prompt="You are a weather assistant.",
                         middleware=[summarization], checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "long-chat"}}

    cities = ["Lisbon", "Oslo", "Kyoto", "Lima", "Accra", "Quebec", "Perth", "Tunis"]
    events: list[dict[str, Any]] = []
    for city in cities:
        for mode, chunk in agent.stream({"messages": [HumanMessage(f"What is the weather in {city}?")]}, thread,
                                        stream_mode=["custom", "values"]):
            if mode == "custom":
                event: dict[str, Any] = dict(chunk)  # type: ignore[arg-type]
                events.append(event)
                print(f"  [{event['event']}] tokens_before={event['tokens_before']}"
                      + (f" tokens_after={event['tokens_after']}" if "tokens_after" in event else ""))
        history = agent.get_state(thread).values["messages"]
        print(f"after {city}: {len(history)} messages, summary: {history[0].content.splitlines()[-1]!r}"
              if is_summary(history[0]) else f"after {city}: {len(history)} messages")

    for call in model.calls:  # what the model was actually sent
        assert orphans(list(call.messages)) == [], "a tool call was separated from its result"
        asked = [m for m in call.messages if isinstance(m, HumanMessage) and not is_summary(m)]
        assert asked, "the newest question was summarized away"
    history = agent.get_state(thread).values["messages"]
    assert sum(is_summary(m) for m in history) == 1
    finished = [e for e in events if e["event"] == "summarization_finished"]
    assert len(finished) >= 3 and all(e["tokens_after"] < e["tokens_before"] for e in finished)
    assert "Lisbon" in history[0].content  # the rolling summary still remembers the first question

    # A failing summarizer leaves the thread exactly as it was.
    def broken(messages: list[Any]) -> str:
        raise ConnectionError("summarizer unavailable")

    failing = SummarizationMiddleware(ScriptedChatModel([]), trigger=("tokens", 1), keep=("messages", 1),
                                      summarizer=broken)
    fragile = create_agent(model, [weather], middleware=[failing], checkpointer=agent.checkpointer)
    before = [m.id for m in history]
    try:
        fragile.invoke({"messages": [HumanMessage("And in Cairo?")]}, thread)
    except ConnectionError:
        pass
    else:
        raise AssertionError("the summarizer's failure should reach the caller")
    after = fragile.get_state(thread).values["messages"]
    assert [m.id for m in after[: len(before)]] == before and after[-1].content == "And in Cairo?"

    print(f"OK: {len(cities)} questions, {len(finished)} summarizations, one rolling summary, no orphaned tool call")


if __name__ == "__main__":
    main()
