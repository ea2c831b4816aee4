"""Pictures of an agent that open offline: the middleware plan as an HTML page, and a timeline of one run.

``render_plan_html(agent)`` returns one self-contained page (inline CSS and SVG, no script, no network) with
    * the onion: every hook in run order, phase by phase, with the model and tool chains drawn as nested layers
      (outermost first) around the model call and the tool call, and one row per middleware listing its hooks;
    * the graph: the compiled graph's nodes and edges (``agent.get_graph()``) as an SVG drawing
      (conditional edges dashed);
    * the guards (``guard_messages`` and ``guard_resume``, not steps of the run) in the order they run;
    * sub-agents: the middlewares the agents run inside this agent's runs apply (``inherited``), and the rule of what
      this agent applies of its own callers' when it runs inside another agent's run (known at run time);
    * the plan table (what ``print(agent.middleware_plan)`` shows) with a legend for its columns.

``render_timeline_html(source)`` draws one run on a time axis: each hook's (or model/tool call's) start and
duration as a bar, indented under the run it runs inside (a wrap hook's run contains the model call), and point
events as ticks; a failed run is red, an interrupted one (a pause for a human, not an error) striped amber.
``source`` is a :class:`TimelineRecorder` (a langchain-core callback handler that records the runs of an
invocation, no OpenTelemetry needed), finished OpenTelemetry spans (e.g. from
``InMemorySpanExporter.get_finished_spans()``), or the :class:`~middleware_kit.events.Event` objects of one run.
"""

from __future__ import annotations

import html
import itertools
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from middleware_kit.errors import MiddlewareError
from middleware_kit.otel import _hook_run, _is_interrupt
from middleware_kit.plan import MiddlewarePlan, PlannedHook

__all__ = [
    "TimelineItem",
    "TimelineRecorder",
    "VizError",
    "render_plan_html",
    "render_timeline_html",
    "write_plan_html",
    "write_timeline_html",
]

