"""The agent's tool node: LangGraph's ``ToolNode`` (validation errors as error ``ToolMessage``s, ``InjectedState`` /
``ToolRuntime`` injection, ``Command`` results) run inline for the one call each task receives, its output guarded.

Each pending tool call is its own task (a lone call by the node's edge, several by one ``Send`` each:
:mod:`middleware_kit._engine.routing`), so parallel calls are parallel graph tasks; inside a task there is exactly
one call, and running it inline saves ``ToolNode``'s thread pool (about 1.6 ms per invoke).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest as LangGraphToolCallRequest
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit._engine.chain import ChainCall, Layer, _note_bubble, compose, raise_instead
from middleware_kit._engine.compat import tool_node_one_call, update_pairs
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.guards import Guards
from middleware_kit._engine.inheritance import Frame, inherited_tool_chain
from middleware_kit._engine.private_state import with_private
from middleware_kit._engine.routing import with_goto
from middleware_kit._engine.validation import note_tool_failure
from middleware_kit.events import RunLifecycle, run_lifecycle, silenced
from middleware_kit.ledger.call import ledgered, recorded_at, task_run
from middleware_kit.ledger.policy import Ledger
from middleware_kit.trace_policy import config_callbacks_active
from middleware_kit.types import ToolCallRequest

__all__ = ["AgentToolNode", "install_ledger", "tool_node"]

_EXECUTE: ContextVar[tuple[Callable[[LangGraphToolCallRequest], Any], Any, Any] | None] = ContextVar(
    "middleware_kit_tool_execute", default=None
)
"""``ToolNode``'s execute callable of the current tool call, for the base of the composed tool chain (the chain is
composed once per agent; the callable is per call), with ``ToolNode``'s request and ours made from it (the base hands
``ToolNode`` its own request back when no wrapper replaced ours). A ContextVar: each call sees its own."""


def tool_node(
    tools: Sequence[BaseTool],
    layers: Sequence[Layer[Any, Any]],
    guards: Guards,
    *,
    traced_layers: Sequence[Layer[Any, Any]] | None = None,
    inherited: Frame | None = None,
    route: Route | None = None,
) -> AgentToolNode:
    """The agent's tool node: ``tools``, the tool chain of ``layers`` (outermost first) around each call.

    ``traced_layers``: the same chain with every hook a callback run (:mod:`~middleware_kit._engine.tracing`), used
    for the calls whose run has callback handlers (decided per call, from the call's config). ``inherited``: the
    agent's own frame; a call in a run nested in other agents' runs goes through their inherited policies around
    the chain (:mod:`~middleware_kit._engine.inheritance`). Without layers and callers, each call goes straight to
    ``ToolNode``'s execute (timed for the run's lifecycle events when the run asked for them). ``route``: where the
    run goes after a task, from the state the task started from and the task's own writes (the node then returns
    a ``Command`` with that ``goto``).
    """
    chain, achain = compose(layers, _base, _abase)
    traced, atraced = compose(traced_layers, _traced_base, _atraced_base) if traced_layers else (chain, achain)
    nested = inherited_tool_chain(inherited, chain, achain)
    nested_traced = inherited_tool_chain(inherited, traced, atraced)
    direct = not layers

    def chains(request: LangGraphToolCallRequest) -> tuple[Any, Any, Any]:
        """The call's (chain, async chain, config to make current: traced runs), or None chains: no chain at all."""
        config = _config_of(request)
        if traced_layers and config_callbacks_active(config):
            return (*(nested_traced.chains() or (traced, atraced)), config)
        found = nested.chains()
        if found is None and direct:
            return None, None, None
        return (*(found or (chain, achain)), None)

    def wrap(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
        __tracebackhide__ = True
        sync_h, _, config = chains(request)
        if sync_h is None:
            return _counted(request, execute)
        with _ToolCall(request, execute, config) as ours:
            return sync_h(ours)

    async def awrap(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
        __tracebackhide__ = True
        _, async_h, config = chains(request)
        if async_h is None:
            return await _acounted(request, execute)
        with _ToolCall(request, execute, config) as ours:
            return await async_h(ours)

    return AgentToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=awrap, guards=guards, route=route)


def _config_of(request: Any) -> Any:
    """The config of one tool call (``ToolRuntime.config``): the one ``ToolNode`` runs the tool with."""
    return getattr(request.runtime, "config", None)


def _counting(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Steps[Any]:
    """The tool call without a chain: ``execute``, timed when the run asked for lifecycle events. One body, run by
    :func:`_counted` under ``invoke`` and :func:`_acounted` under ``ainvoke``."""
    __tracebackhide__ = True
    life = run_lifecycle(request.runtime, _config_of(request))
    if life is None:
        return (yield Step(execute, execute, request))
    started = time.perf_counter()
    try:
        result = yield Step(execute, execute, request)
    except BaseException as exc:
        life.count_tool_call(time.perf_counter() - started)
        _escaped(life, exc, request.runtime)
        raise
    life.count_tool_call(time.perf_counter() - started)
    return result


def _counted(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
    __tracebackhide__ = True
    if run_lifecycle(request.runtime, _config_of(request)) is None:  # nothing to time: no driver step for it
        return execute(request)
    return run_sync(_counting(request, execute))


async def _acounted(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
    __tracebackhide__ = True
    if run_lifecycle(request.runtime, _config_of(request)) is None:
        return await execute(request)
    return await run_async(_counting(request, execute))


def _escaped(life: RunLifecycle, exc: BaseException, runtime: Any) -> None:
    """An exception leaving a tool call (after every wrapper): it fails the run (``ToolNode`` answers the model
    only for ``ToolInvocationError``; interrupts are no failure), or cancels it."""
    if isinstance(exc, asyncio.CancelledError):
        life.cancelled("the task running the agent was cancelled", runtime)
    elif not isinstance(exc, (GraphBubbleUp, ToolInvocationError)):
        life.failed(exc, runtime)


class _ToolCall(ChainCall):
    """One call through the tool chain (a :class:`~middleware_kit._engine.chain.ChainCall`), entered by the tool
    node's ``wrap`` and ``awrap`` alike: ``ToolNode``'s execute of the call is current for the chain's base, and
    ``traced_config`` (traced runs), the call's config, is made current so the outermost hook run hangs off the
    ``tools`` task's run. An exception leaving the chain fails or cancels the run's lifecycle (when it asked for
    one). Entering returns our request for the call."""

    __slots__ = ("_config_token", "_execute", "_execute_token", "_request", "_traced_config")

    def __init__(self, request: LangGraphToolCallRequest, execute: Callable[..., Any], traced_config: Any) -> None:
        self._request, self._execute, self._traced_config = request, execute, traced_config

    def __enter__(self) -> ToolCallRequest:  # type: ignore[override]
        request = self._request
        ours = _from_langgraph(request)
        self._execute_token = _EXECUTE.set((self._execute, request, ours))
        traced = self._traced_config
        self._config_token = None if traced is None else var_child_runnable_config.set(traced)
        ChainCall.__enter__(self)
        return ours

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        ending = self.leave(exc)
        try:
            if ending is not None:
                request = self._request
                life = run_lifecycle(request.runtime, _config_of(request))
                if life is not None:
                    _escaped(life, ending, request.runtime)
        finally:
            if self._config_token is not None:
                var_child_runnable_config.reset(self._config_token)
            _EXECUTE.reset(self._execute_token)
        if ending is not exc:
            raise_instead(ending, exc)


def _base_flow(request: ToolCallRequest, traced: bool = False) -> Steps[Any]:
    """The base of the tool chain: ``ToolNode``'s execute (argument validation, injection, error handling).

    ``traced``: the tool's run must nest under the innermost hook run. ``ToolNode`` runs the tool with the call's
    config dict (``ToolRuntime.config``, one per call), so its ``callbacks`` is pointed at the current hook run's
    child manager for the duration of the execution, and restored after.
    """
    __tracebackhide__ = True
    execute, given = _execution(request)
    config = _config_of(request)
    life = run_lifecycle(request.runtime, config)
    started = time.perf_counter() if life is not None else 0.0
    swapped = False
    if traced and isinstance(config, dict):
        current = var_child_runnable_config.get()
        if current is not None and current.get("callbacks") is not None:
            saved, config["callbacks"], swapped = config.get("callbacks"), current["callbacks"], True
    try:
        return (yield Step(execute, execute, given))
    except GraphBubbleUp as exc:
        _note_bubble(exc)
        raise
    finally:
        if swapped:
            config["callbacks"] = saved
        if life is not None:
            life.count_tool_call(time.perf_counter() - started)


def _execution(request: ToolCallRequest) -> tuple[Callable[..., Any], LangGraphToolCallRequest]:
    """``ToolNode``'s execute of the current call, and the request to hand it: its own when no wrapper replaced ours."""
    this_call = _EXECUTE.get()
    if this_call is None:
        raise RuntimeError("middleware_kit: tool handler called outside a tool call")
    execute, theirs, ours = this_call
    return execute, theirs if request is ours else _to_langgraph(request)


def _base(request: ToolCallRequest) -> Any:
    __tracebackhide__ = True
    if run_lifecycle(request.runtime, _config_of(request)) is not None:
        return run_sync(_base_flow(request))
    execute, given = _execution(request)  # nothing to time: no driver step for it (as in _counted)
    try:
        return execute(given)
    except GraphBubbleUp as exc:
        _note_bubble(exc)
        raise


async def _abase(request: ToolCallRequest) -> Any:
    __tracebackhide__ = True
    return await run_async(_base_flow(request))


def _traced_base(request: ToolCallRequest) -> Any:
    __tracebackhide__ = True
    return run_sync(_base_flow(request, traced=True))


async def _atraced_base(request: ToolCallRequest) -> Any:
    __tracebackhide__ = True
    return await run_async(_base_flow(request, traced=True))


def _from_langgraph(request: LangGraphToolCallRequest) -> ToolCallRequest:
    return ToolCallRequest(request.tool_call, request.tool, request.state, request.runtime)


def _to_langgraph(request: ToolCallRequest) -> LangGraphToolCallRequest:
    runtime = request.runtime
    if runtime is not None and request.state is not runtime.state:
        runtime = replace(runtime, state=request.state)
    return LangGraphToolCallRequest(
        tool_call=request.tool_call, tool=request.tool, state=request.state, runtime=runtime  # type: ignore[arg-type]
    )


Route = Callable[[Any, Any, RunnableConfig], Any]
"""Where a run goes after a tool task: ``route(state after the task, runtime, config)``."""


def _written_messages(output: Any) -> list[Any]:
    """The messages a tool node's output writes to this graph's ``messages``, in order (a dict, a ``Command``'s
    update, or a list of them; a ``Command`` to the parent graph writes nothing here)."""
    if isinstance(output, dict):
        written = output.get("messages")
        return list(written) if isinstance(written, (list, tuple)) else [] if written is None else [written]
    if isinstance(output, Command):
        if output.graph is not None or output.update is None:
            return []
        return [m for key, value in update_pairs(output) if key == "messages"
                for m in (value if isinstance(value, (list, tuple)) else [value])]
    if isinstance(output, (list, tuple)):
        return [m for part in output for m in _written_messages(part)]
    return []


def install_ledger(builder: Any, ledger: Ledger | None) -> None:
    """Put the call ledger (:mod:`middleware_kit.ledger`) around each tool execution of the agent graph ``builder``
    (before it is compiled); None: no ledger. Names in ``ledger`` that are no tool of the agent are an error."""
    spec = builder.nodes.get("tools")
    node = getattr(spec, "runnable", None)
    if isinstance(node, AgentToolNode):
        if ledger is not None:
            ledger.check_tools(node.tools_by_name)
        node._ledger = ledger


class AgentToolNode(ToolNode):
    """``ToolNode`` that runs a single call inline and guards its ``messages`` output; with a ledger, each tool
    execution (the innermost point, inside every ``wrap_tool_call``) is recorded (:mod:`middleware_kit.ledger`)."""

    _ledger: Ledger | None = None

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        wrap_tool_call: Callable[..., Any] | None,
        awrap_tool_call: Callable[..., Any] | None,
        guards: Guards,
        route: Route | None = None,
    ) -> None:
        super().__init__(list(tools), wrap_tool_call=wrap_tool_call, awrap_tool_call=awrap_tool_call)
        self._guards = guards
        self._route = route

    def _run_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        __tracebackhide__ = True
        try:
            with task_run():
                return super()._run_one(call, input_type, tool_runtime)
        except Exception as exc:  # the caller learns the tool, the call id and the middleware that handles it
            note_tool_failure(exc, call)
            raise

    async def _arun_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        __tracebackhide__ = True
        try:
            with task_run():
                return await super()._arun_one(call, input_type, tool_runtime)
        except Exception as exc:
            note_tool_failure(exc, call)
            raise

    def _execute_tool_sync(self, request: Any, input_type: Any, config: RunnableConfig) -> Any:
        __tracebackhide__ = True
        ledger = self._ledger
        if ledger is None or (found := recorded_at(ledger, request, config)) is None:
            return super()._execute_tool_sync(request, input_type, config)
        return run_sync(ledgered(ledger, found, request, config, functools.partial(self._execution, input_type),
                                 self._storable))

    async def _execute_tool_async(self, request: Any, input_type: Any, config: RunnableConfig) -> Any:
        __tracebackhide__ = True
        ledger = self._ledger
        if ledger is None or (found := recorded_at(ledger, request, config)) is None:
            return await super()._execute_tool_async(request, input_type, config)
        return await run_async(ledgered(ledger, found, request, config, functools.partial(self._execution, input_type),
                                        self._storable))

    def _execution(self, input_type: Any, request: Any, config: RunnableConfig) -> Step:
        """ToolNode's execution of ``request`` (injection, the tool, its error handling), as a step of either mode."""
        return Step(super()._execute_tool_sync, super()._execute_tool_async, request, input_type, config)

    def _storable(self, result: Any) -> Any:
        """A tool's result as the ledger may keep it: through the agent's message guards, as the checkpoint keeps
        it (a PII middleware's placeholders, never the raw values the tool saw and returned)."""
        if not self._guards:
            return result
        with silenced():  # the run reports its own pass of the guards; this one is the ledger's
            if isinstance(result, BaseMessage):
                [guarded] = self._guards.messages([result], None)
                return guarded
            return self._guards.update(result, None)

    def _extract_state(self, input: Any, config: RunnableConfig) -> Any:
        # the state tools read (``ToolRuntime.state``, ``InjectedState``) includes the private keys streams hide
        return with_private(super()._extract_state(input, config))

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        one = tool_node_one_call(self, input, config, runtime)
        if one is None:
            output = super()._func(input, config, runtime)
            state = None
        else:
            call, input_type, tool_runtime = one
            output = self._combine_tool_outputs([self._run_one(call, input_type, tool_runtime)], input_type)
            state = tool_runtime.state
        return self._routed(self._guards.update(output, runtime), input, state, config, runtime)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        one = tool_node_one_call(self, input, config, runtime)
        if one is None:
            output = await super()._afunc(input, config, runtime)
            state = None
        else:
            call, input_type, tool_runtime = one
            output = self._combine_tool_outputs([await self._arun_one(call, input_type, tool_runtime)], input_type)
            state = tool_runtime.state
        return self._routed(self._guards.update(output, runtime), input, state, config, runtime)

    def _routed(self, output: Any, input: Any, state: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        """``output`` with where the run goes next: the route decided on the state this task started from with the
        task's own messages added (what a conditional edge after the node would read, one task at a time)."""
        if self._route is None:
            return output
        if state is None:
            state = self._extract_state(input, config)
        messages = state.get("messages") if isinstance(state, Mapping) else None
        after = {"messages": [*(messages or ()), *_written_messages(output)]}
        return with_goto(output, self._route(after, runtime, config))
