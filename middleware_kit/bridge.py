"""Sync/async bridging, decided once per hook when the agent is built.

- A sync hook under ``ainvoke`` runs off the event loop, in a worker thread with the caller's context (so
  ``interrupt()``, ``get_config()`` and stream writers keep working).
- An async hook under ``invoke`` is driven to completion on an event loop owned by the calling thread (or, when the
  calling thread already runs a loop, on a helper thread).
- A sync *wrapper* under ``ainvoke`` receives a sync ``handler`` that runs the async inner chain back on the caller's
  loop, so async resources stay on the loop they belong to.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["run_coroutine_sync", "run_sync_in_thread", "sync_handler_for"]

P = ParamSpec("P")
T = TypeVar("T")

_local = threading.local()
_helper = ThreadPoolExecutor(max_workers=4, thread_name_prefix="middleware_kit-bridge")


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


def run_coroutine_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Drive ``coro`` to completion from sync code, in the current context."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _thread_loop().run_until_complete(coro)
    # Sync code called from inside a running loop (e.g. ``invoke`` in a notebook cell): a loop cannot be re-entered,
    # so run the coroutine on a helper thread, carrying the context along.
    ctx = contextvars.copy_context()
    return _helper.submit(ctx.run, _run_on_thread_loop, coro).result()


def _run_on_thread_loop(coro: Coroutine[Any, Any, T]) -> T:
    return _thread_loop().run_until_complete(coro)


async def run_sync_in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a sync callable off the event loop, in a copy of the current context."""
    ctx = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(ctx.run, func, *args, **kwargs))


def sync_handler_for(
    ahandler: Callable[[Any], Awaitable[T]], loop: asyncio.AbstractEventLoop
) -> Callable[[Any], T]:
    """A sync handler (for a sync wrapper running in a worker thread) that runs ``ahandler`` on ``loop``."""

    def handler(request: Any) -> T:
        async def call() -> T:
            return await ahandler(request)

        return asyncio.run_coroutine_threadsafe(call(), loop).result()

    return handler
