"""Hook signatures checked when the agent is built (as pluggy checks a plugin at register).

The engine calls every hook with fixed positional arguments (:mod:`middleware_kit.hooks`); a hook that cannot
take
them would otherwise fail mid-run with ``TypeError: log() takes 1 positional argument but 2 were given``. Here each
hook is bound against placeholders for those arguments once, at build, and a mismatch raises
:class:`~middleware_kit.errors.HookSignatureError` naming the middleware, the hook, the expected and the
found signature. Nothing of this runs per call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from middleware_kit.errors import HookSignatureError
from middleware_kit.hooks import GUARDS, HOOKS, HookKind, HookMode

__all__ = ["PARAMETERS", "check_hook", "check_hook_function"]

PARAMETERS: dict[HookKind, tuple[str, ...]] = {
    "node": ("state", "runtime"),
    "model_request": ("request", "state"),
    "wrap_model": ("request", "handler"),
    "wrap_tool": ("request", "handler"),
    "before_tool": ("request",),
    "after_tool": ("request", "result"),
    "guard": ("messages", "runtime"),
    "resume_guard": ("value", "runtime"),
}
"""What the engine passes each kind of hook, positionally (a flow wrap hook gets only the request)."""


def _kind(hook: str) -> HookKind:
    return GUARDS[hook].kind if hook in GUARDS else HOOKS[hook].kind


def check_hook(owner: str, hook: str, sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None) -> None:
    """Check both twins of ``hook`` (a key of :data:`HOOKS` or of :data:`GUARDS`) as ``owner`` defines them."""
    kind = _kind(hook)
    flow = HookMode.of(sync_fn, async_fn, kind) is HookMode.FLOW
    if sync_fn is not None:
        check_hook_function(owner, hook, sync_fn, flow=flow)
    if async_fn is not None:
        check_hook_function(owner, "a" + hook, async_fn, flow=False)


def check_hook_function(owner: str, method: str, fn: Callable[..., Any], *, flow: bool = False) -> None:
    """Raise :class:`HookSignatureError` unless ``fn`` can be called as the engine calls ``method``."""
    hook = method[1:] if method not in HOOKS and method not in GUARDS else method
    kind = _kind(hook)
    is_async = method != hook
    params = ("request",) if flow else PARAMETERS[kind]
    expected = _expected(method, params, is_method=inspect.ismethod(fn), is_async=is_async)
    target = _unwrapped(fn)
    if inspect.isasyncgenfunction(target):
        raise HookSignatureError.async_generator_hook(owner, method, expected, _found(fn))
    if inspect.isgeneratorfunction(target) and (is_async or kind not in ("wrap_model", "wrap_tool")):
        raise HookSignatureError.generator_hook(owner, method, expected, _found(fn))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or a C callable: nothing to read, the call will tell
        return
    try:
        signature.bind(*params)
    except TypeError as exc:
        raise HookSignatureError.wrong_parameters(owner, method, expected, _found(fn), str(exc)) from None


def _unwrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    target = getattr(fn, "__func__", fn)
    return target


def _expected(method: str, params: tuple[str, ...], *, is_method: bool, is_async: bool) -> str:
    args = ", ".join(("self", *params) if is_method else params)
    return f"{'async def' if is_async else 'def'} {method}({args})"


def _found(fn: Callable[..., Any]) -> str:
    target = _unwrapped(fn)
    name = getattr(target, "__name__", type(fn).__name__)
    prefix = "async def" if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target) else "def"
    try:
        raw = inspect.signature(target)
        plain = [p.replace(annotation=inspect.Parameter.empty) for p in raw.parameters.values()]
        signature = str(raw.replace(parameters=plain, return_annotation=inspect.Signature.empty))
    except (TypeError, ValueError):
        signature = "(...)"
    return f"{prefix} {name}{signature}"
