"""The offline pictures: the HTML plan (onion, graph, table, legend) and the timeline of one run."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, ModelRequest, create_agent
from middleware_kit.events import emit
from middleware_kit.hooks import ModelHandler
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.middlewares.todo_list import TodoListMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.viz import (
    TimelineItem,
    TimelineRecorder,
    VizError,
    render_plan_html,
    render_timeline_html,
    write_plan_html,
    write_timeline_html,
)
from tests.conftest import add


class Audit(AgentMiddleware):
    """Node hooks in both twins, a model wrapper, a tool wrapper: many rows in the plan."""

    def __init__(self, name: str) -> None:
        self.name = name

    def before_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        emit("audit_start", middleware=self.name, hook=None, runtime=runtime)

    def after_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        return None

    async def aafter_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        return None

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


def build(*names: str) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"], cycle=True)
    middleware: list[Any] = [Audit(n) for n in names]
    middleware.insert(1, ModelRetryMiddleware())
    middleware.append(TodoListMiddleware())
    return create_agent(model, [add], middleware=middleware, name="audited")


def test_the_plan_page_shows_every_middleware_and_hook() -> None:
    agent = build("outer", "inner")
    page = render_plan_html(agent)
    plan = agent.middleware_plan
    for name in plan.middleware:
        assert name in page
    for name in plan.middleware:  # its row lists every hook it has, in run order
        row = page[page.index(f'<tr><td class="mono">{name}</td>'):]
        row = row[:row.index("</tr>")]
        chips = [h.phase for h in plan.hooks if h.middleware == name]
        positions = [row.index(f">{phase}</span>") for phase in chips]
        assert positions == sorted(positions) and chips
    for hook in plan.hooks:
        if hook.where not in ("model chain", "tool chain"):
            assert f">{hook.middleware}.{hook.phase}</span>" in page
    for layer in (*plan.model_chain, *plan.tool_chain):
        assert f'<div class="label">{layer}</div>' in page
    # the onion nests outermost first: outer's wrapper box opens before Retry's, which opens before inner's
    order = [page.index(f'<div class="label">{layer}</div>') for layer in plan.model_chain
             if layer.endswith("wrap_model_call")]
    assert order == sorted(order) and len(order) == 4  # outer, ModelRetryMiddleware, inner, TodoListMiddleware
    for node in ("__start__", "model", "tools", "__end__", *plan.nodes):
        assert f">{node}</text>" in page
    for column in ("defines", "invoke", "ainvoke", "runs in", "own node"):
        assert f"<dt>{column}</dt>" in page


def test_the_plan_page_needs_no_network_and_escapes_names() -> None:
    page = render_plan_html(build("<b>x&y</b>", "inner"))
    assert "<b>x&y</b>" not in page and "&lt;b&gt;x&amp;y&lt;/b&gt;" in page
    lowered = page.lower()
    assert "<script" not in lowered and "<link" not in lowered and "src=" not in lowered and "@import" not in lowered
    assert lowered.count("http") == lowered.count('xmlns="http://www.w3.org/2000/svg"')  # a namespace, never fetched


def test_a_bare_plan_renders_too_and_anything_else_is_refused(tmp_path: Path) -> None:
    plan = build("solo", "other").middleware_plan
    page = render_plan_html(plan)
    assert "solo.before_agent" in page and ">model</text>" in page
    path = write_plan_html(plan, tmp_path / "plan.html")
    assert path.read_text(encoding="utf-8") == page
    with pytest.raises(VizError, match="create_agent") as info:
        render_plan_html(object())
    assert info.value.hook == "agent_or_plan"


class Guarded(AgentMiddleware):
    """Guards both what is written to messages and every resume value."""

    def __init__(self, name: str) -> None:
        self.name = name

    def guard_messages(self, messages: Any, runtime: Runtime[Any] | None) -> None:
        return None

    def guard_resume(self, value: Any, runtime: Runtime[Any] | None) -> None:
        return None


class ResumeOnly(AgentMiddleware):
    def guard_resume(self, value: Any, runtime: Runtime[Any] | None) -> None:
        return None


def test_the_plan_page_lists_the_guards_as_the_text_plan_does() -> None:
    agent: Any = create_agent(ScriptedChatModel(["ok"]), middleware=[Guarded("scrub"), ResumeOnly()])
    plan = agent.middleware_plan
    assert plan.resume_guards == ("scrub", "ResumeOnly") and plan.guards == ("scrub",)
    page = render_plan_html(agent)
    section = page[page.index("<h2>Guards</h2>"):]
    section = section[:section.index("</table>")]
    rows = [f"{g}.guard_messages" for g in plan.guards] + [f"{g}.guard_resume" for g in plan.resume_guards]
    positions = [section.index(f'<td class="mono">{row}</td>') for row in rows]
    assert positions == sorted(positions)  # in the order they run, as print(plan) lists them
    assert "every Command(resume=...), before LangGraph stores it" in section
    lane = page[page.index('<tr><td class="mono">ResumeOnly</td>'):]
    assert lane[:lane.index("</tr>")].count(">guard_resume</span>") == 1
    assert "<h2>Guards</h2>" not in render_plan_html(build("a", "b"))  # no guard, no section


def test_the_plan_page_of_an_unnamed_agent_is_titled_agent() -> None:
    unnamed = render_plan_html(create_agent(ScriptedChatModel(["ok"]), middleware=[ResumeOnly()]))
    assert "<title>middleware plan of agent</title>" in unnamed and "<h1>Middleware plan of agent</h1>" in unnamed
    assert "of LangGraph" not in unnamed and "create_agent(name=...)" in unnamed
    named = render_plan_html(build("a", "b"))
    assert "<h1>Middleware plan of audited</h1>" in named and "unnamed" not in named


def run_recorded(agent: Any, mode: str, recorder: TimelineRecorder) -> list[Any]:
    inp = {"messages": [HumanMessage("1+2?")]}
    config: Any = {"callbacks": [recorder]}
    if mode == "invoke":
        return list(agent.stream(inp, config, stream_mode="custom"))

    async def collect() -> list[Any]:
        return [e async for e in agent.astream(inp, config, stream_mode="custom")]

    return asyncio.run(collect())


def test_timeline_of_one_run(mode: str, tmp_path: Path) -> None:
    recorder = TimelineRecorder()
    events = run_recorded(build("outer", "inner"), mode, recorder)
    items = recorder.items
    assert [i.lane for i in items].count("model") == 2 and [i.lane for i in items].count("tools") == 1
    (root,) = [i for i in items if i.lane == "agent"]
    assert all(root.start <= i.start and i.end is not None and i.end <= (root.end or 0) for i in items)
    page = render_timeline_html([*items, *events], title="one run")
    assert page.count("<rect") == len(items) and page.count("<circle") == len(events) == 2
    assert "audit_start (outer.before_agent)" in page and ">add</text>" in page
    (hook,) = [i for i in items if i.label == "outer.before_agent"]  # the event is drawn inside the hook that sent it
    before = page.split(">audit_start (outer.before_agent)</text>")[0]
    assert f'<text x="{4 + 14 * (hook.depth + 1)}" y="' in before[-40:]
    assert write_timeline_html(recorder, tmp_path / "t.html").read_text(encoding="utf-8").count("<rect") == len(items)


def test_timeline_from_spans_and_bad_input() -> None:
    if importlib.util.find_spec("opentelemetry.sdk") is None and os.environ.get("CI") != "true":
        pytest.skip("the otel extra is not installed (pip install -e '.[otel]')")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from middleware_kit.otel import OpenTelemetryCallbackHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build("a", "b").invoke({"messages": [HumanMessage("1+2?")]},
                           {"callbacks": [OpenTelemetryCallbackHandler(tracer_provider=provider)]})
    spans = exporter.get_finished_spans()
    page = render_timeline_html(spans)
    assert page.count("<rect") == len(spans) and "execute_tool add" in page and "chat scripted" in page
    names = [span.name for span in spans]
    assert len([n for n in names if " " in n]) == 4  # the agent, two chat calls, one tool call
    assert "ModelRetryMiddleware.wrap_model_call" in names and "a.before_agent" in page  # and every hook run
    assert "Nothing was recorded" in render_timeline_html([])
    assert render_timeline_html([TimelineItem("x", "lane", 1.0, 1.5, failed=True)]).count('fill="#d13c3c"') == 1
    with pytest.raises(VizError, match="cannot draw an object of type int: pass a TimelineRecorder, finished "):
        render_timeline_html([1])


# -- the timeline reads as a user expects: whole labels, interrupts as pauses, nesting --------------------------------
def review_agent() -> Any:
    """A wrap hook around the model call and a human review of the tool call (an interrupt in after_model)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from middleware_kit import wrap_model_call
    from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware

    @wrap_model_call
    def timing(request: ModelRequest[Any], handler: ModelHandler) -> Any:
        return handler(request)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    return create_agent(model, [add], middleware=[timing, HumanInTheLoopMiddleware(interrupt_on={"add": True})],
                        checkpointer=InMemorySaver())


