"""Checkpoint writes per invoke, for middleware_kit and the hand-built graph, for every N.

Counted with :class:`~bench.fixtures.CountingSaver` (``put`` = one checkpoint, ``put_writes`` = one batch of a
task's pending writes) and cross-checked with ``len(list(graph.get_state_history(config)))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import middleware_kit
from bench.fixtures import CountingSaver, add, check_messages, make_input, make_model, noops
from bench.subjects import build_hand_graph

__all__ = ["CheckpointCount", "count_checkpoints"]


@dataclass(frozen=True)
class CheckpointCount:
    kind: str
    n: int
    puts: int
    put_writes: int
    history: int

    @property
    def triple(self) -> tuple[int, int, int]:
        return (self.puts, self.put_writes, self.history)


def _count(kind: str, n: int, graph: Any, saver: CountingSaver) -> CheckpointCount:
    # One invoke on a throw-away thread first, so lazy one-time work cannot show up in the count.
    graph.invoke(make_input(), {"configurable": {"thread_id": "warm"}})
    saver.puts = saver.put_writes_calls = 0
    config = {"configurable": {"thread_id": "counted"}}
    result = graph.invoke(make_input(), config)
    check_messages(result["messages"], f"{kind}/checkpoints/N={n}")
    puts, writes = saver.puts, saver.put_writes_calls
    history = len(list(graph.get_state_history(config)))
    return CheckpointCount(kind, n, puts, writes, history)


def count_checkpoints(ns: Sequence[int]) -> list[CheckpointCount]:
    counts: list[CheckpointCount] = []
    for n in ns:
        saver = CountingSaver()
        agent = middleware_kit.create_agent(make_model(), [add], middleware=noops(n), checkpointer=saver)
        counts.append(_count("mk", n, agent, saver))
    for n in ns:
        saver = CountingSaver()
        graph, _ = build_hand_graph(n, saver)
        counts.append(_count("hand", n, graph, saver))
    return counts
