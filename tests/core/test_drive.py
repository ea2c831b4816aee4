"""``middleware_kit.drive``: one body for sync and async (engine flows with ``bind``; ``sync_twin``)."""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware_kit.drive import Step, run_async, run_sync, sync_twin

# -- sync_twin -------------------------------------------------------------------------------------------------------


async def _aecho(value: Any, handler: Any) -> Any:
    return await handler(value)


class _Source:
    """The sync forms of what ``_agather`` awaits (``sync_twin`` renames the async names to these)."""

    @contextlib.contextmanager
    def opened(self) -> Iterator[_Source]:
        yield self

    def items(self, values: list[int]) -> Iterator[int]:
        return iter(values)

    def double(self, item: int) -> int:
        return item * 2


class _ASource:
    @contextlib.asynccontextmanager
    async def aopened(self) -> AsyncIterator[_ASource]:
        yield self

    async def aitems(self, values: list[int]) -> AsyncIterator[int]:
        for value in values:
            yield value

    async def adouble(self, item: int) -> int:
        return item * 2


async def _agather_async_names(values: list[int], source: Any) -> list[int]:
    out = []
    async with source.aopened() as opened:
        async for item in opened.aitems(values):
            out.append(await source.adouble(item))
    return out


def _afactory(offset: int) -> Any:
    async def add(value: int) -> int:
        return value + offset

    return add


async def _araises(handler: Any) -> None:
    await handler(0)
    raise ValueError("from the template")


echo = sync_twin(_aecho, {"_aecho": "echo"})
gather = sync_twin(_agather_async_names, {"aopened": "opened", "aitems": "items", "adouble": "double"})
factory = sync_twin(_afactory)
raises = sync_twin(_araises)


def test_the_twin_is_the_same_body_without_awaits() -> None:
    assert echo(3, lambda v: v + 1) == 4
    assert echo.__name__ == "echo"
    assert not asyncio.iscoroutinefunction(echo)
    assert asyncio.run(_aecho(3, _awaitable(lambda v: v + 1))) == 4


@given(st.lists(st.integers(), max_size=8))
def test_async_for_and_with_become_for_and_with_with_renamed_names(values: list[int]) -> None:
    assert gather(values, _Source()) == [v * 2 for v in values]
    assert asyncio.run(_agather_async_names(values, _ASource())) == [v * 2 for v in values]


def test_closures_of_a_factory_are_made_sync() -> None:
    add = factory(10)
    assert add(1) == 11
    assert not asyncio.iscoroutinefunction(add)


def test_a_traceback_points_at_the_template_lines() -> None:
    with pytest.raises(ValueError, match="from the template") as caught:
        raises(lambda v: v)
    frame = traceback.extract_tb(caught.value.__traceback__)[-1]
    assert frame.filename == __file__
    assert frame.line == 'raise ValueError("from the template")'
    assert frame.name == "_araises"


def test_the_template_must_be_a_function() -> None:
    with pytest.raises(TypeError):
        sync_twin(42)  # type: ignore[arg-type]


def _awaitable(fn: Any) -> Any:
    async def call(value: Any) -> Any:
        return fn(value)

    return call


# -- run_sync / run_async with bind ----------------------------------------------------------------------------------


class _Backend:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def put(self, value: int) -> int:
        self.calls.append(f"put {value}")
        return value + 1

    async def aput(self, value: int) -> int:
        self.calls.append(f"aput {value}")
        return value + 1

    def fail(self) -> None:
        raise KeyError("boom")

    async def afail(self) -> None:
        raise KeyError("boom")


def _named_flow(log: list[str]) -> Generator[tuple[str, tuple[Any, ...]], Any, int]:
    try:
        first = yield ("put", (1,))
        try:
            yield ("fail", ())
        except KeyError:
            log.append("caught")
        try:
            yield ("missing", ())
        except AttributeError:
            log.append("unknown operation raised into the flow")
        second: int = yield ("put", (first,))
        return second
    finally:
        log.append("cleaned up")


def _bind(backend: Any) -> Any:
    def bind(step: tuple[str, tuple[Any, ...]]) -> Step:
        name, args = step
        return Step(getattr(backend, name), getattr(backend, "a" + name), *args)

    return bind


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bind_turns_what_a_flow_yields_into_steps(mode: str) -> None:
    backend, log = _Backend(), list[str]()
    if mode == "sync":
        result = run_sync(_named_flow(log), _bind(backend))
    else:
        result = asyncio.run(run_async(_named_flow(log), _bind(backend)))
    assert result == 3
    prefix = "" if mode == "sync" else "a"
    assert backend.calls == [f"{prefix}put 1", f"{prefix}put 2"]
    assert log == ["caught", "unknown operation raised into the flow", "cleaned up"]
