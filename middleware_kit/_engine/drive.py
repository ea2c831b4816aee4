"""One body for sync and async engine code: a generator body and one driver that runs it in either mode.

This is httpx's ``auth_flow`` pattern. An engine path (a node run, a chain layer, the model call, a lease operation)
is written once as a generator, the *body*. Wherever it needs something that differs between ``invoke`` and
``ainvoke`` it yields; the driver does it in its mode and sends the result back (an exception is thrown in at the
``yield``); the body's return value is the driver's.

What a yielded value means is the mode's ``call`` (sync) or ``acall`` (async: it returns an awaitable):

- by default the body yields a :class:`Step` ``(sync_fn, async_fn, *args)``: :func:`call_step` calls ``sync_fn``,
  :func:`acall_step` awaits ``async_fn`` (with no ``async_fn``, ``sync_fn`` runs in a worker thread, or inline when the
  step says ``blocking=False``);
- a caller may give its own pair: a wrap layer maps each yielded request to the next handler and each ``Sleep`` to
  a sleep (:mod:`middleware_kit._engine.chain`), a lease flow maps each operation name to its backend's method.

The driver itself is written once too (:func:`_drive`): :func:`run_sync` runs it to completion with one
``send(None)`` (nothing is awaited in sync mode, so it never suspends), :func:`run_async` awaits it. No code is
generated: every line that runs is a line of a ``.py`` file (sourceless installs, tracebacks, ``inspect``, coverage
and mypy see it).
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeAlias, TypeVar

from middleware_kit._engine.bridge import blocking_form, run_sync_in_thread

__all__ = ["Abort", "Step", "Steps", "acall_step", "call_step", "run_async", "run_sync"]

T = TypeVar("T")


class Step:
    """One thing an engine body needs done, in the driver's mode."""

    __slots__ = ("args", "async_fn", "blocking", "sync_fn")

    def __init__(
        self,
        sync_fn: Callable[..., Any],
        async_fn: Callable[..., Awaitable[Any]] | None,
        *args: Any,
        blocking: bool = True,
    ) -> None:
        self.sync_fn = sync_fn
        self.async_fn = async_fn
        self.args = args
        self.blocking = blocking
        """Without ``async_fn``: whether ``sync_fn`` may block (then ``run_async`` runs it in a worker thread)."""

    @classmethod
    def twin(cls, sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None) -> Step:
        """A template for calling a hook a middleware wrote as ``sync_fn``, ``async_fn`` or both (with
        :meth:`with_args`): an async-only hook is driven on a loop under ``invoke``
        (:func:`middleware_kit._engine.bridge.blocking_form`), a sync-only one runs in a worker thread under
        ``ainvoke``."""
        if sync_fn is None:
            assert async_fn is not None
            sync_fn = blocking_form(async_fn)
        return cls(sync_fn, async_fn)

    def with_args(self, *args: Any) -> Step:
        return Step(self.sync_fn, self.async_fn, *args, blocking=self.blocking)


Steps: TypeAlias = Generator[Step, Any, T]
"""An engine body that yields :class:`Step`\\ s and returns a ``T`` (not to be confused with a *flow hook*,
:data:`middleware_kit.flow.ModelCallFlow`, which yields requests and ``Sleep``)."""


def call_step(step: Step) -> Any:
    """What a :class:`Step` means under ``invoke``: its ``sync_fn``."""
    __tracebackhide__ = True
    return step.sync_fn(*step.args)


def acall_step(step: Step) -> Awaitable[Any]:
    """What a :class:`Step` means under ``ainvoke``: its ``async_fn``, or its ``sync_fn`` off the loop (or inline,
    when not ``blocking``)."""
    __tracebackhide__ = True
    if step.async_fn is not None:
        return step.async_fn(*step.args)
    if step.blocking:
        return run_sync_in_thread(step.sync_fn, *step.args)
    return _ready(step.sync_fn(*step.args))


async def _ready(value: T) -> T:
    return value


@types.coroutine
def _drive(body: Generator[Any, Any, T], call: Callable[[Any], Any], awaiting: bool) -> Generator[Any, Any, T]:
    """The one driver: each value ``body`` yields goes through ``call``; with ``awaiting`` (the async mode) what
    ``call`` returns is awaited. The result is sent back into ``body``, an exception thrown in at its ``yield``.
    A generator-based coroutine (``types.coroutine``), so ``run_async`` can await it; in sync mode it never yields.
    """
    __tracebackhide__ = True
    send, throw = body.send, body.throw
    resume, value = send, None
    steps = call is call_step  # the sync default: each Step's sync_fn is called here, no frame of call_step's
    while True:
        try:
            yielded = resume(value)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            value = yielded.sync_fn(*yielded.args) if steps else call(yielded)
            if awaiting:
                value = yield from value
            resume = send
        except Abort as abort:  # the call refuses what the body yielded: the body is closed, not asked to handle it
            body.close()
            raise abort.error from None
        except BaseException as exc:  # raised into the body at its yield, as the call raised it
            resume, value = throw, exc


class Abort(Exception):
    """Raised by a ``call``/``acall``: close the body and raise ``error`` (instead of throwing it into the body)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def run_sync(body: Generator[Any, Any, T], call: Callable[[Any], Any] = call_step) -> T:
    """Run an engine body under ``invoke``: what it yields goes through ``call`` (default: a :class:`Step`'s
    ``sync_fn``)."""
    __tracebackhide__ = True
    try:
        _drive(body, call, False).send(None)  # a generator-based coroutine
    except StopIteration as stop:
        result: T = stop.value
        return result
    raise AssertionError("middleware_kit internal error: the sync driver suspended")  # pragma: no cover


async def run_async(body: Generator[Any, Any, T], acall: Callable[[Any], Awaitable[Any]] = acall_step) -> T:
    """Run an engine body under ``ainvoke``: what it yields goes through ``acall`` and is awaited (default: a
    :class:`Step`'s ``async_fn``)."""
    __tracebackhide__ = True
    return await _drive(body, acall, True)