def test_the_timeline_draws_an_interrupt_as_a_pause_with_whole_labels_and_nesting(run: Any) -> None:
    recorder = TimelineRecorder()
    out = run(review_agent(), {"messages": [HumanMessage("1+2?")]},
              config={"callbacks": [recorder], "configurable": {"thread_id": "t"}})
    assert out["__interrupt__"]
    items = recorder.items
    review = [i for i in items if i.label == "HumanInTheLoopMiddleware.after_model"]
    assert review and all(i.interrupted and not i.failed for i in review)  # a pause, not a failure
    assert not any(i.failed for i in items)
    page = render_timeline_html(recorder)
    assert 'fill="#d13c3c"' not in page  # nothing drawn red
    assert page.count('fill="url(#interrupted)"') == len(review) and f"{len(review)} interrupted (paused" in page
    assert "interrupted: paused at interrupt() for a human (not an error" in page  # its own legend entry
    assert ">HumanInTheLoopMiddleware.after_model</text>" in page  # the label is whole: the hook is not lost
    assert ">HumanInTheLoopMiddleware.wrap_model_call</text>" in page
    # nesting: the agent contains the model node, which contains timing's run, which contains HITL's, which
    # contains the model call; each is one level deeper and indented 14px more
    depth = {i.label: i.depth for i in items}
    chain = ["LangGraph", "model", "timing.wrap_model_call", "HumanInTheLoopMiddleware.wrap_model_call",
             "ScriptedChatModel"]
    assert [depth[label] for label in chain] == [0, 1, 2, 3, 4]
    for label in chain:
        assert f'<text x="{4 + 14 * depth[label]}" y="' in page.split(f">{label}</text>")[0][-40:]


