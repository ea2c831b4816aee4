"""The traced variant of an agent's nodes and chains is built on the first run with callback handlers, once (issue 25
item 6: a LangGraph Server graph factory builds an agent per run, and most runs have no handler).

Its building blocks (:class:`~middleware_kit._engine.tracing.Once` and ``HookTracing.traced_chain``) are tested
without a
graph; whole agents check that the first traced runs, concurrent in threads, each get their full tree of hook runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from middleware_kit._engine.chain import Layer, compose
from middleware_kit._engine.tracing import HookTracing, Once
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.observability.test_hook_runs import Inner, Outer, Tree, agent_of

MODES = ["invoke", "ainvoke"]


def test_once_makes_its_value_on_first_use_and_keeps_it() -> None:
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    once = Once(make)
    assert made == []
    first = once()
    assert once() is first and made == [first]


def test_once_keeps_nothing_when_making_fails_and_tries_again() -> None:
    attempts: list[int] = []

    def make() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return "made"

    once = Once(make)
    with pytest.raises(RuntimeError, match="first attempt fails"):
        once()
    assert once() == "made" and once() == "made" and len(attempts) == 2


def test_once_under_concurrent_first_use_makes_one_value() -> None:
    """Threads arriving while the value is being made wait for it (without the lock each would make its own)."""
    inside, release = threading.Event(), threading.Event()
    made: list[object] = []

    def make() -> object:
        inside.set()
        release.wait(timeout=30)
        made.append(object())
        return made[-1]

    once = Once(make)
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(once)
        assert inside.wait(timeout=30)
        others = [pool.submit(once) for _ in range(7)]
        threading.Timer(0.05, release.set).start()  # the others are queued on the lock by then
        results = [first.result(timeout=30), *(f.result(timeout=30) for f in others)]
    assert len(made) == 1 and all(r is made[0] for r in results)


def recording_layer(owner: str, built: list[str], trace: list[str]) -> Layer[Any, Any]:
    """A layer that notes when it is built and when it runs."""

    def build_sync(nxt: Callable[[Any], Any], depth: int) -> Callable[[Any], Any]:
        built.append(f"{owner} sync@{depth}")

        def run(request: Any) -> Any:
            trace.append(f"{owner}>")
            result = nxt(request)
            trace.append(f"{owner}<")
            return result

        return run

    def build_async(nxt: Callable[[Any], Any], depth: int) -> Callable[[Any], Any]:
        built.append(f"{owner} async@{depth}")

        async def arun(request: Any) -> Any:
            trace.append(f"{owner}>")
            result = await nxt(request)
            trace.append(f"{owner}<")
            return result

        return arun

    return Layer(owner, "wrap_tool_call", "sync+async", build_sync, build_async)


@pytest.mark.parametrize("mode", MODES)
def test_the_traced_chain_is_composed_on_its_first_call_once(mode: str) -> None:
    built: list[str] = []
    trace: list[str] = []
    layers = [recording_layer(name, built, trace) for name in ("A", "B")]
    [lazy] = HookTracing([], []).traced_chain(layers)

    def base(request: str) -> str:
        trace.append("base")
        return request.upper()

    async def abase(request: str) -> str:
        return base(request)

    chain, achain = compose([lazy], base, abase)
    assert built == []  # composing the agent's chains builds none of the traced layers

    async def acall(request: str) -> str:
        return str(await achain(request))

    def call(request: str) -> str:
        return str(chain(request)) if mode == "invoke" else asyncio.run(acall(request))

    assert call("x") == "X" and call("y") == "Y"
    assert trace == ["A>", "B>", "base", "B<", "A<"] * 2  # outermost first, as the plain chain
    side = "sync" if mode == "invoke" else "async"
    assert sorted(b for b in built if b.split()[1].startswith(f"{side}@")) == [f"A {side}@0", f"B {side}@1"]
    assert len(built) == 4  # composed once, at the real depths (both entries of the one compose), not per call


def test_a_chain_without_layers_has_no_traced_variant() -> None:
    assert HookTracing([], []).traced_chain([]) == ()


def reply(messages: list[Any]) -> AIMessage:
    """Per conversation, whatever the interleaving of concurrent runs: a tool call, then the answer."""
    if messages[-1].type == "tool":
        return AIMessage("3")
    return AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})])


def assert_full_tree(tree: Tree) -> None:
    roots = [rid for rid, (_, parent) in tree.runs.items() if parent is None]
    assert len(roots) == 1
    assert tree.paths("chat") == [["calc", "model", "Outer.wrap_model_call", "Inner.wrap_model_call", "chat"]] * 2
    assert tree.paths("tool add") == [["calc", "tools", "Outer.wrap_tool_call", "Inner.wrap_tool_call", "tool add"]]
    assert tree.paths("Outer.before_model") == [["calc", "model", "Outer.before_model"]] * 2
    assert tree.paths("Outer.before_tool") == [["calc", "tools", "Outer.before_tool"]]
    assert not tree.errors


@pytest.mark.parametrize("mode", MODES)
def test_first_traced_runs_in_threads_each_get_every_hook_run(mode: str) -> None:
    """A fresh agent, untraced runs first (the traced variant is not needed), then eight traced runs at once in
    threads: each builds on, or waits for, the one traced variant, and records its own full tree."""
    agent = agent_of(Outer(), Inner(), model=ScriptedChatModel(default=reply))

    def one(i: int, tree: Tree | None) -> Any:
        config: RunnableConfig = {"callbacks": [tree]} if tree is not None else {}
        inp = {"messages": [HumanMessage(f"run {i}")]}
        return agent.invoke(inp, config) if mode == "invoke" else asyncio.run(agent.ainvoke(inp, config))

    assert one(0, None)["messages"][-1].content == "3"
    trees = [Tree() for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8), trees))
    assert all(r["messages"][-1].content == "3" for r in results)
    for tree in trees:
        assert_full_tree(tree)
    untraced = one(9, None)  # the plain variant is untouched by the traced one
    assert untraced["messages"][-1].content == "3"