_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d8dde6}
.sub{color:#5b6475;margin:0 0 12px}
.flow{display:flex;flex-wrap:wrap;align-items:stretch;gap:8px}
.phase{border:1px solid #c9d2e0;border-radius:8px;padding:6px 8px;background:#f6f8fb;min-width:120px}
.phase h3{font-size:12px;margin:0 0 4px;color:#44506a;text-transform:uppercase;letter-spacing:.04em}
.hook{display:block;margin:2px 0;padding:2px 6px;border-radius:4px;background:#e3ecfb;
font-family:ui-monospace,monospace;font-size:12px}
.hook.thread{background:#fdeccd}.hook.loop{background:#e6dcf7}.hook.guard{background:#dff3f1}
.arrow{align-self:center;color:#8894a8;font-size:18px}
.layer{border:2px solid #4a72c4;border-radius:10px;padding:4px 8px 8px;margin:4px 0;background:rgba(74,114,196,.06)}
.layer>.label{font:12px ui-monospace,monospace;color:#2b4d91;margin-bottom:4px}
.core{border:2px dashed #2f8f5b;border-radius:8px;padding:6px 10px;background:#e7f6ee;font-weight:600;color:#1f6b43}
.lanes td{vertical-align:top}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #d8dde6;padding:3px 8px;text-align:left}
th{background:#eef2f8;font-weight:600}td.mono,span.mono{font-family:ui-monospace,monospace;font-size:12px}
dl.legend{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dl.legend dt{font-weight:600}
dl.legend dd{margin:0}
svg text{font:12px ui-monospace,monospace}
"""

_LEGEND: Final = (
    ("#", "Position in a run with one model call and one tool call."),
    ("hook", "The hook (before_agent, before_model, modify_model_request, wrap_model_call, after_model, before_tool, "
             "wrap_tool_call, after_tool, after_agent)."),
    ("middleware", "The middleware's name (first listed = outermost)."),
    ("defines", "The twins the middleware wrote: sync, async or sync+async; flow: a generator wrap hook, one body that "
                "runs directly under both invoke and ainvoke."),
    ("invoke", "How it runs under invoke/stream: direct, or loop (an async-only hook driven to completion)."),
    ("ainvoke", "How it runs under ainvoke/astream: direct, or thread (a sync-only hook run off the event loop)."),
    ("runs in", "The graph node (node hooks) or the chain (model chain, tool chain) it runs in."),
    ("own node", "yes: the hook has a node of its own (it may interrupt; resuming never re-runs its neighbours)."),
    ("jumps", "Where the hook may jump (jump_to): model, tools, end."),
)


_UNNAMED: Final = "LangGraph"
"""The name LangGraph gives a graph compiled without ``name=`` (and so ``create_agent`` an agent without one)."""


class VizError(MiddlewareError, TypeError):
    """``render_*`` was given something it cannot draw."""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


# -- the plan ----------------------------------------------------------------------------------------------------------
def _plan_and_graph(agent_or_plan: Any) -> tuple[MiddlewarePlan, Any]:
    if isinstance(agent_or_plan, MiddlewarePlan):
        return agent_or_plan, None
    plan = getattr(agent_or_plan, "middleware_plan", None)
    if not isinstance(plan, MiddlewarePlan):
        raise VizError(
            f"render_plan_html() needs an agent built by middleware_kit.create_agent (or its middleware_plan), "
            f"got {type(agent_or_plan).__name__}",
            middleware="render_plan_html",
            hook="agent_or_plan",
        )
    get_graph = getattr(agent_or_plan, "get_graph", None)
    return plan, get_graph() if callable(get_graph) else None


def _chip(hook: PlannedHook, label: str) -> str:
    bridged = "thread" if hook.under_ainvoke == "thread" else "loop" if hook.under_invoke == "loop" else ""
    title = f"defines {hook.defined}; invoke: {hook.under_invoke}; ainvoke: {hook.under_ainvoke}; in {hook.where}"
    return f'<span class="hook {bridged}" title="{_e(title)}">{_e(label)}</span>'


def _phase_box(title: str, hooks: Sequence[PlannedHook]) -> str:
    if not hooks:
        return ""
    chips = "".join(_chip(h, f"{h.middleware}.{h.phase}") for h in hooks)
    return f'<div class="phase"><h3>{_e(title)}</h3>{chips}</div>'


def _onion(layers: Sequence[str], core: str) -> str:
    inner = f'<div class="core">{_e(core)}</div>'
    for layer in reversed(layers):  # build inside-out, so the first (outermost) layer ends up outside
        inner = f'<div class="layer"><div class="label">{_e(layer)}</div>{inner}</div>'
    return inner


def _onion_section(plan: MiddlewarePlan) -> str:
    def of(phase: str) -> list[PlannedHook]:
        return [h for h in plan.hooks if h.phase == phase]

    modifiers = of("modify_model_request")
    model_core = "model call"
    if modifiers:
        model_core += " (after " + ", ".join(f"{h.middleware}.modify_model_request" for h in modifiers) + ")"
    wraps = [layer for layer in plan.model_chain if not layer.endswith(".modify_model_request")]
    parts = [
        _phase_box("before_agent", of("before_agent")),
        _phase_box("before_model", of("before_model")),
        '<div class="phase"><h3>model chain (outermost first)</h3>' + _onion(wraps, model_core) + "</div>",
        _phase_box("after_model", of("after_model")),
    ]
    if "tools" in plan.nodes:
        parts.append('<div class="phase"><h3>tool chain, per tool call</h3>' + _onion(plan.tool_chain, "tool")
                     + "</div>")
    parts.append(_phase_box("after_agent", of("after_agent")))
    flow = '<span class="arrow">&rarr;</span>'.join(p for p in parts if p)
    lanes = "".join(
        f'<tr><td class="mono">{_e(mw)}</td><td>'
        + "".join(_chip(h, h.phase) for h in plan.hooks if h.middleware == mw)
        + "".join(f'<span class="hook guard">{hook}</span>'
                  for owners, hook in ((plan.guards, "guard_messages"), (plan.resume_guards, "guard_resume"))
                  if mw in owners)
        + "</td></tr>"
        for mw in plan.middleware
    )
    return (
        "<h2>Onion: every hook in run order</h2>"
        '<p class="sub">A run goes left to right; the model call and each tool call go through their chain from the '
        "outermost layer in. Orange: a sync hook run in a thread under ainvoke; purple: an async hook driven in a "
        "loop under invoke.</p>"
        f'<div class="flow">{flow}</div>{_guards_section(plan)}'
        '<h2>Hooks per middleware</h2><table class="lanes"><tr><th>middleware</th><th>hooks (run order)</th></tr>'
        f"{lanes}</table>"
    )


def _guards_section(plan: MiddlewarePlan) -> str:
    """The guards (not steps of the run, so not in the onion): the same two lines as ``print(plan)`` shows."""
    rows = [
        (f"{g}.{hook}", when)
        for owners, hook, when in (
            (plan.guards, "guard_messages", "every messages write, before LangGraph commits it"),
            (plan.resume_guards, "guard_resume", "every Command(resume=...), before LangGraph stores it"),
        )
        for g in owners
    ]
    if not rows:
        return ""
    return ("<h2>Guards</h2><p class=\"sub\">Not steps of the run: they check every value written, in this order.</p>"
            "<table><tr><th>guard</th><th>runs on</th></tr>"
            + "".join(f'<tr><td class="mono">{_e(name)}</td><td>{_e(when)}</td></tr>' for name, when in rows)
            + "</table>")


def _graph_svg(graph: Any, plan: MiddlewarePlan) -> str:
    if graph is None:  # a bare plan: its nodes in run order
        names = ["__start__", *plan.nodes, "__end__"]
        edges = [(a, b, False) for a, b in itertools.pairwise(names)]
    else:
        names = list(graph.nodes)
        order = {n: i for i, n in enumerate(["__start__", *plan.nodes, "__end__"])}
        names.sort(key=lambda n: order.get(n, len(order)))
        edges = [(e.source, e.target, bool(e.conditional)) for e in graph.edges]
    row, box_h, left = 64, 32, 20
    box_w = max(220, 8 * max(len(n) for n in names) + 24)  # 12px monospace: about 7.3px per character
    y = {n: 16 + i * row for i, n in enumerate(names)}
    parts: list[str] = []
    arcs = 0
    for source, target, conditional in edges:
        if source not in y or target not in y:
            continue
        dash = ' stroke-dasharray="5 4"' if conditional else ""
        x_mid = left + box_w / 2
        if y[target] - y[source] == row:  # the next node down: a straight arrow
            parts.append(f'<line x1="{x_mid}" y1="{y[source] + box_h}" x2="{x_mid}" y2="{y[target]}" '
                         f'stroke="#56627a" marker-end="url(#arrow)"{dash}/>')
            continue
        arcs += 1
        x_out = left + box_w + 18 + arcs * 16
        y1, y2 = y[source] + box_h / 2, y[target] + box_h / 2
        if source == target:
            y1, y2 = y1 - 8, y1 + 8
        parts.append(f'<path d="M{left + box_w} {y1} C{x_out} {y1} {x_out} {y2} {left + box_w} {y2}" fill="none" '
                     f'stroke="#56627a" marker-end="url(#arrow)"{dash}/>')
    for n in names:
        fill = "#e7f6ee" if n in ("__start__", "__end__") else "#e3ecfb"
        parts.append(f'<rect x="{left}" y="{y[n]}" width="{box_w}" height="{box_h}" rx="6" fill="{fill}" '
                     f'stroke="#4a72c4"/><text x="{left + box_w / 2}" y="{y[n] + 20}" text-anchor="middle">'
                     f"{_e(n)}</text>")
    width = left + box_w + 40 + arcs * 16
    height = 16 + len(names) * row
    return (
        "<h2>Graph</h2>"
        '<p class="sub">Nodes top to bottom in run order; dashed edges are conditional (chosen at run time).</p>'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="graph of {_e(_agent_label(plan))}"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" '
        'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" '
        f'fill="#56627a"/></marker></defs>{"".join(parts)}</svg>'
    )


def _table(plan: MiddlewarePlan) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name, _ in _LEGEND)
    rows = "".join(
        "<tr>" + "".join(f'<td class="mono">{_e(cell)}</td>' for cell in (
            i, h.phase, h.middleware, h.defined, h.under_invoke, h.under_ainvoke, h.where,
            "yes" if h.own_node else "", ", ".join(h.can_jump_to),
        )) + "</tr>"
        for i, h in enumerate(plan.hooks, 1)
    )
    legend = "".join(f"<dt>{_e(name)}</dt><dd>{_e(text)}</dd>" for name, text in _LEGEND)
    return (f"<h2>Plan</h2><table><tr>{head}</tr>{rows}</table>"
            f'<h2>Legend</h2><dl class="legend">{legend}</dl>')


def _subagents_section(plan: MiddlewarePlan) -> str:
    """The inherited layers: what this agent hands to the agents run inside its runs, and what it applies of its
    callers' (the same two lines as ``print(plan)`` shows)."""
    handed = (
        "<table><tr><th>inherited layer</th><th>applied by</th></tr>"
        + "".join(f'<tr><td class="mono">{_e(name)}</td><td>every agent run inside this agent\'s runs, around its '
                  f"own stack (outermost caller first)</td></tr>" for name in plan.inherited)
        + "</table>"
        if plan.inherited else "<p>This agent hands no inherited middleware to the agents run inside its runs.</p>"
    )
    return ("<h2>Sub-agents</h2>"
            f'<p class="sub">This agent, {_e(plan.inherits)}.</p>'
            + handed)


def _agent_label(plan: MiddlewarePlan) -> str:
    """The agent's name; ``agent`` for an unnamed one (LangGraph names a graph built without ``name=`` "LangGraph",
    which tells a reader nothing)."""
    return "agent" if plan.name == _UNNAMED else plan.name


def render_plan_html(agent_or_plan: Any) -> str:
    """A self-contained HTML page (no network) of an agent's middleware plan: onion, graph, guards, table, legend."""
    plan, graph = _plan_and_graph(agent_or_plan)
    label = _agent_label(plan)
    unnamed = ' (unnamed: <span class="mono">create_agent(name=...)</span> titles it)' if plan.name == _UNNAMED else ""
    body = (
        f"<h1>Middleware plan of {_e(label)}</h1>"
        f'<p class="sub">{len(plan.middleware)} middleware(s){unnamed}, first listed = outermost: '
        + ", ".join(f'<span class="mono">{_e(m)}</span>' for m in plan.middleware)
        + "</p>"
        + _onion_section(plan)
        + _graph_svg(graph, plan)
        + _subagents_section(plan)
        + _table(plan)
    )
    return _page(f"middleware plan of {label}", body)


def write_plan_html(agent_or_plan: Any, path: str | Path) -> Path:
    """Write :func:`render_plan_html` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(render_plan_html(agent_or_plan), encoding="utf-8")
    return out


# -- the timeline of one run -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TimelineItem:
    """One bar (``end`` set) or tick (``end`` None) of the timeline; times in seconds since the epoch (the clock of
    ``Event.timestamp`` and of OpenTelemetry spans, so items from several sources can be drawn together)."""

    label: str
    lane: str
    start: float
    end: float | None = None
    failed: bool = False
    """The run raised (drawn red)."""
    interrupted: bool = False
    """The run paused at an ``interrupt()`` (human in the loop): not an error, drawn striped amber."""
    depth: int = 0
    """How many recorded runs it runs inside (0: the agent; a hook run inside a wrap hook's run is one deeper)."""


class TimelineRecorder(BaseCallbackHandler):
    """Records every langchain-core run of the invocations it is passed to (``config={"callbacks": [rec]}``).

    Each run becomes a :class:`TimelineItem`: hook runs (``"{middleware}.{hook}"``) on their middleware's lane,
    chat model calls on ``model``, tool calls on ``tools``, other runs (graph nodes) on ``graph``; its ``depth`` is
    one more than the run it runs inside (a wrap hook's run contains the next hook's run, which contains the model
    call). A run stopped by ``interrupt()`` is ``interrupted``, not ``failed``.
    """

    run_inline = True

    def __init__(self) -> None:
        self._open: dict[UUID, tuple[str, str, float, int]] = {}
        self._items: list[TimelineItem] = []
        self._lock = threading.Lock()

    @property
    def items(self) -> tuple[TimelineItem, ...]:
        with self._lock:
            return tuple(self._items)

    def _begin(self, run_id: UUID, label: str, lane: str, parent_run_id: UUID | None) -> None:
        with self._lock:
            parent = None if parent_run_id is None else self._open.get(parent_run_id)  # open: its children run now
            depth = 0 if parent is None else parent[3] + 1
            self._open[run_id] = (label, lane, time.time(), depth)

    def _close(self, run_id: UUID, error: BaseException | None = None) -> None:
        now = time.time()
        interrupted = error is not None and _is_interrupt(error)
        with self._lock:
            opened = self._open.pop(run_id, None)
            if opened is not None:
                label, lane, start, depth = opened
                self._items.append(TimelineItem(label, lane, start, now, error is not None and not interrupted,
                                                interrupted, depth))

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "chain")
        hook_run = _hook_run(name, kwargs.get("tags"), kwargs.get("metadata"))
        lane = "agent" if parent_run_id is None else hook_run[0] if hook_run is not None else "graph"
        self._begin(run_id, name, lane, parent_run_id)

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        label = str(kwargs.get("name") or (serialized or {}).get("name") or "chat model")
        self._begin(run_id, label, "model", parent_run_id)

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._begin(run_id, str(kwargs.get("name") or (serialized or {}).get("name") or "tool"), "tools",
                    parent_run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id, error)


def _event_item(event: Mapping[str, Any]) -> TimelineItem | None:
    stamp = getattr(event, "timestamp", None)
    if stamp is None:
        return None
    hook = getattr(event, "hook", None)
    who = event.get("middleware") or "framework"
    label = f"{event['event']}" + (f" ({who}.{hook})" if hook else "")
    return TimelineItem(label, str(who), float(stamp))


def _span_items(spans: Sequence[Any]) -> list[TimelineItem]:
    """OpenTelemetry ``ReadableSpan``s; a span's depth counts its ancestors among ``spans``."""
    parent_of = {span.context.span_id: getattr(span.parent, "span_id", None) for span in spans
                 if getattr(span, "context", None) is not None}

    def depth(span_id: Any) -> int:
        n, seen = 0, {span_id}
        while (span_id := parent_of.get(span_id)) in parent_of and span_id not in seen:
            n, seen = n + 1, seen | {span_id}
        return n

    items = []
    for span in spans:
        attributes: Mapping[str, Any] = getattr(span, "attributes", None) or {}
        lane = str(attributes.get("middleware_kit.middleware") or attributes.get("gen_ai.operation.name") or "span")
        end = getattr(span, "end_time", None)
        status = getattr(getattr(span, "status", None), "status_code", None)
        context = getattr(span, "context", None)
        items.append(TimelineItem(
            str(span.name), lane, span.start_time / 1e9, None if end is None else end / 1e9,
            failed=getattr(status, "name", "") == "ERROR",
            interrupted=bool(attributes.get("middleware_kit.interrupted")),
            depth=0 if context is None else depth(context.span_id),
        ))
    return items


def _items_of(source: Any) -> list[TimelineItem]:
    if isinstance(source, TimelineRecorder):
        return list(source.items)
    items: list[TimelineItem] = []
    spans: list[Any] = []
    for thing in source if isinstance(source, Iterable) else ():
        if isinstance(thing, TimelineItem):
            items.append(thing)
        elif isinstance(thing, Mapping) and "event" in thing:  # an Event (or a plain event dict with a timestamp)
            if (item := _event_item(thing)) is not None:
                items.append(item)
        elif hasattr(thing, "start_time") and hasattr(thing, "name"):  # an OpenTelemetry ReadableSpan
            spans.append(thing)
        else:
            raise VizError(
                f"render_timeline_html() cannot draw an object of type {type(thing).__name__}: pass a "
                "TimelineRecorder, finished OpenTelemetry spans, or the Event objects of one run",
                middleware="render_timeline_html",
                hook="source",
            )
    return items + _span_items(spans)


_LANE_COLORS: Final = ("#4a72c4", "#2f8f5b", "#8a4fc4", "#c45ab0", "#3a9fb0", "#6b7a8f")  # no amber: interrupts
_FAILED: Final = "#d13c3c"
_INTERRUPTED: Final = "#e0a100"
_STRIPES: Final = (  # the fill of an interrupted bar: amber stripes, a pause rather than a failure
    '<defs><pattern id="interrupted" width="8" height="8" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><path d="M0 0H8V8H0z" fill="#fff3cd"/><path d="M0 0V8" stroke="'
    + _INTERRUPTED + '" stroke-width="6"/></pattern></defs>'
)
_INDENT: Final = 14  # px per level of nesting in the label column
_PLOT_W: Final = 760  # px of the time axis
_CHAR: Final = 7.4  # px per character of 12px monospace


def _row(item: TimelineItem, y: float, t0: float, span: float, label_w: int, lane_color: str) -> str:
    """The label (indented by depth, never cut), the bar or dot, and the duration of one item."""
    plot_w = _PLOT_W
    x = label_w + (item.start - t0) / span * plot_w
    color = _FAILED if item.failed else lane_color
    duration = "" if item.end is None else f"{(item.end - item.start) * 1000:.2f} ms"
    state = " failed" if item.failed else " interrupted (paused, not an error)" if item.interrupted else ""
    tip = f"{item.label} [{item.lane}] +{(item.start - t0) * 1000:.2f} ms {duration}{state}".strip()
    x_text = x + 10
    if item.end is None:
        shape = f'<circle cx="{x:.1f}" cy="{y + 7}" r="5" fill="{color}"><title>{_e(tip)}</title></circle>'
    else:
        w = max((item.end - item.start) / span * plot_w, 2.0)
        x_text = x + w + 4
        if item.interrupted:
            shape = (f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="14" rx="3" fill="url(#interrupted)" '
                     f'stroke="{_INTERRUPTED}" class="interrupted"><title>{_e(tip)}</title></rect>')
            pause = x + w + 4  # a pause sign after the bar: two short vertical strokes
            shape += (f'<path d="M{pause:.1f} {y + 2}v10M{pause + 4:.1f} {y + 2}v10" stroke="{_INTERRUPTED}" '
                      'stroke-width="2.5"/>')
            x_text = pause + 10
            duration = f"{duration} interrupted"
        else:
            shape = (f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="14" rx="3" fill="{color}" opacity="0.85">'
                     f"<title>{_e(tip)}</title></rect>")
    indent = 4 + item.depth * _INDENT
    guides = "".join(f'<line x1="{8 + d * _INDENT}" y1="{y - 4}" x2="{8 + d * _INDENT}" y2="{y + 18}" '
                     'stroke="#d8dde6"/>' for d in range(item.depth))
    return (f'{guides}<text x="{indent}" y="{y + 11}">{_e(item.label)}</text>{shape}'
            f'<text x="{min(x_text, label_w + plot_w + 4):.1f}" y="{y + 11}" fill="#44506a" '
            f'font-size="10">{_e(duration)}</text>')


_KEY: Final = (  # the legend of the marks: (swatch CSS, meaning)
    ("background:#4a72c4;opacity:.85", "a run: start and duration (colour: its lane, below); indented under the "
                                       "run it runs inside (a wrap hook contains the next layer and the model call)"),
    (f"background:{_FAILED}", "failed: the run raised"),
    (f"background:repeating-linear-gradient(45deg,{_INTERRUPTED} 0 3px,#fff3cd 3px 6px);border:1px solid "
     f"{_INTERRUPTED}", "interrupted: paused at interrupt() for a human (not an error; the next run resumes)"),
    ("background:#4a72c4;border-radius:50%", "an event (emit() or a lifecycle event)"),
)


def _key() -> str:
    rows = "".join(f'<dt><span style="display:inline-block;width:22px;height:12px;border-radius:3px;{css}">'
                   f"</span></dt><dd>{_e(text)}</dd>" for css, text in _KEY)
    return f'<h2>Legend</h2><dl class="legend">{rows}</dl>'


def _nest_events(items: list[TimelineItem]) -> list[TimelineItem]:
    """An event (a tick at depth 0) goes one level under the innermost run of its lane (its middleware's hook run)
    that was open when it was sent, so it reads as sent from inside that hook."""
    bars = [i for i in items if i.end is not None]
    nested = []
    for item in items:
        if item.end is None and item.depth == 0:
            around = [b.depth for b in bars if b.lane == item.lane and b.start <= item.start <= (b.end or b.start)]
            if around:
                item = replace(item, depth=max(around) + 1)
        nested.append(item)
    return nested


def render_timeline_html(source: Any, *, title: str = "run timeline") -> str:
    """A self-contained HTML timeline of one run: a bar per run/span (start, duration; indented by nesting; red when
    it failed, striped amber when it was interrupted), a dot per event, and a legend."""
    items = sorted(_nest_events(_items_of(source)), key=lambda i: (i.start, -(i.end or i.start), i.depth))
    if not items:
        return _page(title, f"<h1>{_e(title)}</h1><p>Nothing was recorded.</p>")
    t0 = items[0].start
    t1 = max(max(i.end or i.start for i in items), t0 + 1e-6)
    span = t1 - t0
    lanes: list[str] = []
    for item in items:
        if item.lane not in lanes:
            lanes.append(item.lane)
    label_w = max(180, max(int(4 + i.depth * _INDENT + len(i.label) * _CHAR) + 16 for i in items))
    row = 22
    parts = [_row(item, 30 + n * row, t0, span, label_w, _LANE_COLORS[lanes.index(item.lane) % len(_LANE_COLORS)])
             for n, item in enumerate(items)]
    height = 40 + len(items) * row
    axis = (f'<line x1="{label_w}" y1="20" x2="{label_w + _PLOT_W}" y2="20" stroke="#8894a8"/>'
            f'<text x="{label_w}" y="14">0 ms</text>'
            f'<text x="{label_w + _PLOT_W}" y="14" text-anchor="end">{span * 1000:.2f} ms</text>')
    legend = "".join(f"<tr><td class=\"mono\">{_e(lane)}</td><td>{sum(1 for i in items if i.lane == lane)}</td></tr>"
                     for lane in lanes)
    interrupted = sum(1 for i in items if i.interrupted)
    body = (
        f"<h1>{_e(title)}</h1>"
        f'<p class="sub">{len(items)} item(s) over {span * 1000:.2f} ms'
        + (f", {interrupted} interrupted (paused for a human)" if interrupted else "")
        + f'.</p><svg xmlns="http://www.w3.org/2000/svg" width="{label_w + _PLOT_W + 150}" height="{height}" '
        f'role="img" aria-label="{_e(title)}">{_STRIPES}{axis}{"".join(parts)}</svg>'
        f"{_key()}<h2>Lanes</h2><table><tr><th>lane</th><th>items</th></tr>{legend}</table>"
    )
    return _page(title, body)


def write_timeline_html(source: Any, path: str | Path, *, title: str = "run timeline") -> Path:
    """Write :func:`render_timeline_html` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(render_timeline_html(source, title=title), encoding="utf-8")
    return out
