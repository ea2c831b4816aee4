"""``middleware_kit._engine.drive``: one generator body, one driver run in either mode (``run_sync`` /
``run_async``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import traceback
from collections.abc import Awaitable, Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import middleware_kit._engine.drive as drive
from middleware_kit._engine.drive import Abort, Step, Steps, run_async, run_sync

MODES = ["sync", "async"]


def _awaited(awaitable: Awaitable[Any]) -> Any:
    """``await awaitable`` on a new loop (``run_async`` returns the driver itself: an awaitable, not a coroutine
    ``asyncio.run`` would take on every Python version)."""

    async def main() -> Any:
        return await awaitable

    return asyncio.run(main())


def _run(mode: str, body: Generator[Any, Any, Any], call: Any = None) -> Any:
    if mode == "sync":
        return run_sync(body) if call is None else run_sync(body, call[0])
    return _awaited(run_async(body) if call is None else run_async(body, call[1]))


async def _adouble(value: int) -> int:
    await asyncio.sleep(0)  # really suspends: the async driver awaits it on the loop
    return value * 2


def _double(value: int) -> int:
    return value * 2


def _doubling(values: list[int], log: list[str]) -> Steps[list[int]]:
    out = []
    try:
        for value in values:
            out.append((yield Step(_double, _adouble, value)))
        return out
    finally:
        log.append("cleaned up")


@pytest.mark.parametrize("mode", MODES)
@given(values=st.lists(st.integers(), max_size=6))
def test_one_body_gives_the_same_result_in_both_modes(mode: str, values: list[int]) -> None:
    log: list[str] = []
    assert _run(mode, _doubling(values, log)) == [v * 2 for v in values]
    assert log == ["cleaned up"]


def _failing(log: list[str]) -> Steps[str]:
    try:
        yield Step(_raise_key, _araise_key)
    except KeyError as exc:
        log.append(f"caught {exc}")
    yield Step(_raise_key, _araise_key)
    return "unreachable"


def _raise_key() -> None:
    raise KeyError("boom")


async def _araise_key() -> None:
    raise KeyError("boom")


@pytest.mark.parametrize("mode", MODES)
def test_an_exception_is_thrown_in_at_the_yield_and_escapes_when_not_caught(mode: str) -> None:
    log: list[str] = []
    with pytest.raises(KeyError, match="boom") as caught:
        _run(mode, _failing(log))
    assert log == ["caught 'boom'"]
    names = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert "_failing" in names and names[-1] == ("_raise_key" if mode == "sync" else "_araise_key")


def _recovering() -> Steps[None]:
    with contextlib.suppress(KeyError):  # handled: it is no one's context from here on
        yield Step(_raise_key, _araise_key)
    raise ValueError("later")


@pytest.mark.parametrize("mode", MODES)
def test_an_error_the_body_handled_is_not_the_context_of_its_next_one(mode: str) -> None:
    with pytest.raises(ValueError, match="later") as caught:
        _run(mode, _recovering())
    assert caught.value.__context__ is None


def _where(log: list[str]) -> Steps[None]:
    yield Step(lambda: log.append(threading.current_thread().name), None)
    yield Step(lambda: log.append(threading.current_thread().name), None, blocking=False)


def test_a_step_without_async_fn_runs_in_a_worker_thread_under_ainvoke_unless_not_blocking() -> None:
    log: list[str] = []
    _awaited(run_async(_where(log)))
    main = threading.current_thread().name
    assert log[0] != main and log[1] == main
    log.clear()
    run_sync(_where(log))
    assert log == [main, main]


def test_an_async_only_twin_is_driven_on_a_loop_under_invoke() -> None:
    def body() -> Steps[int]:
        doubled: int = yield Step.twin(None, _adouble).with_args(21)
        return doubled

    assert run_sync(body()) == 42
    assert _awaited(run_async(body())) == 42


# -- a caller's own meaning of what the body yields (call / acall) ----------------------------------------------------


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


def _calls(backend: Any) -> tuple[Any, Any]:
    def call(prefix: str) -> Any:
        return lambda step: getattr(backend, prefix + step[0])(*step[1])

    return call(""), call("a")


@pytest.mark.parametrize("mode", MODES)
def test_call_and_acall_give_what_a_body_yields_its_meaning(mode: str) -> None:
    backend, log = _Backend(), list[str]()
    assert _run(mode, _named_flow(log), _calls(backend)) == 3
    prefix = "" if mode == "sync" else "a"
    assert backend.calls == [f"{prefix}put 1", f"{prefix}put 2"]
    assert log == ["caught", "unknown operation raised into the flow", "cleaned up"]


def _greedy(log: list[str]) -> Generator[str, Any, None]:
    try:
        while True:
            try:
                yield "bad"
            except Exception:  # a body that catches everything is not asked to handle a refusal
                log.append("asked")
    finally:
        log.append("closed")


@pytest.mark.parametrize("mode", MODES)
def test_abort_closes_the_body_and_raises_without_throwing_in(mode: str) -> None:
    def refuse(value: Any) -> Any:
        raise Abort(TypeError(f"cannot do {value!r}"))

    async def arefuse(value: Any) -> Any:
        return refuse(value)

    log: list[str] = []
    with pytest.raises(TypeError, match="cannot do 'bad'"):
        _run(mode, _greedy(log), (refuse, arefuse))
    assert log == ["closed"]


def test_the_module_generates_no_code() -> None:
    assert not hasattr(drive, "sync_twin")
    source = Path(drive.__file__).read_text(encoding="utf-8")
    assert "exec(" not in source and "compile(" not in source and "import ast" not in source
