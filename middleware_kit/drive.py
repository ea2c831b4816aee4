"""One body for sync and async engine code: a generator yields :class:`Step`s, a sync or an async driver runs them.

This is httpx's ``auth_flow`` pattern. An engine path (a node run, a chain call, the model call) is written once as
a generator; wherever it needs something that differs between ``invoke`` and ``ainvoke`` it yields
``Step(sync_fn, async_fn, *args)``:

- :func:`run_sync` calls ``sync_fn(*args)``;
- :func:`run_async` awaits ``async_fn(*args)``; with no ``async_fn`` it runs ``sync_fn`` in a worker thread (a
  sync-only hook under ``ainvoke``), or directly when the step says ``blocking=False``.

The step's result is sent back into the generator; an exception is thrown into it at the ``yield``; the
generator's return value is the driver's. User-facing flow hooks have their own drivers (:mod:`middleware_kit.flow`),
which also validate what a user's generator yields.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from middleware_kit.bridge import run_coroutine_sync, run_sync_in_thread

__all__ = ["Flow", "Step", "run_async", "run_sync"]

T = TypeVar("T")


class Step:
    """One thing an engine flow needs done, in the driver's mode."""

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
        :meth:`with_args`): an async-only hook is driven on a loop under ``invoke``, a sync-only one runs in a
        worker thread under ``ainvoke``."""
        if sync_fn is None:
            assert async_fn is not None
            sync_fn = _driven(async_fn)
        return cls(sync_fn, async_fn)

    def with_args(self, *args: Any) -> Step:
        return Step(self.sync_fn, self.async_fn, *args, blocking=self.blocking)


Flow = Generator[Step, Any, T]


def _driven(async_fn: Callable[..., Any]) -> Callable[..., Any]:
    def driven(*args: Any) -> Any:
        __tracebackhide__ = True
        return run_coroutine_sync(async_fn(*args))

    return driven


class _Done:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _resume(flow: Flow[Any], value: Any, error: BaseException | None) -> Step | _Done:
    """Send the last step's result into ``flow`` (or throw its exception); its next step, or its return value."""
    __tracebackhide__ = True
    try:
        return flow.send(value) if error is None else flow.throw(error)
    except StopIteration as stop:
        return _Done(stop.value)


def run_sync(flow: Flow[T]) -> T:
    """Run an engine flow under ``invoke``: each step's ``sync_fn``."""
    __tracebackhide__ = True
    value, error = None, None
    while type(step := _resume(flow, value, error)) is Step:
        try:
            value, error = step.sync_fn(*step.args), None
        except BaseException as exc:  # raised into the flow at its yield
            value, error = None, exc
    return step.value  # type: ignore[union-attr, no-any-return]


async def run_async(flow: Flow[T]) -> T:
    """Run an engine flow under ``ainvoke``: each step's ``async_fn`` (or ``sync_fn``, off the loop if blocking)."""
    __tracebackhide__ = True
    value, error = None, None
    while type(step := _resume(flow, value, error)) is Step:
        try:
            value, error = await _in_async_mode(step), None
        except BaseException as exc:  # raised into the flow at its yield
            value, error = None, exc
    return step.value  # type: ignore[union-attr, no-any-return]


async def _in_async_mode(step: Step) -> Any:
    __tracebackhide__ = True
    if step.async_fn is not None:
        return await step.async_fn(*step.args)
    if step.blocking:
        return await run_sync_in_thread(step.sync_fn, *step.args)
    return step.sync_fn(*step.args)
