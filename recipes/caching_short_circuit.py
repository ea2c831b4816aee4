"""A response cache: a ``wrap_model_call`` that answers from the LangGraph store without calling the model.

What it shows
    ``ResponseCache`` wraps the model call. It hashes what the model would receive (system prompt, messages, bound
    tool names) into a key and looks it up in ``request.runtime.store``, the store given to
    ``create_agent(store=...)`` (an ``InMemoryStore`` here; any LangGraph ``BaseStore`` works, e.g. Postgres or
    Redis, to share the cache between processes). On a hit it returns the cached ``AIMessage`` *without calling
    ``handler``*: the model is short-circuited. On a miss it calls ``handler(request)`` and stores the answer.
    It defines the sync and async twins (``store.get``/``store.aget``), so both ``invoke`` and ``ainvoke`` use it.

    The middleware is stateless: the cache lives in the store, never on ``self``, so one instance can serve many
    agents, threads and concurrent runs, and two agents with two stores have two separate caches.

When to use it
    Repeated identical questions (FAQ bots, evaluation reruns, tests replaying recorded traffic) where a stale answer
    is acceptable. Only final text answers are cached here; answers that call tools are always recomputed.

Run it: ``python recipes/caching_short_circuit.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, message_to_dict, messages_from_dict
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from middleware_kit import AgentMiddleware, ModelRequest, ModelResponse, create_agent
from middleware_kit.hooks import AsyncModelHandler, ModelHandler
from middleware_kit.testing import ScriptedChatModel


class ResponseCache(AgentMiddleware):
    """Answer identical model requests from ``runtime.store``; call the model only on a miss.

    ``namespace`` is configuration, not per-run data. Without a store (``create_agent(store=None)``) the
    middleware passes every call through unchanged.
    """

    def __init__(self, namespace: tuple[str, ...] = ("model_cache",)) -> None:
        self.namespace = namespace

    @staticmethod
    def cache_key(request: ModelRequest[Any]) -> str:
        """A digest of everything that decides the answer: system prompt, conversation, tools offered."""
        tool_names = sorted(t.name if hasattr(t, "name") else str(t.get("name", t)) for t in request.tools)
        payload = {
            "system": request.system_prompt,
            "messages": [(m.type, m.text, getattr(m, "tool_calls", None) or []) for m in request.messages],
            "tools": tool_names,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    @staticmethod
    def _store(request: ModelRequest[Any]) -> BaseStore | None:
        return request.runtime.store if request.runtime is not None else None

    @staticmethod
    def _from_cache(value: dict[str, Any]) -> AIMessage:
        message = messages_from_dict([value["message"]])[0]
        assert isinstance(message, AIMessage)
        # A fresh message for this run (add_messages gives it a new id), marked so callers can tell.
        return message.model_copy(update={"response_metadata": {**message.response_metadata, "cache": "hit"}})

    @staticmethod
    def _to_cache(response: ModelResponse[Any]) -> dict[str, Any] | None:
        message = response.result[-1] if response.result else None
        if not isinstance(message, AIMessage) or message.tool_calls or len(response.result) != 1:
            return None  # only plain final answers are cached
        stored = message_to_dict(message)
        stored["data"]["id"] = None
        return {"message": stored}

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any] | AIMessage:
        store = self._store(request)
        if store is None:
            return handler(request)
        key = self.cache_key(request)
        item = store.get(self.namespace, key)
        if item is not None:
            return self._from_cache(item.value)  # short circuit: handler is never called
        response = handler(request)
        value = self._to_cache(response)
        if value is not None:
            store.put(self.namespace, key, value)
        return response

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: AsyncModelHandler
    ) -> ModelResponse[Any] | AIMessage:
        store = self._store(request)
        if store is None:
            return await handler(request)
        key = self.cache_key(request)
        item = await store.aget(self.namespace, key)
        if item is not None:
            return self._from_cache(item.value)
        response = await handler(request)
        value = self._to_cache(response)
        if value is not None:
            await store.aput(self.namespace, key, value)
        return response


def ask(agent: Any, question: str, *, use_async: bool = False) -> AIMessage:
    inp = {"messages": [HumanMessage(question)]}
    result = asyncio.run(agent.ainvoke(inp)) if use_async else agent.invoke(inp)
    answer = result["messages"][-1]
    assert isinstance(answer, AIMessage)
    source = "cache" if answer.response_metadata.get("cache") == "hit" else "model"
    print(f"  {'ainvoke' if use_async else 'invoke '} {question!r:<36} -> {answer.text!r} (from the {source})")
    return answer


def main() -> None:
    model = ScriptedChatModel(lambda messages, n=n: f"answer #{n} to {messages[-1].text!r}" for n in range(1, 10))
    cache = ResponseCache()
    store = InMemoryStore()
    agent = create_agent(model, middleware=[cache], system_prompt="Be brief.", store=store)

    first = ask(agent, "What is the capital of France?")
    if model.call_count != 1:
        raise SystemExit(f"the first question must reach the model; calls: {model.call_count}")

    second = ask(agent, "What is the capital of France?")
    if model.call_count != 1:
        raise SystemExit(f"the repeated question must be answered from the cache; calls: {model.call_count}")
    if second.text != first.text or second.response_metadata.get("cache") != "hit":
        raise SystemExit(f"the cached answer differs: {second!r}")

    ask(agent, "And of Italy?")
    if model.call_count != 2:
        raise SystemExit(f"a new question must reach the model; calls: {model.call_count}")

    third = ask(agent, "What is the capital of France?", use_async=True)  # awrap_model_call, store.aget
    if model.call_count != 2 or third.text != first.text:
        raise SystemExit(f"ainvoke must hit the same cache; calls: {model.call_count}")

    # The cache lives in the store, not in the middleware: the same instance on another agent with another store
    # starts cold.
    other = create_agent(model, middleware=[cache], system_prompt="Be brief.", store=InMemoryStore())
    ask(other, "What is the capital of France?")
    if model.call_count != 3:
        raise SystemExit(f"another store means another cache; calls: {model.call_count}")

    entries = store.search(cache.namespace)
    if len(entries) != 2:
        raise SystemExit(f"the first store should hold 2 answers, holds {len(entries)}")
    print(f"\nOK: 5 questions, {model.call_count} model calls; {len(entries)} answers cached in the agent's store.")


if __name__ == "__main__":
    main()
