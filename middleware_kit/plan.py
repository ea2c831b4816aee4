"""``agent.middleware_plan``: the assembled pipeline, so nobody has to guess the order.

``print(agent.middleware_plan)`` shows every hook in run order with the twin it defines, how it is bridged under
``invoke`` and ``ainvoke``, and the graph node it runs in (``*`` marks a node of its own, kept for a hook that may
interrupt); then the model and tool chains, outermost first. ``plan.mermaid()`` draws the graph as a Mermaid diagram.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from middleware_kit._engine.pipeline import Pipeline
from middleware_kit.hooks import HOOKS, HookMode, HookSpec

__all__ = ["MiddlewarePlan", "PlanRows", "PlannedHook"]


@dataclass(frozen=True, slots=True)
class PlannedHook:
    """One hook as it will run."""

    phase: str
    """The hook (``before_model``, ``wrap_model_call``, ``before_tool+after_tool`` ...)."""
    middleware: str
    defined: str
    """Which twins the middleware defines: ``sync``, ``async`` or ``sync+async``."""
    under_invoke: str
    """``direct``, or ``loop`` (an async twin driven to completion)."""
    under_ainvoke: str
    """``direct``, or ``thread`` (a sync hook run off the event loop)."""
    where: str
    """The graph node (node hooks) or chain (``model``/``tool``) it runs in."""
    own_node: bool = False
    can_jump_to: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlanRows:
    """The parts of a plan that take a row per hook, worked out on first access (:attr:`MiddlewarePlan.rows`)."""

    hooks: tuple[PlannedHook, ...]
    model_chain: tuple[str, ...]
    tool_chain: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class MiddlewarePlan:
    """The pipeline of an agent, in run order. ``str()`` prints it as a table.

    Every agent has one, but few print it (and a LangGraph Server graph factory builds an agent per run): the rows of
    ``hooks``, ``model_chain`` and ``tool_chain`` are worked out on first access, once. Two plans are equal when
    everything they show is.
    """

    name: str
    middleware: tuple[str, ...]
    nodes: tuple[str, ...]
    """The graph's nodes, in run order."""
    rows: Callable[[], PlanRows] = field(repr=False)
    """Works out ``hooks``, ``model_chain`` and ``tool_chain`` (called once, on first access of any of them)."""
    draw: Callable[[], str] = field(repr=False, default=lambda: "")
    guards: tuple[str, ...] = ()
    """The middlewares that guard messages (``guard_messages``), in the order they run."""
    resume_guards: tuple[str, ...] = ()
    """The middlewares that guard resume values (``guard_resume``), in the order they run."""
    engine: tuple[str, ...] = ()
    """The layers the engine adds around ``middleware`` (run control's ``RunControlMiddleware``, outermost, and
    ``RunControlGuard``, innermost, in a controlled agent). Not in ``middleware``, ``hooks`` or the chains: the plan
    shows the user's stack, and prints these on a line of their own."""
    inherited: tuple[str, ...] = ()
    """This agent's middlewares with ``inherited = True``: the agents run inside its runs apply them around their
    own stack (docs/subagents.md)."""
    inherits: str = ("run inside another agent's run, it applies that caller's inherited policies at run time, "
                     "outermost caller first, around this stack")
    """What this agent applies when it runs inside another agent's run: known at run time only (its callers), so the
    plan states the rule; the ``inherited_policies`` event of each such model call names the layers."""

    @functools.cached_property
    def _rows(self) -> PlanRows:
        return self.rows()  # pure: a second thread racing the first gets an equal value

    @property
    def hooks(self) -> tuple[PlannedHook, ...]:
        """Every hook, in the order a run with one model call and one tool call meets them."""
        return self._rows.hooks

    @property
    def model_chain(self) -> tuple[str, ...]:
        """Layers of the model call, outermost first (``A.wrap_model_call``)."""
        return self._rows.model_chain

    @property
    def tool_chain(self) -> tuple[str, ...]:
        """Layers of each tool call, outermost first (a middleware's ``before_tool``/``after_tool`` pair is one
        layer, outside every ``wrap_tool_call``: ``"A.before_tool+after_tool"``)."""
        return self._rows.tool_chain

    def _shown(self) -> tuple[object, ...]:
        return (self.name, self.middleware, self.hooks, self.nodes, self.model_chain, self.tool_chain, self.guards,
                self.resume_guards, self.engine, self.inherited)

    def __eq__(self, other: object) -> bool:
        return other is self or (isinstance(other, MiddlewarePlan) and self._shown() == other._shown())

    def __hash__(self) -> int:
        return hash(self._shown())

    def __repr__(self) -> str:
        return (
            f"MiddlewarePlan(name={self.name!r}, middleware={self.middleware!r}, hooks={self.hooks!r}, "
            f"nodes={self.nodes!r}, model_chain={self.model_chain!r}, tool_chain={self.tool_chain!r}, "
            f"guards={self.guards!r}, resume_guards={self.resume_guards!r}, engine={self.engine!r}, "
            f"inherited={self.inherited!r})"
        )

    def mermaid(self) -> str:
        """The compiled graph as a Mermaid diagram (drawn on demand)."""
        return self.draw()

    def phase(self, name: str) -> tuple[str, ...]:
        """The middlewares whose ``name`` hook runs, in run order."""
        return tuple(h.middleware for h in self.hooks if h.phase == name)

    def __str__(self) -> str:
        head = ("#", "hook", "middleware", "defines", "invoke", "ainvoke", "runs in")
        rows = [
            (
                str(i),
                h.phase,
                h.middleware,
                h.defined,
                h.under_invoke,
                h.under_ainvoke,
                h.where + (" *" if h.own_node else "") + (f"  jumps: {','.join(h.can_jump_to)}" if h.can_jump_to
                                                          else ""),
            )
            for i, h in enumerate(self.hooks, 1)
        ]
        widths = [max(len(r[c]) for r in (head, *rows)) for c in range(len(head))]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [
            f"middleware plan of {self.name!r}: {len(self.middleware)} middleware(s) "
            f"[{', '.join(self.middleware)}], first listed = outermost",
            *([f"engine layers: {self.engine[0]} (outermost), {self.engine[-1]} (innermost): run control's "
               f"deadline and cancel checks"] if self.engine else []),
            fmt.format(*head).rstrip(),
            fmt.format(*("-" * w for w in widths)).rstrip(),
            *(fmt.format(*r).rstrip() for r in rows),
            "",
            "model call: " + _onion(self.model_chain, "model"),
            "tool call:  " + (_onion(self.tool_chain, "tool") if "tools" in self.nodes else "(no tools: no tool node)"),
            "graph:      " + " -> ".join(self.nodes),
        ]
        if self.guards:
            lines.append("guards:     " + " -> ".join(f"{g}.guard_messages" for g in self.guards)
                         + "  (every messages write, before LangGraph commits it)")
        if self.resume_guards:
            lines.append("resume:     " + " -> ".join(f"{g}.guard_resume" for g in self.resume_guards)
                         + "  (every Command(resume=...), before LangGraph stores it)")
        if self.inherited:
            lines.append("inherited:  " + ", ".join(self.inherited)
                         + "  (applied by the agents run inside this agent's runs, around their own stack)")
        lines.append("sub-agent:  " + self.inherits)
        if any(h.own_node for h in self.hooks):
            lines.append("* a node of its own (the hook may interrupt; resuming it never re-runs its neighbours)")
        return "\n".join(lines)


