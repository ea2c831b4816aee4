"""Retry, then fall back: ride out a provider's blips, and survive its outages on a backup model.

What it shows
    ``middleware=[ModelFallbackMiddleware(backup), ModelRetryMiddleware(on_failure="error")]``: the fallback is the
    outer layer, the retry the inner one (the first listed is the outermost). Every model call is retried with
    exponential backoff on the primary model; only when the retry gives up does the fallback call the backup model,
    which the retry covers too. ``on_failure="error"`` matters: with the default ``"continue"`` the retry would answer
    "Model call failed ..." itself and the fallback would never run.

    Four scenarios, each checked: a transient 503 (retried, no fallback); an outage (3 attempts, then the backup);
    a 429 with ``Retry-After: 5`` (the wait honours it); both providers down (the last error reaches the caller).
    Progress arrives on LangGraph's custom stream (``stream_mode="custom"``): ``retry``, ``retry_gave_up`` and
    ``fallback`` events, here printed as they come. The waits are recorded instead of slept (``sleep=waits.append``)
    so the recipe runs in milliseconds; drop ``sleep=`` in production.

When to use it
    Any agent in production: providers return 429s and 5xx under load, and have outages. Pick a backup from another
    provider that supports the same tools.

Run it: ``python recipes/retry_then_fallback.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel


class ProviderError(Exception):
    """Shaped like a provider SDK's HTTP error: ``status_code`` and ``response.headers``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {message}")
        self.status_code = status
        self.response = type("Response", (), {"status_code": status, "headers": headers or {}})()


def build(primary: ScriptedChatModel, backup: ScriptedChatModel, waits: list[float]) -> Any:
    retry = ModelRetryMiddleware(max_retries=2, on_failure="error", jitter=False, sleep=waits.append)
    return create_agent(primary, middleware=[ModelFallbackMiddleware(backup), retry], system_prompt="Be brief.")


def ask(agent: Any, question: str, *, use_async: bool = False) -> tuple[BaseMessage, list[dict[str, Any]]]:
    """Run the agent, printing the custom-stream events; return the answer and the events."""
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    inp = {"messages": [HumanMessage(question)]}

    def record(mode: str, chunk: Any) -> None:
        if mode == "custom":
            events.append(chunk)
            print(f"    event: {chunk}")
        else:
            final.update(chunk)

    if use_async:

        async def consume() -> None:
            async for mode, chunk in agent.astream(inp, stream_mode=["custom", "values"]):
                record(mode, chunk)

        asyncio.run(consume())
    else:
        for mode, chunk in agent.stream(inp, stream_mode=["custom", "values"]):
            record(mode, chunk)
    answer = final["messages"][-1]
    print(f"    answer: {answer.content!r}")
    return answer, events


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def main() -> None:
    print("1. a transient 503: retried on the primary, no fallback")
    waits: list[float] = []
    primary = ScriptedChatModel([ProviderError(503, "overloaded"), "Paris (primary)."])
    backup = ScriptedChatModel(["Paris (backup)."])
    answer, events = ask(build(primary, backup, waits), "Capital of France?")
    check(answer.content == "Paris (primary).", f"the primary should answer after one retry: {answer.content!r}")
    check([e["event"] for e in events] == ["retry"], f"one retry event expected: {events}")
    check(waits == [1.0] and backup.call_count == 0, f"waits {waits}, backup calls {backup.call_count}")

    print("2. an outage: 3 attempts on the primary, then the backup (ainvoke)")
    waits = []
    primary = ScriptedChatModel([ProviderError(500, "internal error")], cycle=True)
    backup = ScriptedChatModel(["Paris (backup)."])
    answer, events = ask(build(primary, backup, waits), "Capital of France?", use_async=True)
    check(answer.content == "Paris (backup).", f"the backup should answer: {answer.content!r}")
    check(primary.call_count == 3 and backup.call_count == 1, f"calls {primary.call_count}/{backup.call_count}")
    check([e["event"] for e in events] == ["retry", "retry", "retry_gave_up", "fallback"], f"events: {events}")
    check(waits == [1.0, 2.0], f"exponential backoff expected, got {waits}")
    check(backup.calls[0].messages[0].content == "Be brief.", "the backup must get the original request")

    print("3. a 429 with Retry-After: 5: the wait honours the provider")
    waits = []
    primary = ScriptedChatModel([ProviderError(429, "rate limited", {"retry-after": "5"}), "Paris (primary)."])
    answer, _ = ask(build(primary, ScriptedChatModel([]), waits), "Capital of France?")
    check(answer.content == "Paris (primary)." and waits == [5.0], f"expected one 5s wait, got {waits}")

    print("4. both providers down: the last error reaches the caller")
    waits = []
    primary = ScriptedChatModel([ProviderError(503, "primary down")], cycle=True)
    backup = ScriptedChatModel([ProviderError(503, "backup down")], cycle=True)
    try:
        build(primary, backup, waits).invoke({"messages": [HumanMessage("Capital of France?")]})
    except ProviderError as exc:
        print(f"    raised: {exc}")
        check(str(exc) == "503 backup down", f"the backup's last error expected, got {exc}")
    else:
        raise SystemExit("FAILED: an error was expected when every model is down")
    check(primary.call_count == 3 and backup.call_count == 3, f"calls {primary.call_count}/{backup.call_count}")

    print("\nOK: retries rode out the blips, the fallback covered the outage, Retry-After was honoured.")


if __name__ == "__main__":
    main()
