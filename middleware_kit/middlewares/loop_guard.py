"""``LoopGuardMiddleware``: stop runaway tool loops before they burn the budget or hit the recursion limit.

It watches every model answer (``wrap_model_call``) for four patterns, within one run:

- **repeats**: the same tool called with the same arguments more than ``max_identical_calls`` times;
- **unknown tools**: a call to a tool that was not offered to the model (or was removed by this guard);
- **A-B oscillation**: two different calls alternating (``A B A B``) for ``oscillation_cycles`` cycles;
- **no progress**: ``no_progress_turns`` consecutive tool turns whose every result was already seen in this run.

Each detection is an *offense*; the n-th offense of a run takes the n-th step of ``actions`` (the last step repeats):

1. ``"nudge"``: the offending call is not run; its ``ToolMessage`` (status ``error``) tells the model what it did and
   what to do instead (for no progress, a note is added to the next model call only);
2. ``"remove_tool"``: the offending tool is also taken away for the rest of the run (kept in state);
3. ``"final_answer"``: the next model call gets no tools and an instruction to answer now.

Independently, when the run gets within ``steps_to_spare`` graph steps of its recursion limit (read from the run's
config: ``recursion_limit``), the model call is turned into a final-answer call, so the user gets an answer instead of
LangGraph's ``GraphRecursionError``. A forced final answer that still asks for tools has its calls dropped (they never
reach state, so nothing dangles) and ends the run. Every step writes an event to the custom stream.

Everything happens in the model call's own step (the answers are returned with the model's message, like structured
output's), so a refused call never reaches the tool node.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langgraph.types import Command

from middleware_kit._engine.compat import DEFAULT_RECURSION_LIMIT, task_steps
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import BOOL, INT_AT_LEAST_1, NON_EMPTY_STR, WITHOUT_VALUE, Config, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState, ExtendedModelResponse, ModelRequest, ModelResponse, PrivateStateAttr

__all__ = [
    "DEFAULT_FINAL_PROMPT",
    "FALLBACK_ANSWER",
    "LoopAction",
    "LoopGuardMiddleware",
    "LoopGuardState",
]

LoopAction = Literal["nudge", "remove_tool", "final_answer"]
_ACTIONS: tuple[str, ...] = ("nudge", "remove_tool", "final_answer")

DEFAULT_FINAL_PROMPT = (
    "Stop calling tools now. Using only the information you already have, give your final answer to the user. If "
    "you could not finish the task, say what you found and what is missing."
)
FALLBACK_ANSWER = "I could not finish this task within the allowed steps."
"""The answer of a forced final call whose model still asked for tools and said nothing."""


def _newest(current: Any, new: Any) -> Any:
    return new


class LoopGuardState(AgentState):
    """State of :class:`LoopGuardMiddleware` (private): the run's call counts, recent calls, seen results, offense
    count, removed tools and whether the next call must be a final answer."""

    loop_guard: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, _newest]]


def _signature(call: ToolCall) -> str:
    args = json.dumps(call.get("args") or {}, sort_keys=True, default=str)
    return f"{call['name']}:{hashlib.sha1(args.encode()).hexdigest()[:16]}"


def _digest(message: ToolMessage) -> str:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content, default=str)
    return hashlib.sha1(f"{message.name}\x00{content}".encode()).hexdigest()[:16]


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, Mapping):
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else tool.get("name")
        return str(name) if name else None
    name = getattr(tool, "name", None)
    return str(name) if name else None


@dataclass(frozen=True, slots=True)
class _Offense:
    kind: str
    call: ToolCall | None
    detail: str


class LoopGuardMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware[LoopGuardState, Any]):
    """Detect tool loops (repeats, unknown tools, A-B oscillation, no progress) and act in steps: nudge, remove the
    tool, force a final answer; force the final answer before the recursion limit too.

    Args:
        max_identical_calls: How many times one tool may be called with the same arguments in a run (default 2);
            the next identical call is an offense.
        oscillation_cycles: ``A B`` alternating this many times (default 2: ``A B A B``) is an offense; None: off.
        no_progress_turns: This many consecutive tool turns returning only results already seen in the run (default
            3) is an offense; None: off.
        detect_unknown_tools: A call to a tool not offered to the model is an offense (default True).
        actions: The step taken at the 1st, 2nd, ... offense of a run (the last repeats). Default
            ``("nudge", "remove_tool", "final_answer")``.
        steps_to_spare: Force the final answer when fewer than this many graph steps are left before the run's
            recursion limit (default 4: a tools step, a model step and two nodes after the model; raise it when
            ``agent.middleware_plan.nodes`` shows more nodes in the loop). None: off.
        final_prompt: The instruction added to a forced final-answer call.
    """

    state_schema = LoopGuardState
    __config__ = Config(
        max_identical_calls=INT_AT_LEAST_1,
        oscillation_cycles=INT_AT_LEAST_1.or_none(),
        no_progress_turns=INT_AT_LEAST_1.or_none(),
        steps_to_spare=INT_AT_LEAST_1.or_none(),
        detect_unknown_tools=BOOL,
        actions=rule(
            lambda v: not isinstance(v, str) and isinstance(v, Sequence) and bool(v) and all(a in _ACTIONS for a in v),
            f"a non-empty sequence of {list(_ACTIONS)}",
        ),
        final_prompt=NON_EMPTY_STR.saying(template=WITHOUT_VALUE),
    )

    def __init__(
        self,
        *,
        max_identical_calls: int = 2,
        oscillation_cycles: int | None = 2,
        no_progress_turns: int | None = 3,
        detect_unknown_tools: bool = True,
        actions: Sequence[LoopAction] = ("nudge", "remove_tool", "final_answer"),
        steps_to_spare: int | None = 4,
        final_prompt: str = DEFAULT_FINAL_PROMPT,
    ) -> None:
        self.max_identical_calls = max_identical_calls
        self.oscillation_cycles = oscillation_cycles
        self.no_progress_turns = no_progress_turns
        self.detect_unknown_tools = detect_unknown_tools
        self.actions: tuple[LoopAction, ...] = tuple(actions)
        self.steps_to_spare = steps_to_spare
        self.final_prompt = final_prompt

    # -- state -----------------------------------------------------------------------------------------------
    @staticmethod
    def _book(state: Mapping[str, Any] | None) -> dict[str, Any]:
        book = dict((state or {}).get("loop_guard") or {})
        book["counts"] = dict(book.get("counts") or {})
        book["trail"] = list(book.get("trail") or [])
        book["results"] = list(book.get("results") or [])
        book["removed"] = list(book.get("removed") or [])
        book.setdefault("offenses", 0)
        book.setdefault("stale", 0)
        book.setdefault("final", None)
        book.setdefault("seen_turn", None)
        return book

    def before_agent(self, state: LoopGuardState, runtime: Any) -> dict[str, Any]:
        return {"loop_guard": {}}

    async def abefore_agent(self, state: LoopGuardState, runtime: Any) -> dict[str, Any]:
        return self.before_agent(state, runtime)

    # -- before the call -------------------------------------------------------------------------------------
    def _steps_left(self) -> int | None:
        """How many more graph steps this invocation may take after the current one and still finish."""
        if self.steps_to_spare is None:
            return None
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # a hook called outside a graph
            return None
        # LangGraph stops a run whose next step would be its `stop` (the invocation's first step + its recursion
        # limit); the task's scratchpad holds both (a resumed run counts from where it resumed).
        steps = task_steps(config.get("configurable") or {})
        if steps is not None:
            step, stop = steps
            return stop - step - 1
        limit = config.get("recursion_limit")  # pragma: no cover - a LangGraph without the scratchpad
        meta = (config.get("metadata") or {}).get("langgraph_step")  # pragma: no cover
        if meta is None:  # pragma: no cover
            return None
        return int(limit if limit is not None else _default_recursion_limit()) - int(meta) - 1  # pragma: no cover

    def _progress(self, request: ModelRequest[Any], book: dict[str, Any]) -> _Offense | None:
        """Fold the newest tool turn's results into the run's seen results; an offense after N stale turns."""
        messages = request.messages
        results: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results.append(message)
        if not results or not isinstance(messages[-len(results) - 1], AIMessage):
            return None
        turn = messages[-len(results) - 1].id or str(len(messages))
        if book["seen_turn"] == turn:  # this turn was folded in already (a retried call)
            return None
        book["seen_turn"] = turn
        seen = set(book["results"])
        digests = [_digest(m) for m in results if m.status != "error" or not _is_ours(m)]
        if not digests:
            return None
        fresh = [d for d in digests if d not in seen]
        book["results"] = [*book["results"], *fresh]
        book["stale"] = 0 if fresh else int(book["stale"]) + 1
        if self.no_progress_turns is not None and book["stale"] >= self.no_progress_turns:
            book["stale"] = 0
            tools = sorted({str(m.name) for m in results if m.name})
            return _Offense("no_progress", None, ", ".join(tools))
        return None

    def _prepare(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], dict[str, Any], str | None]:
        """The request to send, the updated book, and why the call is a final-answer call (None: it is not)."""
        book = self._book(request.state)
        runtime = request.runtime
        extra: list[AnyMessage] = []
        offense = self._progress(request, book)
        if offense is not None:
            action = self._escalate(book)
            tools = [t for t in offense.detail.split(", ") if t]
            emit(runtime, {"event": "loop_detected", "middleware": self.name, "kind": "no_progress",
                           "tools": tools, "turns": self.no_progress_turns, "action": action,
                           "offense": book["offenses"]})
            if action == "remove_tool":
                self._remove(book, tools, runtime, "no_progress")
            if action == "final_answer":
                book["final"] = "no_progress"
            else:
                extra.append(HumanMessage(
                    f"[loop guard] Your last {self.no_progress_turns} tool turns returned nothing new. Change your "
                    f"approach or give your final answer.", name="loop_guard"))
        left = self._steps_left()
        spare = self.steps_to_spare
        if book["final"] is None and left is not None and spare is not None and left < spare:
            book["final"] = "recursion_limit"
        final = book["final"]
        if final is not None:
            emit(runtime, {"event": "loop_guard_final_answer", "middleware": self.name, "reason": final,
                           "steps_left": left})
            return request.override(messages=(*request.messages, *extra, HumanMessage(self.final_prompt,
                                                                                      name="loop_guard")),
                                    tools=(), tool_choice=None), book, final
        removed = set(book["removed"])
        offered = tuple(t for t in request.tools if _tool_name(t) not in removed) if removed else request.tools
        if extra or offered != request.tools:
            request = request.override(messages=(*request.messages, *extra), tools=offered)
        return request, book, None

    # -- after the call --------------------------------------------------------------------------------------
    def _escalate(self, book: dict[str, Any]) -> LoopAction:
        offenses = int(book["offenses"]) + 1
        book["offenses"] = offenses
        return self.actions[min(offenses, len(self.actions)) - 1]

    def _remove(self, book: dict[str, Any], tools: Sequence[str], runtime: Any, kind: str) -> None:
        for name in tools:
            if name not in book["removed"]:
                book["removed"] = [*book["removed"], name]
                emit(runtime, {"event": "loop_guard_tool_removed", "middleware": self.name, "tool": name,
                               "kind": kind})

    def _offense_of(self, call: ToolCall, offered: set[str], book: dict[str, Any]) -> _Offense | None:
        name = call["name"]
        if self.detect_unknown_tools and name not in offered:
            removed = name in book["removed"]
            why = "was removed for the rest of this run" if removed else "does not exist"
            tools = ", ".join(sorted(offered)) or "none"
            return _Offense("unknown_tool", call, f"The tool '{name}' {why}. Available tools: {tools}.")
        sig = _signature(call)
        count = int(book["counts"].get(sig, 0)) + 1
        book["counts"][sig] = count
        trail = [*book["trail"], sig]
        book["trail"] = trail[-(2 * (self.oscillation_cycles or 1)) :]
        if count > self.max_identical_calls:
            return _Offense("repeat", call, f"You already called '{name}' with these exact arguments {count - 1} "
                                            f"time(s) in this run; the result will not change. Use the result you "
                                            f"have, try something different, or give your final answer.")
        cycles = self.oscillation_cycles
        if cycles is not None and len(trail) >= 2 * cycles:
            window = trail[-2 * cycles :]
            a, b = window[0], window[1]
            if a != b and all(s == (a if i % 2 == 0 else b) for i, s in enumerate(window)):
                book["trail"] = []
                return _Offense("oscillation", call, f"You are alternating between the same two tool calls "
                                                     f"({cycles} times) without getting anywhere. Stop and try a "
                                                     f"different approach, or give your final answer.")
        return None

    def _review(
        self, request: ModelRequest[Any], sent: ModelRequest[Any], response: ModelResponse[Any],
        book: dict[str, Any], final: str | None,
    ) -> ExtendedModelResponse[Any]:
        runtime = request.runtime
        result = list(response.result)
        index = next((i for i in range(len(result) - 1, -1, -1) if isinstance(result[i], AIMessage)), None)
        answered = {m.tool_call_id for m in result if isinstance(m, ToolMessage)}
        message = result[index] if index is not None else None
        calls = [c for c in message.tool_calls if c["id"] not in answered] if isinstance(message, AIMessage) else []
        if final is not None:
            if isinstance(message, AIMessage) and message.tool_calls and index is not None:
                # The model asked for tools on a final-answer call: drop them (they never reach state) and end.
                text = message.text.strip() or FALLBACK_ANSWER
                result[index] = AIMessage(content=text, id=message.id, name=message.name,
                                          response_metadata=message.response_metadata,
                                          usage_metadata=message.usage_metadata)
                emit(runtime, {"event": "loop_guard_tool_calls_dropped", "middleware": self.name,
                               "tools": [c["name"] for c in message.tool_calls], "reason": final})
            book["final"] = None
            return self._respond(response, result, book)
        offered = {n for n in (_tool_name(t) for t in sent.tools) if n}
        answers: list[ToolMessage] = []
        for call in calls:
            offense = self._offense_of(call, offered, book)
            if offense is None:
                continue
            action = self._escalate(book)
            emit(runtime, {"event": "loop_detected", "middleware": self.name, "kind": offense.kind,
                           "tool": call["name"], "args": call.get("args") or {}, "action": action,
                           "offense": book["offenses"]})
            text = offense.detail
            if action == "remove_tool" and offense.kind != "unknown_tool":
                self._remove(book, [call["name"]], runtime, offense.kind)
                text += f" The tool '{call['name']}' is no longer available in this run."
            if action == "final_answer":
                book["final"] = offense.kind
                text += " No more tools: give your final answer now."
            answers.append(ToolMessage(content=f"[loop guard] {text}", tool_call_id=call["id"] or "",
                                       name=call["name"], status="error",
                                       response_metadata={"loop_guard": offense.kind}))
        if book["final"] is not None and answers:
            refused = {a.tool_call_id for a in answers}
            answers.extend(
                ToolMessage(content=f"Tool call '{c['name']}' was not executed: the loop guard asked for a final "
                                    f"answer.", tool_call_id=c["id"] or "", name=c["name"], status="error",
                            response_metadata={"loop_guard": "final_answer"})
                for c in calls if c["id"] not in refused
            )
        if answers and index is not None:
            order = {c["id"]: i for i, c in enumerate(calls)}
            answers.sort(key=lambda a: order.get(a.tool_call_id, 0))
            j = index + 1
            while j < len(result) and isinstance(result[j], ToolMessage):
                j += 1
            result[j:j] = answers
        return self._respond(response, result, book)

    @staticmethod
    def _respond(
        response: ModelResponse[Any], result: list[BaseMessage], book: dict[str, Any]
    ) -> ExtendedModelResponse[Any]:
        if result != list(response.result):
            response = ModelResponse(result=result, structured_response=response.structured_response)
        return ExtendedModelResponse(model_response=response, command=Command(update={"loop_guard": book}))

    # -- the hooks -------------------------------------------------------------------------------------------
    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """A flow hook (one body for invoke and ainvoke): adjust the request, call the model, review its answer."""
        sent, book, final = self._prepare(request)
        response = yield sent
        return self._review(request, sent, response, book, final)


def _default_recursion_limit() -> int:
    """LangGraph's limit when the run's config sets none (it is not in the nodes' config then)."""
    return int(DEFAULT_RECURSION_LIMIT)


def _is_ours(message: ToolMessage) -> bool:
    return bool((message.response_metadata or {}).get("loop_guard"))
