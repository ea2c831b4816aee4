"""Policies carried into sub-agents: an agent run inside another agent's run applies its callers' inherited middleware.

**The rule.** A middleware with ``inherited = True`` (PII, budgets, guardrails, human review, run control) is applied
by every agent built by ``create_agent`` that runs inside a run of its agent, at any depth (a tool that invokes an
agent, a graph with an agent as a node run inside a tool, a ``task`` tool, a sub-agent of a sub-agent, parallel
sub-agents), around the sub-agent's own stack, outermost caller first: each caller's inherited stack is one onion
around the next caller's (a composed chain is itself a layer), the sub-agent's own stack innermost.

**The carrier** (the one place it travels): ``config["configurable"][CARRIER]``, a tuple of :class:`Frame`, outermost
caller first. LangGraph hands a run's ``configurable`` to every run started inside it (through langchain-core's
``var_child_runnable_config`` in a tool or node, through ``config`` to a subgraph), so a nested agent finds its
callers' frames there. An agent with inherited middleware of its own adds its frame when a run of it starts
(:func:`enter`, called by :class:`~middleware_kit.compiled.CompiledAgent`); inside that run its own frame is the last
one, and is not applied again (:func:`callers`).

**What a sub-agent runs of an inherited middleware** (its *sub-agent form*, :func:`subagent_form`):

- the middleware's ``subagent_layer()`` if it defines one (a middleware whose node hooks keep state the sub-agent does
  not have says there what it does instead: ``BudgetMiddleware`` charges its caller's run);
- else, when its ``after_model`` may interrupt (human review), :class:`ReviewAtToolCall`: that hook, asked about each
  tool call of the sub-agent right before the call runs (the interrupt surfaces to the top-level caller, whose
  ``Command(resume=...)`` reaches it);
- else the middleware itself.

Of the form, the sub-agent runs the wrap chains (``modify_model_request``, ``wrap_model_call``, ``before_tool`` /
``after_tool``, ``wrap_tool_call``) and the message guards (``guard_messages``: the request's messages before the
sub-agent's model sees them, the model's answer, each tool result; and the sub-agent's input, when its run starts, so
its state never holds what they redact). Node hooks do not run: the state keys they read
and write are the caller's, which the sub-agent's schema does not have. For the same reason the state updates an
inherited wrap layer returns (``ExtendedModelResponse`` commands) are dropped in the sub-agent.

**Composed once per (caller stack, sub-agent)**: the layers of the frames found are composed around the sub-agent's
own chain on the first call with those frames, and reused (:class:`InheritedChain`). The check is made once per
call, outside the agent's chains: at the top level an agent pays one look at the config and no layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.types import Command

from middleware_kit._engine.chain import _CALL, CallState, Layer, compose
from middleware_kit._engine.guards import Guards
from middleware_kit._engine.holdback import Holdback
from middleware_kit._engine.pipeline import Pipeline, build_pipeline
from middleware_kit.events import emit_dict
from middleware_kit.flow import ToolCallFlow, ToolCallFlowHooks
from middleware_kit.middleware import AgentMiddleware, defined_hooks
from middleware_kit.types import AgentState, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "CARRIER",
    "Frame",
    "InheritedChain",
    "ReviewAtToolCall",
    "callers",
    "enter",
    "inherited_model_chain",
    "inherited_tool_chain",
    "own_frame",
    "subagent_form",
]

CARRIER = "__middleware_kit_inherited"
"""Where the inherited frames travel: ``config["configurable"][CARRIER]`` (never checkpointed: ``__`` keys are not)."""
_CACHE_SIZE = 32
"""Composed caller stacks kept per sub-agent chain (a few callers per sub-agent in practice)."""
_ANNOUNCED = "inherited"
"""The ``middleware`` of the ``inherited_policies`` event (no middleware of the sub-agent's: its callers')."""


@dataclass(frozen=True, eq=False, slots=True)
class Frame:
    """One agent's inherited middleware, as its runs hand them to the runs started inside them. Made once per agent
    (:func:`own_frame`); compared by identity."""

    agent: str
    """The agent's name (``create_agent(name=...)``, else ``"LangGraph"``)."""
    middleware: tuple[str, ...]
    """The inherited middlewares' names, outermost first."""
    pipeline: Pipeline = field(repr=False)
    """Their sub-agent forms, validated and composed as a pipeline of their own (chains and guards are used)."""
    holdback: Holdback | None = field(default=None, repr=False)
    """What the inherited middlewares hold back of a streamed answer (their ``stream_holdback``), applied by a
    sub-agent's model node on top of its own (:func:`middleware_kit._engine.holdback.held`)."""


def subagent_form(mw: AgentMiddleware[Any, Any]) -> AgentMiddleware[Any, Any] | None:
    """What a sub-agent applies of the inherited ``mw`` (the rule is in the module doc); None: nothing."""
    make = getattr(mw, "subagent_layer", None)
    if callable(make):
        form = make()
        if form is not None and not isinstance(form, AgentMiddleware):
            from middleware_kit.errors import MiddlewareConfigError

            raise MiddlewareConfigError(
                f"{mw.name}.subagent_layer() returned {form!r}; return an AgentMiddleware (what a sub-agent applies "
                f"in place of {mw.name}) or None (nothing).",
                middleware=mw.name,
                hook="subagent_layer",
            )
        return form
    after = defined_hooks(mw).get("after_model")
    if after is not None and after.may_interrupt:
        return ReviewAtToolCall(mw)
    return mw


