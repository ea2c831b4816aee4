"""Sync/async bridging, decided once per hook when the agent is built.

- A sync hook under ``ainvoke`` runs off the event loop, in a worker thread with the caller's context (so
  ``interrupt()``, ``get_config()`` and stream writers keep working).
- An async hook under ``invoke`` is driven to completion on an event loop owned by the calling thread (or, when the
  calling thread already runs a loop, on a helper thread).
- A sync *wrapper* under ``ainvoke`` receives a sync ``handler`` that runs the async inner chain back on the caller's
  loop, so async resources stay on the loop they belong to (see ``chain._sync_run``: consecutive sync wrappers
  share one thread hop). Any async code that sync code run by :func:`run_sync_in_thread` drives goes back to that
  loop the same way: :func:`run_coroutine_sync` is the one adapter from sync to async code.

Bridged sync hooks run on an *elastic* pool, not the loop's default executor: a sync wrapper blocks its thread while
the inner chain runs, and the inner chain may itself need executor threads (a sync-only chat model under
``ainvoke``). A bounded pool deadlocks there under concurrency; this one starts a thread whenever none is idle and
lets idle threads go after a while.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

__all__ = ["ElasticPool", "blocking_form", "run_coroutine_sync", "run_sync_in_thread"]

P = ParamSpec("P")
T = TypeVar("T")

_local = threading.local()


class ElasticPool:
    """A thread pool that never makes a job wait for a thread (a "cached" pool)."""

    def __init__(self, idle_seconds: float = 30.0, name: str = "middleware_kit-bridge") -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._idle_seconds = idle_seconds
        self._name = name
        self._started = 0

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self._started += 1
                number = self._started
            else:
                self._idle -= 1
        self._jobs.put((future, fn))
        if spawn:
            threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True).start()
        return future

    def _work(self) -> None:
        __tracebackhide__ = True
        while True:
            try:
                future, fn = self._jobs.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody has claimed an idle thread: this one may go
                        self._idle -= 1
                        return
                continue  # a submitter counted on this thread: its job is on the way
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
            del future, fn
            with self._lock:
                self._idle += 1


_pool = ElasticPool()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


_HOME: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("middleware_kit_home_loop", default=None)
"""In sync code that :func:`run_sync_in_thread` moved off an event loop: that loop (it awaits the thread, so it is
free to run coroutines for it)."""


def run_coroutine_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Drive ``coro`` to completion from sync code, in the current context: on the event loop the code was moved off
    (:func:`run_sync_in_thread`), so async resources stay on the loop they belong to; else on a loop owned by the
    calling thread."""
    __tracebackhide__ = True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        home = _HOME.get()
        if home is not None and home.is_running():
            return asyncio.run_coroutine_threadsafe(coro, home).result()
        return _thread_loop().run_until_complete(coro)
    # Sync code called from inside a running loop (e.g. ``invoke`` in a notebook cell): a loop cannot be re-entered,
    # so run the coroutine on a helper thread, carrying the context along.
    ctx = contextvars.copy_context()
    return _pool.submit(functools.partial(ctx.run, _run_on_thread_loop, coro)).result()


def blocking_form(async_fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """The sync form of an async-only callable (a hook a middleware wrote only as ``async def``, under ``invoke``):
    each call's coroutine driven to completion by :func:`run_coroutine_sync`. The one adapter from sync code to
    async code in middleware_kit."""

    def blocking(*args: Any, **kwargs: Any) -> T:
        __tracebackhide__ = True
        return run_coroutine_sync(async_fn(*args, **kwargs))

    return blocking


def _run_on_thread_loop(coro: Coroutine[Any, Any, T]) -> T:
    __tracebackhide__ = True
    return _thread_loop().run_until_complete(coro)


async def run_sync_in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a sync callable off the event loop, in a copy of the current context."""
    __tracebackhide__ = True
    ctx = contextvars.copy_context()
    ctx.run(_HOME.set, asyncio.get_running_loop())  # async code the thread runs comes back to this loop
    return await asyncio.wrap_future(_pool.submit(functools.partial(ctx.run, func, *args, **kwargs)))