def _node_rows(pipeline: Pipeline, phase: str, node_of: Mapping[tuple[str, str], str]) -> list[PlannedHook]:
    return [
        PlannedHook(
            phase,
            step.owner,
            step.mode,
            HookMode(step.mode).under_invoke,
            HookMode(step.mode).under_ainvoke,
            node_of[(step.owner, phase)],
            own_node=step.may_interrupt,
            can_jump_to=tuple(sorted(step.can_jump_to)),
        )
        for step in pipeline.phases[phase]
        if step.owner not in pipeline.engine_layers
    ]


def _chain_rows(pipeline: Pipeline, spec: HookSpec) -> list[PlannedHook]:
    engine = pipeline.engine_layers
    found = [impls[spec.name] for impls in pipeline.hooks
             if spec.name in impls and impls[spec.name].owner not in engine]
    if spec.order == "reverse":
        found.reverse()
    where = "model chain" if spec.kind in ("model_request", "wrap_model") else "tool chain"
    return [
        PlannedHook(spec.name, impl.owner, impl.mode, impl.mode.under_invoke, impl.mode.under_ainvoke, where)
        for impl in found
    ]


def _onion(layers: tuple[str, ...], core: str) -> str:
    if not layers:
        return core
    return "".join(f"{layer}( " for layer in layers) + core + " )" * len(layers)


def build_plan(
    name: str,
    pipeline: Pipeline,
    node_of: Mapping[tuple[str, str], str],
    nodes: Sequence[str],
    draw: Callable[[], str],
    *,
    has_tool_node: bool,
    inherited: Sequence[str] = (),
) -> MiddlewarePlan:
    """The plan, its rows in the order of :data:`middleware_kit.hooks.HOOKS` (the order a run meets the hooks),
    worked out when first read. ``node_of``: ``(middleware, hook) -> node`` for every node hook."""

    def rows() -> PlanRows:
        hooks: list[PlannedHook] = []
        for spec in HOOKS.values():
            if spec.kind == "node":
                hooks.extend(_node_rows(pipeline, spec.name, node_of))
            elif spec.kind in ("model_request", "wrap_model") or has_tool_node:
                hooks.extend(_chain_rows(pipeline, spec))
        return PlanRows(
            hooks=tuple(hooks),
            model_chain=tuple(f"{layer.owner}.{layer.hook}" for layer in pipeline.model_layers
                              if layer.owner not in engine),
            tool_chain=tuple(f"{layer.owner}.{layer.hook}" for layer in pipeline.tool_layers
                             if layer.owner not in engine),
        )

    engine = pipeline.engine_layers
    return MiddlewarePlan(
        name=name,
        middleware=tuple(mw.name for mw in pipeline.middleware if mw.name not in engine),
        engine=tuple(mw.name for mw in pipeline.middleware if mw.name in engine),
        nodes=tuple(nodes),
        rows=rows,
        draw=draw,
        guards=pipeline.guards.owners,
        resume_guards=tuple(owner for owner, _ in pipeline.guards.resume_guards),
        inherited=tuple(inherited),
    )