def own_frame(middleware: Sequence[AgentMiddleware[Any, Any]], agent: str | None) -> Frame | None:
    """The frame an agent hands to the runs started inside its runs (None: it has no inherited middleware). The
    ``inherited`` attribute is read here, once, when the agent is built."""
    inherited = [mw for mw in middleware if getattr(mw, "inherited", False) is True]
    forms = [form for mw in inherited if (form := subagent_form(mw)) is not None]
    if not forms:
        return None
    pipeline = build_pipeline(forms, client_tools=(), validate_jumps=False)
    holdback = Holdback.for_agent(inherited, None, pipeline.guards)
    return Frame(agent or "LangGraph", tuple(mw.name for mw in inherited), pipeline, holdback)


def _configurable(config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if type(config) is dict or isinstance(config, Mapping):  # a config is a dict: no ABC check on every look
        return config.get("configurable")
    return None


def enter(own: Frame | None, input: Any, config: RunnableConfig | None) -> tuple[Any, RunnableConfig | None]:
    """The input and config a run of an agent whose frame is ``own`` starts with. Run inside another agent's run, its
    input ``messages`` pass its callers' guards first (the sub-agent's state never holds what they redact), and its
    config keeps its callers' frames even when the call passes a ``configurable`` of its own (which LangGraph would
    take in place of the enclosing run's): a policy is not left behind by a config. An agent with inherited
    middleware adds its frame after its callers'."""
    given = _configurable(config)
    outer = _configurable(var_child_runnable_config.get())
    frames: tuple[Frame, ...] = tuple((given or {}).get(CARRIER) or (outer or {}).get(CARRIER) or ())
    if frames and isinstance(input, Mapping) and "messages" in input:
        guards = _guards(frames)
        if guards:
            input = {**input, "messages": guards.value(input["messages"], None)}
    if own is None and (not frames or given is None or CARRIER in given):
        return input, config  # LangGraph hands the callers' frames down as they are
    out: dict[str, Any] = dict(config or {})
    out["configurable"] = {**(given if given is not None else outer or {}),
                           CARRIER: (*frames, own) if own is not None else frames}
    return input, out  # type: ignore[return-value]


def callers(own: Frame | None) -> tuple[Frame, ...]:
    """The frames of the callers of the current run (outermost first), this agent's own left out. Asked by each
    node and chain of every run: a dict config is read with no call."""
    config = var_child_runnable_config.get()
    configurable = config.get("configurable") if type(config) is dict else _configurable(config)
    frames = configurable.get(CARRIER) if configurable is not None else None
    if not frames:
        return ()
    if own is not None and frames[-1] is own:
        frames = frames[:-1]
    return tuple(frames)


# -- the two layers ------------------------------------------------------------------------------------------------
_OUTER: ContextVar[CallState | None] = ContextVar("middleware_kit_inherited_outer", default=None)
"""The sub-agent's own call state while the inherited layers run (they run with none: their commands are dropped)."""


def _guards(frames: tuple[Frame, ...]) -> Guards:
    return Guards(tuple(g for f in frames for g in f.pipeline.guards.guards))


def _guard_request(guards: Guards, request: Any) -> Any:
    if not guards or not isinstance(request, ModelRequest):
        return request
    return request.override(messages=guards.messages(request.messages, request.runtime))


def _guard_model(guards: Guards, request: Any, response: Any) -> Any:
    if not guards or not isinstance(response, ModelResponse):
        return response
    runtime = getattr(request, "runtime", None)
    return ModelResponse(result=guards.messages(response.result, runtime),
                         structured_response=response.structured_response)


def _guard_tool(guards: Guards, request: Any, result: Any) -> Any:
    if not guards or not isinstance(result, ToolMessage):
        return result
    guarded = guards.messages([result], getattr(request, "runtime", None))
    return guarded[0] if len(guarded) == 1 else result


def _announce(frames: tuple[Frame, ...], request: Any) -> None:
    """The run-time event naming the inherited layers a sub-agent's model call goes through."""
    emit_dict(getattr(request, "runtime", None), {
        "event": "inherited_policies", "middleware": _ANNOUNCED,
        "callers": [f.agent for f in frames], "layers": [name for f in frames for name in f.middleware],
    })


@dataclass(frozen=True, slots=True)
class _Kind:
    hook: str
    layers: Callable[[Frame], tuple[Layer[Any, Any], ...]]
    before: Callable[[Guards, Any], Any]
    after: Callable[[Guards, Any, Any], Any]
    announce: bool


_MODEL = _Kind("wrap_model_call", lambda f: f.pipeline.model_layers, _guard_request, _guard_model, True)
_TOOL = _Kind("wrap_tool_call", lambda f: f.pipeline.tool_layers, lambda _g, r: r, _guard_tool, False)


def _bases(chain: Any, achain: Any) -> tuple[Any, Any]:
    """The innermost handlers of the callers' layers: the sub-agent's own chain, with its call state back."""

    def base(request: Any) -> Any:
        __tracebackhide__ = True
        token = _CALL.set(_OUTER.get())
        try:
            return chain(request)
        finally:
            _CALL.reset(token)

    async def abase(request: Any) -> Any:
        __tracebackhide__ = True
        token = _CALL.set(_OUTER.get())
        try:
            return await achain(request)
        finally:
            _CALL.reset(token)

    return base, abase


def _entries(kind: _Kind, frames: tuple[Frame, ...], chain: Any, achain: Any) -> tuple[Any, Any]:
    """The entry handlers of one caller stack around the sub-agent's own ``chain``/``achain``: the callers' layers
    composed around it, their guards around those."""
    sync_h, async_h = compose(tuple(layer for f in frames for layer in kind.layers(f)), *_bases(chain, achain))
    guards = _guards(frames)

    def enter(request: Any) -> tuple[Any, Any]:
        if kind.announce:
            _announce(frames, request)
        return _OUTER.set(_CALL.get()), _CALL.set(None)

    def entry(request: Any) -> Any:
        __tracebackhide__ = True
        outer, call = enter(request)
        try:
            return kind.after(guards, request, sync_h(kind.before(guards, request)))
        finally:
            _CALL.reset(call)
            _OUTER.reset(outer)

    async def aentry(request: Any) -> Any:
        __tracebackhide__ = True
        outer, call = enter(request)
        try:
            return kind.after(guards, request, await async_h(kind.before(guards, request)))
        finally:
            _CALL.reset(call)
            _OUTER.reset(outer)

    return entry, aentry


class InheritedChain:
    """One of an agent's chains (its model chain or its tool chain, plain or traced) as a call enters it: its own
    chain at the top level; run inside other agents' runs, their inherited policies around it (the rule of the
    module doc), composed once per caller stack. Looked up once per call (:meth:`chains`), outside the chain: an
    agent run at the top level pays one look at the config and no layer."""

    __slots__ = ("_achain", "_cache", "_chain", "_kind", "_own")

    def __init__(self, kind: _Kind, own: Frame | None, chain: Any, achain: Any) -> None:
        self._kind, self._own, self._chain, self._achain = kind, own, chain, achain
        self._cache: dict[tuple[Frame, ...], tuple[Any, Any]] = {}

    def chains(self) -> tuple[Any, Any] | None:
        """The (sync, async) entry of this call's chain when the run is nested in callers with inherited
        policies; None: the agent's own chain, as composed."""
        frames = callers(self._own)
        if not frames:
            return None
        found = self._cache.get(frames)
        if found is None:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            found = self._cache[frames] = _entries(self._kind, frames, self._chain, self._achain)
        return found


def inherited_model_chain(own: Frame | None, chain: Any, achain: Any) -> InheritedChain:
    """An agent's model chain (``chain``, ``achain``) with its callers' inherited policies around it."""
    return InheritedChain(_MODEL, own, chain, achain)


def inherited_tool_chain(own: Frame | None, chain: Any, achain: Any) -> InheritedChain:
    """An agent's tool chain (``chain``, ``achain``) with its callers' inherited policies around it."""
    return InheritedChain(_TOOL, own, chain, achain)


# -- human review in a sub-agent -------------------------------------------------------------------------------------
class ReviewAtToolCall(ToolCallFlowHooks, AgentMiddleware[AgentState[Any], Any]):
    """The sub-agent form of an inherited middleware whose ``after_model`` may interrupt (human review): that hook is
    asked about each tool call of the sub-agent right before the call runs, seeing the state ``{"messages":
    [AIMessage(tool_calls=[call])]}``. Its interrupt surfaces to the top-level caller (the sub-agent is a task of its
    caller's run); the caller's ``Command(resume=...)`` runs the sub-agent again to that point, where the hook gets the
    decision. What its update says about the call decides: a ``ToolMessage`` answering it (rejected, answered by the
    reviewer) is its result; an edit recorded for it (``hitl_edits``) runs instead; else the call runs as asked."""

    def __init__(self, reviewer: AgentMiddleware[Any, Any]) -> None:
        self.reviewer = reviewer
        self.name = reviewer.name

    def tool_call_flow(self, request: ToolCallRequest) -> ToolCallFlow:
        call = request.tool_call
        update = self.reviewer.after_model(
            {"messages": [AIMessage(content="", tool_calls=[call])]}, request.runtime  # type: ignore[arg-type]
        )
        call_id = call.get("id")
        for message in (update or {}).get("messages") or ():
            if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
                return message
        edit = ((update or {}).get("hitl_edits") or {}).get(call_id)
        if isinstance(edit, Mapping) and edit.get("name") == call["name"]:
            edited = ToolCall(name=call["name"], args=dict(edit.get("args") or {}), id=call_id, type="tool_call")
            request = request.override(tool_call=edited)
        result: ToolMessage | Command[Any] = yield request
        return result
