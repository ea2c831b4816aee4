"""Sync/async bridging, decided once per hook when the agent is built.

- A sync hook under ``ainvoke`` runs off the event loop, in a worker thread with the caller's context (so
  ``interrupt()``, ``get_config()`` and stream writers keep working).
- An async hook under ``invoke`` is driven to completion on an event loop owned by the calling thread (or, when the
  calling thread already runs a loop, on a helper thread).
- A sync *wrapper* under ``ainvoke`` receives a sync ``handler`` that runs the async inner chain back on the caller's
  loop, so async resources stay on the loop they belong to (see ``chain._sync_run``: consecutive sync wrappers
  share one thread hop). Any async code that sync code run by :func:`run_sync_in_thread` drives goes back to that
  loop the same way: :func:`run_coroutine_sync` is the one adapter from sync to async code.
- A thread hop is cancelled as a whole: when the task awaiting :func:`run_sync_in_thread` is cancelled (the run was
  cancelled or ran out of time, or its asyncio task was cancelled), the work the thread started back on the loop is
  cancelled with it, and any later call the thread makes back to the loop raises ``asyncio.CancelledError`` at once.
  The thread itself cannot be stopped (Python has no way to): its sync code runs on until it returns, and what it
  returns is dropped.

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
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import CancelledError as CancelledFuture
from concurrent.futures import Future
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

__all__ = ["ElasticPool", "blocking_form", "bridge_node_hook", "run_coroutine_sync", "run_sync_in_thread"]

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


class _Hop:
    """One :func:`run_sync_in_thread` call: the loop it moved the sync code off, and the work that code started back
    on that loop (cancelled with the hop)."""

    __slots__ = ("_lock", "_work", "cancelled", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.cancelled = False
        self._lock = threading.Lock()
        self._work: set[Future[Any]] = set()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro`` on the home loop, waited for from this thread; cancelled if the hop is (or already was)."""
        __tracebackhide__ = True
        with self._lock:
            if self.cancelled:
                coro.close()
                raise asyncio.CancelledError("the task awaiting this worker thread was cancelled")
            work = asyncio.run_coroutine_threadsafe(coro, self.loop)
            self._work.add(work)
        try:
            return work.result()
        except CancelledFuture:  # cancelled with the hop. asyncio's CancelledError is a BaseException: a sync
            # wrapper's `except Exception` (a retry, say) does not take it for a failed call and try again
            raise asyncio.CancelledError("the task awaiting this worker thread was cancelled") from None
        finally:
            with self._lock:
                self._work.discard(work)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            work, self._work = self._work, set()
        for future in work:
            future.cancel()


_HOP: ContextVar[_Hop | None] = ContextVar("middleware_kit_thread_hop", default=None)
"""In sync code that :func:`run_sync_in_thread` moved off an event loop: that hop (its loop awaits the thread, so it
is free to run coroutines for it)."""


def run_coroutine_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Drive ``coro`` to completion from sync code, in the current context: on the event loop the code was moved off
    (:func:`run_sync_in_thread`), so async resources stay on the loop they belong to, and the coroutine is cancelled
    when the task awaiting the thread is; else on a loop owned by the calling thread."""
    __tracebackhide__ = True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        hop = _HOP.get()
        if hop is not None and hop.loop.is_running():
            return hop.run(coro)
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
    """Run a sync callable off the event loop, in a copy of the current context. Cancelling the awaiting task cancels
    the work the callable started back on this loop, and makes its later calls back raise ``CancelledError``; the
    callable's own sync code runs on, and its result is dropped."""
    __tracebackhide__ = True
    ctx = contextvars.copy_context()
    hop = _Hop(asyncio.get_running_loop())
    ctx.run(_HOP.set, hop)  # async code the thread runs comes back to this loop
    try:
        return await asyncio.wrap_future(_pool.submit(functools.partial(ctx.run, func, *args, **kwargs)))
    except asyncio.CancelledError:
        hop.cancel()
        raise


def bridge_node_hook(
    sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None
) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Awaitable[Any]] | None]:
    """The sync runner (async twin driven to completion when only it exists) and the native async runner."""
    if sync_fn is not None:
        return sync_fn, async_fn
    assert async_fn is not None
    return blocking_form(async_fn), async_fn