def test_the_timeline_label_column_fits_the_longest_label() -> None:
    long = "AVeryLongMiddlewareNameIndeed.wrap_model_call"
    page = render_timeline_html([TimelineItem("agent", "agent", 1.0, 2.0),
                                 TimelineItem(long, "x", 1.1, 1.9, depth=3)])
    assert f">{long}</text>" in page
    bar = page[page.index(f">{long}</text>"):]
    x = float(bar[bar.index('<rect x="') + 9:].split('"')[0])
    assert x >= 4 + 3 * 14 + 7 * len(long)  # the bar starts after the label, never over it


def test_the_timeline_of_spans_keeps_interrupts_and_nesting() -> None:
    if importlib.util.find_spec("opentelemetry.sdk") is None and os.environ.get("CI") != "true":
        pytest.skip("the otel extra is not installed (pip install -e '.[otel]')")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from middleware_kit.otel import OpenTelemetryCallbackHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = OpenTelemetryCallbackHandler(tracer_provider=provider)
    review_agent().invoke({"messages": [HumanMessage("1+2?")]},
                          {"callbacks": [handler], "configurable": {"thread_id": "t"}})
    spans = exporter.get_finished_spans()
    page = render_timeline_html(spans)
    assert 'fill="url(#interrupted)"' in page and 'fill="#d13c3c"' not in page
    by_name = {span.name: span for span in spans}
    assert {"timing.wrap_model_call", "HumanInTheLoopMiddleware.wrap_model_call"} <= set(by_name)
    outer, inner = (page.split(f">{name}</text>")[0][-40:] for name in ("timing.wrap_model_call",
                                                                         "HumanInTheLoopMiddleware.wrap_model_call"))
    x_of = [int(part[part.rindex('<text x="') + 9:].split('"')[0]) for part in (outer, inner)]
    assert x_of[1] == x_of[0] + 14  # the inner wrap hook is indented under the outer one


# -- in a real browser -------------------------------------------------------------------------------------------
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    reason = "no chromium binary (apt-get install -y chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must render the page in a browser: {reason}")
    pytest.skip(reason)


def png_rows(data: bytes, max_rows: int) -> tuple[int, list[bytes]]:
    """The first ``max_rows`` unfiltered scanlines of an 8-bit RGB/RGBA, non-interlaced PNG, and its bytes/pixel."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for r in range(min(height, max_rows)):
        kind, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return bpp, rows


def test_the_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = chromium()
    agent = build("outer", "inner")
    page = write_plan_html(agent, tmp_path / "plan.html")
    shot = tmp_path / "plan.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=900,500", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    bpp, rows = png_rows(shot.read_bytes(), max_rows=500)
    colors = {row[i:i + 3] for row in rows[::4] for i in range(0, len(row), bpp * 4)}
    white = sum(1 for row in rows for i in range(0, len(row), bpp) if row[i:i + 3] == b"\xff\xff\xff")
    total = len(rows) * (len(rows[0]) // bpp)
    assert len(colors) > 20, "the screenshot is blank"
    assert white < 0.97 * total
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], check=True, capture_output=True,
                         timeout=120, text=True).stdout
    for name in agent.middleware_plan.middleware:
        assert name in dom


def test_the_timeline_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = chromium()
    recorder = TimelineRecorder()
    review_agent().invoke({"messages": [HumanMessage("1+2?")]},
                          {"callbacks": [recorder], "configurable": {"thread_id": "t"}})
    page = write_timeline_html(recorder, tmp_path / "timeline.html")
    shot = tmp_path / "timeline.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1400,700", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    bpp, rows = png_rows(shot.read_bytes(), max_rows=700)
    pixels = [row[i:i + 3] for row in rows for i in range(0, len(row), bpp)]

    def near(rgb: tuple[int, int, int]) -> int:
        return sum(1 for p in pixels if all(abs(p[c] - rgb[c]) <= 12 for c in range(3)))

    assert near((0xE0, 0xA1, 0x00)) > 50, "the interrupted bars are not drawn amber"
    assert near((0xD1, 0x3C, 0x3C)) <= 22 * 12, "something is drawn red, but nothing failed"  # the legend swatch
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], check=True, capture_output=True,
                         timeout=120, text=True).stdout
    assert "HumanInTheLoopMiddleware.after_model" in dom and "interrupted: paused at interrupt()" in dom
