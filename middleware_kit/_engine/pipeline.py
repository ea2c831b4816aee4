"""Collect -> validate -> order -> bridge -> freeze: the pipeline of an agent, computed once at build time.

The result is a :class:`Pipeline`: node steps grouped into fused nodes per phase, and the layers of the model and
tool chains, outermost first. The graph module turns it into LangGraph nodes; a model or tool call afterwards only
walks the prebuilt tuples and closures.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool

from middleware_kit._engine.bridge import bridge_node_hook
from middleware_kit._engine.chain import Layer, model_request_layer, tool_hooks_layer, wrap_model_layer, wrap_tool_layer
from middleware_kit._engine.guards import Guards
from middleware_kit._engine.phases import NodeStep
from middleware_kit._engine.signatures import check_hook
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.hooks import HOOKS, JUMP_TARGETS, NODE_PHASES, HookMode
from middleware_kit.middleware import (
    AgentMiddleware,
    ClassHooks,
    HookImpl,
    HookNameError,
    _implementation,
    defined_hooks,
    hook_facts,
    is_engine_layer,
)

__all__ = ["AgentTools", "HookImpl", "Pipeline", "build_pipeline", "defined_hooks"]

_RESERVED_NAME_CHARS = ("|", ":", "\n")


@dataclass(frozen=True, slots=True)
class AgentTools:
    """The tools of the agent being built, by name, as ``create_agent`` knows them before anything runs.

    The one build-time hook that needs the whole agent: a middleware that defines ``check_agent_tools(self, tools:
    AgentTools) -> None`` has it called once per build, after every middleware passed its own checks, and raises a
    :class:`~middleware_kit.errors.MiddlewareConfigError` naming itself when its configuration names a tool the
    agent does not have (``HumanInTheLoopMiddleware(interrupt_on={"send_emial": True})``). Tools a middleware adds
    per call (a ``wrap_model_call`` extending ``request.tools``, run by a ``wrap_tool_call``) are not here: the
    checking middleware takes them as an explicit list of its own (HumanInTheLoopMiddleware's ``dynamic_tools``).
    """

    client: tuple[str, ...] = ()
    """``create_agent(tools=...)`` (provider tool dicts are not tools the agent runs, so not here)."""
    middleware: tuple[str, ...] = ()
    """Every middleware's ``tools``, in list order."""
    structured: tuple[str, ...] = ()
    """The structured-output tools of ``response_format`` (a ``ToolStrategy``, or the one an ``AutoStrategy`` may
    fall back to)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every name above, in that order."""
        return (*self.client, *self.middleware, *self.structured)


def _check_agent_tools(mws: Sequence[AgentMiddleware[Any, Any]], tools: AgentTools) -> None:
    for mw in mws:
        check = getattr(mw, "check_agent_tools", None)
        if callable(check):
            check(tools)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The frozen, ordered, bridged pipeline of one agent."""

    middleware: tuple[AgentMiddleware[Any, Any], ...]
    hooks: tuple[dict[str, HookImpl], ...]
    """Per middleware (list order), the hooks it defines."""
    phases: dict[str, tuple[NodeStep, ...]]
    """Per node phase, its hooks in run order (the graph module decides which share a node)."""
    model_layers: tuple[Layer[Any, Any], ...]
    """Outermost first: every ``modify_model_request``, then every ``wrap_model_call`` (incl. dynamic prompts)."""
    tool_layers: tuple[Layer[Any, Any], ...]
    """Outermost first: each middleware's ``before_tool``/``after_tool`` pair, then every ``wrap_tool_call``."""
    tools: tuple[BaseTool, ...]
    """Tools the middlewares add."""
    guards: Guards = field(default_factory=Guards)
    """The middlewares that override ``guard_messages`` (and ``guard_resume``), in list order."""

    @property
    def engine_layers(self) -> frozenset[str]:
        """Names of the layers the engine added (:func:`~middleware_kit.middleware.is_engine_layer`)."""
        return frozenset(mw.name for mw in self.middleware if is_engine_layer(mw))

    @property
    def has_wrap_tool_call(self) -> bool:
        """Whether a ``wrap_tool_call`` of the user's stack may run tools the agent was not given (dynamic tools)."""
        engine = self.engine_layers
        return any(layer.hook == "wrap_tool_call" and layer.owner not in engine for layer in self.tool_layers)


def _check_item(item: object, index: int) -> AgentMiddleware[Any, Any]:
    if isinstance(item, AgentMiddleware):
        return item
    if isinstance(item, type) and issubclass(item, AgentMiddleware):
        fix = f"pass an instance: {item.__name__}(...)"
    elif type(item).__name__ == "_HookDecorator":
        fix = "the decorator was listed itself; decorate a function with it and list the result"
    else:
        fix = "subclass AgentMiddleware, or make one with a decorator such as @before_model"
    raise MiddlewareConfigError.not_a_middleware(index, item, fix)


def _check_name(mw: AgentMiddleware[Any, Any], seen: dict[str, int], index: int) -> None:
    name = mw.name
    if not isinstance(name, str) or not name or any(c in name for c in _RESERVED_NAME_CHARS):
        raise MiddlewareConfigError.bad_name(index, name, _RESERVED_NAME_CHARS)
    if name in seen:
        raise MiddlewareConfigError.duplicate_name(name, seen[name], index)
    seen[name] = index


def _check_static(impl: HookImpl) -> None:
    """The checks of one hook that do not depend on the agent (cached per class by :func:`_check_middleware`)."""
    spec = HOOKS[impl.hook]
    for target in sorted(impl.can_jump_to):
        if target not in JUMP_TARGETS:
            raise MiddlewareConfigError.unknown_jump_target(impl.owner, impl.hook, sorted(impl.can_jump_to))
        if target not in spec.jump_targets:
            raise MiddlewareConfigError.jump_not_allowed(impl.owner, impl.hook, target, sorted(spec.jump_targets))
    if impl.may_interrupt and spec.kind != "node":
        raise MiddlewareConfigError.may_interrupt_outside_node(impl.owner, impl.hook)
    if impl.mode is HookMode.FLOW:
        _check_flow(impl)
    for fn in (impl.sync, impl.async_):
        if fn is not None and impl.sync is fn and inspect.iscoroutinefunction(fn):
            raise MiddlewareConfigError.async_def_sync_name(impl.owner, impl.hook)
    check_hook(impl.owner, impl.hook, impl.sync, impl.async_)


def _check_middleware(mw: AgentMiddleware[Any, Any], hooks: dict[str, HookImpl], record: ClassHooks,
                      from_class: bool, has_tools: bool) -> None:
    """Validate one middleware's hooks: what depends only on its class once per class (LangGraph Server graph
    factories build an agent per run), the rest every build."""
    if record.near_misses:
        owner, method, suggestion = record.near_misses[0]
        raise HookNameError.near_miss(mw.name, owner, method, suggestion)
    if not (from_class and record.checked):
        for impl in hooks.values():
            _check_static(impl)
        for guard in ("guard_messages", "guard_resume"):
            if (fn := _implementation(mw, guard)) is not None:
                check_hook(mw.name, guard, fn, None)
        if from_class:
            record.checked = True
    for impl in hooks.values():
        if "tools" in impl.can_jump_to and not has_tools:
            raise MiddlewareConfigError.jump_to_tools_without_tools(impl.owner, impl.hook)


def _check_flow(impl: HookImpl) -> None:
    """A flow hook takes only the request, and is the one body for both modes."""
    assert impl.sync is not None
    signature = inspect.signature(impl.sync)
    params = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) != 1 or params[0].kind not in positional:
        raise MiddlewareConfigError.flow_signature(impl.owner, impl.hook, str(signature))
    if impl.async_ is not None:
        raise MiddlewareConfigError.flow_with_async_twin(impl.owner, impl.hook)


