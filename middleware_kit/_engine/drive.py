"""One body for sync and async engine code: a generator body, and a driver pair that runs it in either mode.

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

The drivers are one pair written by hand, as httpx and Django write theirs: :func:`run_sync` runs the loop,
:func:`run_async` returns :func:`_adrive`, the same loop with an ``await``, to be awaited (each is the only frame of
ours between the caller and the body). No code is generated: every line that runs is a line of a ``.py`` file
(sourceless installs, tracebacks, ``inspect``, coverage and mypy see it).
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


def run_sync(body: Generator[Any, Any, T], call: Callable[[Any], Any] = call_step) -> T:
    """The sync driver: run an engine body under ``invoke``. Each value ``body`` yields goes through ``call``
    (default: a :class:`Step`'s ``sync_fn``); the result is sent back into ``body``, an exception thrown in at its
    ``yield``; the body's return value is returned. :func:`_adrive` is the same loop with an ``await``."""
    __tracebackhide__ = True
    send, throw = body.send, body.throw
    steps = call is call_step  # the default: each Step's sync_fn is called here, no frame of call_step's
    try:
        yielded = send(None)
        while True:
            try:
                value = yielded.sync_fn(*yielded.args) if steps else call(yielded)
            except Abort as abort:  # the call refuses what the body yielded: the body is closed, not asked to handle it
                body.close()
                raise abort.error from None
            except BaseException as exc:
                failed: BaseException | None = exc
            else:
                failed = None
            # outside the handler: an error the body raises next gets no context of ours
            yielded = send(value) if failed is None else throw(failed)  # raised into the body at its yield
    except StopIteration as stop:
        result: T = stop.value
        return result


@types.coroutine
def _adrive(body: Generator[Any, Any, T], acall: Callable[[Any], Any]) -> Generator[Any, Any, T]:
    """The async driver: :func:`run_sync`'s loop, with what ``acall`` returns awaited. A generator-based coroutine
    (``types.coroutine``): :func:`run_async` returns it to be awaited, with no coroutine frame of its own."""
    __tracebackhide__ = True
    send, throw = body.send, body.throw
    resume, value = send, None
    while True:
        try:
            yielded = resume(value)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            value = yield from acall(yielded)
            resume = send
        except Abort as abort:  # as in run_sync
            body.close()
            raise abort.error from None
        except BaseException as exc:
            resume, value = throw, exc


class Abort(Exception):
    """Raised by a ``call``/``acall``: close the body and raise ``error`` (instead of throwing it into the body)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def run_async(body: Generator[Any, Any, T], acall: Callable[[Any], Awaitable[Any]] = acall_step) -> Awaitable[T]:
    """Run an engine body under ``ainvoke`` (await what this returns): what it yields goes through ``acall`` and is
    awaited (default: a :class:`Step`'s ``async_fn``). The driver itself is the awaitable: no coroutine frame of
    ours between the awaiting code and the body."""
    return _adrive(body, acall)
