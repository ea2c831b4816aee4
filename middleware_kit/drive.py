"""One body for sync and async engine code: a generator yields :class:`Step`s, a sync or an async driver runs them.

This is httpx's ``auth_flow`` pattern. An engine path (a node run, a chain call, the model call) is written once as
a generator; wherever it needs something that differs between ``invoke`` and ``ainvoke`` it yields
``Step(sync_fn, async_fn, *args)``:

- :func:`run_sync` calls ``sync_fn(*args)``;
- :func:`run_async` awaits ``async_fn(*args)``; with no ``async_fn`` it runs ``sync_fn`` in a worker thread (a
  sync-only hook under ``ainvoke``), or directly when the step says ``blocking=False``.

The step's result is sent back into the generator; an exception is thrown into it at the ``yield``; the
generator's return value is the driver's. ``bind`` turns what a flow yields into a ``Step`` at run time (the lease
flows of :mod:`middleware_kit.run_control.lease` yield operation names that a backend resolves).

A generator round-trip costs about a microsecond, too much on the hottest path (a wrap layer runs on every model and
tool call). There the code is written once as an ``async def`` and :func:`sync_twin` derives the sync function from
the same source at import (httpcore's ``unasync``, done by an AST transform): one body, two compiled forms, no
per-call cost.
"""

from __future__ import annotations
import __future__

import ast
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from middleware_kit.bridge import run_coroutine_sync, run_sync_in_thread

__all__ = ["Flow", "Step", "run_async", "run_sync", "sync_twin"]

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


def _resume(flow: Flow[Any], value: Any, error: BaseException | None) -> Any:
    """Send the last step's result into ``flow`` (or throw its exception); its next step, or its return value."""
    __tracebackhide__ = True
    try:
        return flow.send(value) if error is None else flow.throw(error)
    except StopIteration as stop:
        return _Done(stop.value)


async def run_async(flow: Generator[Any, Any, T], bind: Callable[[Any], Step] | None = None) -> T:
    """Run an engine flow under ``ainvoke``: each step's ``async_fn`` (or ``sync_fn``, off the loop if blocking);
    ``bind(yielded)`` makes the step, when given. :func:`run_sync` is this body with the awaits dropped and each
    step's ``sync_fn`` called (always set, so its ``_without_async_fn`` branch is never taken)."""
    __tracebackhide__ = True
    value, error = None, None
    while type(step := _resume(flow, value, error)) is not _Done:
        try:
            if bind is not None:
                step = bind(step)
            call = step.async_fn
            value, error = await (call(*step.args) if call is not None else _without_async_fn(step)), None
        except BaseException as exc:  # raised into the flow at its yield
            value, error = None, exc
    result: T = step.value
    return result


async def _without_async_fn(step: Step) -> Any:
    __tracebackhide__ = True
    if step.blocking:
        return await run_sync_in_thread(step.sync_fn, *step.args)
    return step.sync_fn(*step.args)


class _Unasync(ast.NodeTransformer):
    """``async def`` -> ``def``, ``await x`` -> ``x``, ``async for``/``with`` -> ``for``/``with``; names (of variables,
    attributes and functions) renamed."""

    def __init__(self, rename: Mapping[str, str]) -> None:
        self.rename = rename

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        fields = {name: getattr(node, name) for name in node._fields}
        fields["name"] = self.rename.get(node.name, node.name)
        return ast.copy_location(ast.FunctionDef(**fields), node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.name = self.rename.get(node.name, node.name)
        return node

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.For(**{name: getattr(node, name) for name in node._fields}), node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.With(**{name: getattr(node, name) for name in node._fields}), node)

    def visit_Await(self, node: ast.Await) -> ast.AST:
        inner: ast.AST = self.visit(node.value)
        return inner

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.rename.get(node.id, node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        node.attr = self.rename.get(node.attr, node.attr)
        return node


def sync_twin(template: Callable[..., Any], rename: Mapping[str, str] | None = None) -> Callable[..., Any]:
    """The sync form of ``template``, a module-level function written for ``ainvoke``: the same source with every
    ``await`` dropped, every ``async def``/``async for``/``async with`` made sync and the names in ``rename``
    replaced (``{"asleep": "sleep"}``), compiled once, in the template's module, with its file and line numbers (a
    traceback points at the one body). ``template`` may be a coroutine function or a factory of closures."""
    try:
        source = inspect.getsource(template)
    except OSError as exc:  # installed without its .py files (a zipapp of .pyc only)
        name = template.__qualname__
        raise ImportError(f"middleware_kit needs its .py source files to build the sync twin of {name}") from exc
    tree = ast.parse(source)
    definition = tree.body[0]
    assert isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)), template
    definition.decorator_list = []
    tree = ast.fix_missing_locations(_Unasync(rename or {}).visit(tree))
    ast.increment_lineno(tree, inspect.getsourcelines(template)[1] - 1)
    filename = inspect.getsourcefile(template) or "<sync_twin>"
    code = compile(tree, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(code, template.__globals__, namespace)
    twin: Callable[..., Any] = namespace[(rename or {}).get(definition.name, definition.name)]
    return twin


if TYPE_CHECKING:

    def run_sync(flow: Generator[Any, Any, T], bind: Callable[[Any], Step] | None = None) -> T:
        """Run an engine flow under ``invoke``: each step's ``sync_fn`` (``bind(yielded)`` first, when given)."""

else:
    run_sync = sync_twin(run_async, {"run_async": "run_sync", "async_fn": "sync_fn"})