def _node_steps(hooks: Sequence[dict[str, HookImpl]], engine: frozenset[str]) -> dict[str, tuple[NodeStep, ...]]:
    """Per node phase, its hooks in run order (forward or reverse, as ``HOOKS`` says), bridged for both modes."""
    phases: dict[str, tuple[NodeStep, ...]] = {}
    for phase in NODE_PHASES:
        ordered = [h[phase] for h in hooks if phase in h]
        if HOOKS[phase].order == "reverse":
            ordered.reverse()
        steps = []
        for impl in ordered:
            run_sync, run_async = bridge_node_hook(impl.sync, impl.async_)
            steps.append(
                NodeStep(impl.owner, phase, impl.mode, run_sync, run_async, impl.can_jump_to, impl.may_interrupt,
                         impl.owner in engine)
            )
        phases[phase] = tuple(steps)
    return phases


def _chain_layers(
    mws: Sequence[AgentMiddleware[Any, Any]], hooks: Sequence[dict[str, HookImpl]]
) -> tuple[tuple[Layer[Any, Any], ...], tuple[Layer[Any, Any], ...]]:
    """The model chain (every ``modify_model_request``, then every ``wrap_model_call``) and the tool chain (each
    middleware's ``before_tool``/``after_tool`` pair, then every ``wrap_tool_call``), outermost first."""
    requests = [model_request_layer(h["modify_model_request"].owner, h["modify_model_request"].sync,
                                    h["modify_model_request"].async_) for h in hooks if "modify_model_request" in h]
    wraps = [wrap_model_layer(h["wrap_model_call"].owner, h["wrap_model_call"].sync, h["wrap_model_call"].async_,
                              h["wrap_model_call"].mode) for h in hooks if "wrap_model_call" in h]
    tool_pairs = [
        tool_hooks_layer(
            mw.name,
            (h["before_tool"].sync, h["before_tool"].async_) if "before_tool" in h else (None, None),
            (h["after_tool"].sync, h["after_tool"].async_) if "after_tool" in h else (None, None),
        )
        for mw, h in zip(mws, hooks, strict=True)
        if "before_tool" in h or "after_tool" in h
    ]
    tool_wraps = [wrap_tool_layer(h["wrap_tool_call"].owner, h["wrap_tool_call"].sync, h["wrap_tool_call"].async_,
                                  h["wrap_tool_call"].mode) for h in hooks if "wrap_tool_call" in h]
    return (*requests, *wraps), (*tool_pairs, *tool_wraps)


