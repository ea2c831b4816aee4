"""Route each run to a cheap or a strong model, with a decision model; fall back to the default when unsure.

What it shows
    ``ModelRouterMiddleware(choices={"fast": ..., "strong": ...}, instructions=..., classifier=decisions,
    min_confidence=0.6)``. Once per run, a decision model (``langchain_core.decisions.BaseDecisionModel``; here a
    small keyword-based stand-in, in production a provider's) answers a ``Choice`` question about the latest user
    message. The route is stored in state (``model_route``) with its probabilities and confidence, and every model
    call of the run, tool loop included, uses the chosen model.

    Checked, in one thread with a checkpointer: a small-talk run goes to the fast model; a proof goes to the strong
    model for both of its model calls (one classification for the run); an ambiguous question (confidence 0.55)
    goes to the agent's default model; the routing events on the custom stream; the same under ``ainvoke``.

When to use it
    Mixed traffic where most requests are easy: the cheap model serves them and the strong one the rest.

Run it: ``python recipes/model_router.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.decisions import BaseDecisionModel, ClassifierResponse, Question, State
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares.model_router import ModelChoice, ModelRouterMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call


class KeywordDecisions(BaseDecisionModel):
    """A stand-in decision model: hard words -> strong, greetings -> fast, anything else: unsure."""

    model: str = "keyword-decisions"
    asked: int = 0

    @property
    def _provider(self) -> str:
        return "local"

    def _classify(self, state: State, questions: dict[str, Question]) -> ClassifierResponse:
        self.asked += 1
        text = state.text.lower() if isinstance(state, BaseMessage) else str(state).lower()
        if any(word in text for word in ("prove", "derive", "integral")):
            probabilities = {"fast": 0.1, "strong": 0.9}
        elif any(word in text for word in ("hi", "thanks", "hello")):
            probabilities = {"fast": 0.85, "strong": 0.15}
        else:
            probabilities = {"fast": 0.55, "strong": 0.45}
        label = max(probabilities, key=lambda k: probabilities[k])
        answer: Any = {
            "type": "choice",
            "choice": label,
            "probabilities": probabilities,
            "confidence": probabilities[label],
        }
        return ClassifierResponse(model=self.model, answers=dict.fromkeys(questions, answer))


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def build() -> tuple[Any, dict[str, ScriptedChatModel], KeywordDecisions]:
    def echo(label: str) -> Any:
        return lambda messages: f"[{label}] answer to: {messages[-1].text}"

    models = {
        "default": ScriptedChatModel(default=echo("default")),
        "fast": ScriptedChatModel(default=echo("fast")),
        "strong": ScriptedChatModel(
            [AIMessage("", tool_calls=[tool_call("multiply", {"a": 2, "b": 2})])], default=echo("strong")
        ),
    }
    decisions = KeywordDecisions()
    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(models["fast"], "Greetings, thanks and short factual questions."),
            "strong": ModelChoice(models["strong"], "Proofs, derivations and multi-step math."),
        },
        instructions="Which model should answer this request?",
        classifier=decisions,
        min_confidence=0.6,
    )
    agent = create_agent(models["default"], [multiply], middleware=[router], checkpointer=InMemorySaver())
    return agent, models, decisions


def ask(agent: Any, text: str, thread: str, use_async: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    config = {"configurable": {"thread_id": thread}}
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    inp = {"messages": [HumanMessage(text)]}

    def record(kind: str, chunk: Any) -> None:
        nonlocal final
        if kind == "custom":
            events.append(chunk)
        else:
            final = chunk

    if use_async:

        async def consume() -> None:
            async for kind, chunk in agent.astream(inp, config, stream_mode=["custom", "values"]):
                record(kind, chunk)

        asyncio.run(consume())
    else:
        for kind, chunk in agent.stream(inp, config, stream_mode=["custom", "values"]):
            record(kind, chunk)
    print(f"    {text!r} -> route {final.get('model_route')} -> {final['messages'][-1].content!r}")
    return final, events


def main() -> None:
    for number, use_async in ((1, False), (2, True)):
        print(f"{number}. one thread, three runs ({'ainvoke' if use_async else 'invoke'})")
        agent, models, decisions = build()
        thread = f"t{number}"
        hello, events = ask(agent, "hi there", thread, use_async)
        check(hello["messages"][-1].content == "[fast] answer to: hi there", "small talk goes to the fast model")
        check(
            events
            == [
                {
                    "event": "model_routed",
                    "middleware": "ModelRouterMiddleware",
                    "route": "fast",
                    "confidence": 0.85,
                    "reason": "classified",
                }
            ],
            f"events: {events}",
        )

        proof, _ = ask(agent, "prove that 2*2 is 4", thread, use_async)
        check(models["strong"].call_count == 2, "both model calls of the run (tool loop) use the strong model")
        check(proof["model_route"].probabilities == {"fast": 0.1, "strong": 0.9}, "the answer is kept in state")
        check(proof["messages"][-1].content.startswith("[strong]"), "the final answer comes from the strong model")

        unsure, events = ask(agent, "capital of Peru?", thread, use_async)
        check(unsure["model_route"] is None and unsure["messages"][-1].content.startswith("[default]"), "unsure")
        check(events[0]["reason"] == "confidence 0.55 is below min_confidence 0.6", f"events: {events}")
        check(decisions.asked == 3, f"one classification per run, got {decisions.asked}")
        check(models["fast"].call_count == 1 and models["default"].call_count == 1, "each model served its runs")

    print("\nOK: easy runs went to the fast model, hard ones to the strong model, unsure ones to the default.")


if __name__ == "__main__":
    main()
