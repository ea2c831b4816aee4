"""Sync/async bridging helpers."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from middleware_kit._engine.bridge import ElasticPool, blocking_form, run_coroutine_sync, run_sync_in_thread

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_run_coroutine_sync_keeps_context_and_reuses_the_thread_loop() -> None:
    VAR.set("outer")

    async def read() -> tuple[str, int]:
        return VAR.get(), id(asyncio.get_running_loop())

    first = run_coroutine_sync(read())
    second = run_coroutine_sync(read())
    assert first[0] == "outer" and first[1] == second[1]


async def test_run_coroutine_sync_inside_a_running_loop_uses_a_helper_thread() -> None:
    VAR.set("in-loop")

    async def read() -> str:
        return VAR.get()

    assert run_coroutine_sync(read()) == "in-loop"


def test_blocking_form_is_the_sync_form_of_an_async_only_callable() -> None:
    VAR.set("caller")

    async def ahook(value: int, *, suffix: str = "") -> str:
        await asyncio.sleep(0)  # really suspends: the coroutine is driven on a loop
        return f"{VAR.get()}:{value}{suffix}"

    hook = blocking_form(ahook)
    assert not asyncio.iscoroutinefunction(hook)
    assert hook(1) == "caller:1" and hook(2, suffix="!") == "caller:2!"

    async def inside_a_loop() -> str:
        return hook(3)  # sync code called from a running loop (a notebook cell): run on a helper thread

    assert asyncio.run(inside_a_loop()) == "caller:3"


async def test_async_code_driven_by_sync_code_in_a_worker_thread_runs_back_on_the_callers_loop() -> None:
    loop = asyncio.get_running_loop()

    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def sync_hook() -> tuple[bool, asyncio.AbstractEventLoop]:
        return threading.current_thread() is threading.main_thread(), run_coroutine_sync(where())

    on_main, ran_on = await run_sync_in_thread(sync_hook)
    assert not on_main and ran_on is loop  # async resources stay on the loop they belong to


async def test_run_sync_in_thread_keeps_context_and_leaves_the_loop() -> None:
    VAR.set("async-side")
    main = threading.get_ident()

    def read() -> tuple[str, int]:
        return VAR.get(), threading.get_ident()

    value, ident = await run_sync_in_thread(read)
    assert value == "async-side" and ident != main


def test_elastic_pool_never_starves_jobs_that_wait_for_each_other() -> None:
    pool = ElasticPool(idle_seconds=0.5)
    gate = threading.Event()
    waiting = [pool.submit(lambda: gate.wait(5)) for _ in range(40)]
    release = pool.submit(gate.set)  # would never run in a bounded pool of < 41 threads
    assert release.result(timeout=5) is None
    assert all(f.result(timeout=5) for f in waiting)


def test_elastic_pool_propagates_exceptions() -> None:
    def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError, match="x"):
        ElasticPool().submit(boom).result(timeout=5)