def _adopt(mws: Sequence[AgentMiddleware[Any, Any]]) -> None:
    """The pipeline is valid: its bundled middlewares' configuration becomes read-only (DESIGN §8.5)."""
    from middleware_kit.middlewares._frozen import FrozenConfig  # not at import time: bundled middlewares import us

    for mw in mws:
        if isinstance(mw, FrozenConfig):
            mw._adopt()


def build_pipeline(
    middleware: Sequence[object],
    *,
    client_tools: Sequence[BaseTool],
    structured_tools: Collection[str] = (),
    validate_jumps: bool = True,
) -> Pipeline:
    """Validate and compile ``middleware`` (first = outermost) into a :class:`Pipeline`.

    ``structured_tools``: the names of the structured-output tools (:class:`AgentTools`). ``validate_jumps=False``
    (the testing harness) skips the checks that need the whole agent (jump targets, ``check_agent_tools``). Once
    valid, the bundled middlewares in it are adopted: their configuration is read-only from then on.
    """
    if isinstance(middleware, AgentMiddleware) or not isinstance(middleware, Sequence):
        raise MiddlewareConfigError.middleware_not_a_list(middleware)
    mws = tuple(_check_item(item, i) for i, item in enumerate(middleware))
    seen: dict[str, int] = {}
    for i, mw in enumerate(mws):
        _check_name(mw, seen, i)
    mw_tools = tuple(t for mw in mws for t in (getattr(mw, "tools", None) or ()))
    for mw in mws:
        for tool in getattr(mw, "tools", None) or ():
            if not isinstance(tool, BaseTool):
                raise MiddlewareConfigError.tool_not_a_basetool(mw.name, tool)
    has_tools = bool(client_tools) or bool(mw_tools)
    hooks: list[dict[str, HookImpl]] = []
    for mw in mws:
        per_mw, record, from_class = hook_facts(mw)
        _check_middleware(mw, per_mw, record, from_class, has_tools or not validate_jumps)
        hooks.append(per_mw)

    if validate_jumps:
        agent_tools = AgentTools(
            tuple(t.name for t in client_tools), tuple(t.name for t in mw_tools), tuple(structured_tools)
        )
        _check_agent_tools(mws, agent_tools)
    model_layers, tool_layers = _chain_layers(mws, hooks)
    guards = Guards(
        tuple((mw.name, fn) for mw in mws if (fn := _implementation(mw, "guard_messages")) is not None),
        tuple((mw.name, fn) for mw in mws if (fn := _implementation(mw, "guard_resume")) is not None),
    )
    _adopt(mws)
    return Pipeline(
        guards=guards,
        middleware=mws,
        hooks=tuple(hooks),
        phases=_node_steps(hooks, frozenset(mw.name for mw in mws if is_engine_layer(mw))),
        model_layers=model_layers,
        tool_layers=tool_layers,
        tools=mw_tools,
    )
