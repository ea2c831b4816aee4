"""``ModelCallLimitMiddleware`` and ``ToolCallLimitMiddleware``: cap model and tool calls per thread and per run.

Counts live in state, so the middlewares are stateless and the limits hold across processes: *thread* counts are
checkpointed with the thread and persist across invocations; *run* counts are reset by ``before_agent`` at the
start of each invocation (not on resume: a resumed run is the same run). Without a checkpointer every invocation is
a new thread, so thread and run limits coincide.

Ending early keeps the tool-call pairing guarantee: every call of the last ``AIMessage`` gets a ``ToolMessage``
before the run ends.

Model calls are counted in ``after_model`` (LangChain's hook, so calling it directly does LangChain's work), once
per model call: several ``ModelCallLimitMiddleware`` instances share the counts, and the first whose ``after_model``
sees an answer counts it (``model_call_counted`` records its id). Each ``ToolCallLimitMiddleware`` counts under its
own tool name (``"__all__"`` without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, TypeAlias

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langgraph.runtime import Runtime

from middleware_kit._engine.pairing import last_ai_index
from middleware_kit.decorators import hook_config
from middleware_kit.errors import MiddlewareError
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import INT_AT_LEAST_0, NON_EMPTY_NAME, Config, Rule, config_error, one_of
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.types import AgentState, PrivateStateAttr

__all__ = [
    "ExitBehavior",
    "ModelCallLimitExceededError",
    "ModelCallLimitMiddleware",
    "ModelCallLimitState",
    "ToolCallLimitExceededError",
    "ToolCallLimitMiddleware",
    "ToolCallLimitState",
]

ExitBehavior: TypeAlias = Literal["continue", "error", "end"]
"""What :class:`ToolCallLimitMiddleware` does when the model asks for calls beyond a limit (LangChain's name):
``"continue"`` refuses those calls with an error ``ToolMessage``, ``"error"`` raises, ``"end"`` ends the run."""

ALL_TOOLS = "__all__"
"""The count key of a ``ToolCallLimitMiddleware`` without ``tool_name``."""


def _latest(current: int, new: int) -> int:
    """Reducer: the newest write wins (several instances may write the same total in one step)."""
    return new


def _merge(current: dict[str, int] | None, new: dict[str, int]) -> dict[str, int]:
    """Reducer: per-key update of a tool-name -> count mapping."""
    return {**(current or {}), **new}


class ModelCallLimitState(AgentState):
    """State of :class:`ModelCallLimitMiddleware`: model calls made in this thread and in this run."""

    thread_model_call_count: NotRequired[Annotated[int, PrivateStateAttr, _latest]]
    run_model_call_count: NotRequired[Annotated[int, PrivateStateAttr, _latest]]
    model_call_counted: NotRequired[Annotated[str, PrivateStateAttr, _latest]]
    """The id of the ``AIMessage`` whose model call was counted last, so that several instances count it once."""


class ToolCallLimitState(AgentState):
    """State of :class:`ToolCallLimitMiddleware`: tool calls per tool name (``"__all__"``: every tool), per thread
    and per run."""

    thread_tool_call_count: NotRequired[Annotated[dict[str, int], PrivateStateAttr, _merge]]
    run_tool_call_count: NotRequired[Annotated[dict[str, int], PrivateStateAttr, _merge]]


def _some_limit(owner: str, args: Mapping[str, Any]) -> None:
    if args["thread_limit"] is None and args["run_limit"] is None:
        raise config_error(owner, "thread_limit", f"At least one limit must be specified (thread_limit or run_limit). "
                                                  f"{owner}: pass thread_limit=..., run_limit=... or both.")


def _run_within_thread(owner: str, args: Mapping[str, Any]) -> None:
    thread_limit, run_limit = args["thread_limit"], args["run_limit"]
    if thread_limit is not None and run_limit is not None and run_limit > thread_limit:
        raise config_error(
            owner,
            "run_limit",
            f"run_limit ({run_limit}) cannot exceed thread_limit ({thread_limit}). The run limit should be less than "
            f"or equal to the thread limit. {owner}: lower run_limit or raise thread_limit.",
        )


def _exit_rule(*allowed: str) -> Rule:
    """LangChain's sentence first, then which class and what to pass."""
    if len(allowed) == 2:
        sentence = "Invalid {param}: {value}. Must be {expected}"
    else:
        sentence = f"Invalid {{param}}: {{value!r}}. Must be one of {allowed}"
    return one_of(*allowed).saying(template=f"{sentence}. {{owner}}: pass one of {', '.join(map(repr, allowed))}.")


_LIMIT = INT_AT_LEAST_0.or_none()


def model_limit_message(thread_count: int, run_count: int, thread_limit: int | None, run_limit: int | None) -> str:
    """LangChain's text for reached model call limits: ``"Model call limits exceeded: run limit (2/2)"``."""
    reached = [
        f"{scope} limit ({n}/{limit})"
        for scope, n, limit in (("thread", thread_count, thread_limit), ("run", run_count, run_limit))
        if limit is not None and n >= limit
    ]
    return f"Model call limits exceeded: {', '.join(reached)}"


def tool_limit_message(
    thread_count: int, run_count: int, thread_limit: int | None, run_limit: int | None, tool_name: str | None
) -> str:
    """LangChain's text for exceeded tool call limits (counts include the refused calls):
    ``"'search' tool call limit reached: run limit exceeded (3/2 calls)."``."""
    exceeded = [
        f"{scope} limit exceeded ({n}/{limit} calls)"
        for scope, n, limit in (("thread", thread_count, thread_limit), ("run", run_count, run_limit))
        if limit is not None and n > limit
    ]
    what = f"'{tool_name}' tool" if tool_name else "Tool"
    return f"{what} call limit reached: {' and '.join(exceeded)}."


def tool_refusal_text(tool_name: str | None) -> str:
    """What the model reads for a refused call (LangChain's text; no thread/run details, which it cannot act on)."""
    if tool_name:
        return f"Tool call limit exceeded. Do not call '{tool_name}' again."
    return "Tool call limit exceeded. Do not make additional tool calls."


# -- model calls -----------------------------------------------------------------------------------------------
_Counts: TypeAlias = tuple[int, int, "int | None", "int | None"]
"""``(thread_count, run_count, thread_limit, run_limit)``."""


class _CallLimitError(MiddlewareError):
    """What both call-limit errors carry: the counts and the limits they were checked against."""

    thread_count: int
    run_count: int
    thread_limit: int | None
    run_limit: int | None

    def __init__(self, message: str, counts: _Counts, *, middleware: str, hook: str) -> None:
        super().__init__(message, middleware=middleware, hook=hook)
        self.thread_count, self.run_count, self.thread_limit, self.run_limit = counts


class ModelCallLimitExceededError(_CallLimitError):
    """A model call would exceed a limit of :class:`ModelCallLimitMiddleware` (``exit_behavior="error"``).

    Its message starts with LangChain's sentence (``"Model call limits exceeded: run limit (2/2)"``).

    Attributes:
        thread_count: Model calls already made in this thread.
        run_count: Model calls already made in this run.
        thread_limit: The thread limit (None if unset).
        run_limit: The run limit (None if unset).
    """

    def __init__(
        self,
        thread_count: int,
        run_count: int,
        thread_limit: int | None,
        run_limit: int | None,
        *,
        middleware: str = "ModelCallLimitMiddleware",
    ) -> None:
        counts = (thread_count, run_count, thread_limit, run_limit)
        super().__init__(
            f"{model_limit_message(*counts)}. {middleware} did not call the model again. Fix: raise the limit, start "
            f"a new thread (thread limit) or a new run (run limit), or pass exit_behavior='end' to end the run with a "
            f"message instead of raising.",
            counts,
            middleware=middleware,
            hook="before_model",
        )


class ModelCallLimitMiddleware(FrozenConfig, AgentMiddleware[ModelCallLimitState, Any]):
    """Cap the model calls of a thread and of a run.

    Args:
        thread_limit: Model calls allowed per thread (persisted by the checkpointer across invocations).
        run_limit: Model calls allowed per invocation.
        exit_behavior: When a call would exceed a limit: ``"end"`` (default) ends the run with an ``AIMessage``
            saying which limit was reached (LangChain's text, ``"Model call limits exceeded: run limit (2/2)"``);
            ``"error"`` raises :class:`ModelCallLimitExceededError`.

    At least one limit is required. A model call counts in ``after_model``, once it answered (a call a wrapper
    retried counts once; a call that failed does not count).
    Settings may be changed until an agent adopts the instance; then ``mw.replace(run_limit=5)`` makes a changed copy.
    """

    state_schema = ModelCallLimitState
    __config__ = Config(
        thread_limit=_LIMIT, run_limit=_LIMIT, exit_behavior=_exit_rule("end", "error"), relations=(_some_limit,)
    )

    def __init__(
        self,
        *,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: Literal["end", "error"] = "end",
    ) -> None:
        self.thread_limit = thread_limit
        self.run_limit = run_limit
        self.exit_behavior = exit_behavior

    def _counts(self, state: Any) -> tuple[int, int]:
        state = state or {}
        return int(state.get("thread_model_call_count") or 0), int(state.get("run_model_call_count") or 0)

    def before_agent(self, state: ModelCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any]:
        """Start this run's count at 0 (not on resume: a resumed run is the same run)."""
        return {"run_model_call_count": 0}

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: ModelCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Stop before a model call that would exceed a limit: end the run with a message, or raise."""
        thread_count, run_count = self._counts(state)
        if not (
            (self.thread_limit is not None and thread_count >= self.thread_limit)
            or (self.run_limit is not None and run_count >= self.run_limit)
        ):
            return None
        if self.exit_behavior == "error":
            raise ModelCallLimitExceededError(
                thread_count, run_count, self.thread_limit, self.run_limit, middleware=self.name
            )
        text = model_limit_message(thread_count, run_count, self.thread_limit, self.run_limit)
        return {"jump_to": "end", "messages": [AIMessage(content=text)]}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: ModelCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """LangChain's async entry point of :meth:`before_model` (no I/O: the same body, without a thread hop)."""
        return self.before_model(state, runtime)

    def after_model(self, state: ModelCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Count the model call that just answered, in the thread and in the run: once per model call (a call a
        wrapper retried counts once, and so does a call several instances count, which share the counts)."""
        state = state or {}
        messages = state.get("messages") or []
        i = last_ai_index(messages)
        answer_id = messages[i].id if i >= 0 else None
        if answer_id is not None and answer_id == state.get("model_call_counted"):
            return None  # another ModelCallLimitMiddleware counted this call
        thread_count, run_count = self._counts(state)
        update: dict[str, Any] = {"thread_model_call_count": thread_count + 1, "run_model_call_count": run_count + 1}
        if answer_id is not None:
            update["model_call_counted"] = answer_id
        return update

    async def aafter_model(self, state: ModelCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """LangChain's async entry point of :meth:`after_model` (the same body, without a thread hop)."""
        return self.after_model(state, runtime)


# -- tool calls ------------------------------------------------------------------------------------------------
class ToolCallLimitExceededError(_CallLimitError):
    """The model asked for tool calls that would exceed a limit of :class:`ToolCallLimitMiddleware`
    (``exit_behavior="error"``).

    Its message starts with LangChain's sentence (``"'search' tool call limit reached: run limit exceeded (3/2
    calls)."``).

    Attributes:
        thread_count: Calls of the limited tool(s) in this thread, counting the ones just requested.
        run_count: The same, in this run.
        thread_limit: The thread limit (None if unset).
        run_limit: The run limit (None if unset).
        tool_name: The limited tool, or None when the limit is on every tool.
    """

    def __init__(
        self,
        thread_count: int,
        run_count: int,
        thread_limit: int | None,
        run_limit: int | None,
        tool_name: str | None = None,
        *,
        middleware: str = "ToolCallLimitMiddleware",
    ) -> None:
        counts = (thread_count, run_count, thread_limit, run_limit)
        super().__init__(
            f"{tool_limit_message(*counts, tool_name)} {middleware} ran none of that model turn's calls. Fix: raise "
            f"the limit, start a new thread (thread limit) or a new run (run limit), or pass exit_behavior='continue' "
            f"(the model is told the call was refused) or 'end'.",
            counts,
            middleware=middleware,
            hook="after_model",
        )
        self.tool_name = tool_name


class ToolCallLimitMiddleware(FrozenConfig, AgentMiddleware[ToolCallLimitState, Any]):
    """Cap the calls of one tool (``tool_name``) or of every tool, per thread and per run.

    Args:
        tool_name: The tool to limit; None (default) limits every tool call together.
        thread_limit: Calls allowed per thread (persisted by the checkpointer across invocations).
        run_limit: Calls allowed per invocation; at most ``thread_limit`` when both are given.
        exit_behavior: When the model asks for calls beyond a limit (:data:`ExitBehavior`):

            - ``"continue"`` (default): those calls are answered with an error ``ToolMessage`` telling the model not
              to call the tool again; the calls within the limit run, and the model is called again;
            - ``"error"``: raise :class:`ToolCallLimitExceededError` (no call of that model turn runs);
            - ``"end"``: end the run: the refused calls get that error ``ToolMessage``, the model's other calls a
              "not executed" one, and a final ``AIMessage`` says which limit was reached.

    Its ``name`` includes the tool (``"ToolCallLimitMiddleware[search]"``), so one agent may list one per tool.
    Allowed calls count toward both limits; refused calls count toward the run only (they were attempted in it), as
    in LangChain. Settings may be changed until an agent adopts the instance; then ``mw.replace(run_limit=5)``
    makes a changed copy.
    """

    state_schema = ToolCallLimitState
    __config__ = Config(
        thread_limit=_LIMIT,
        run_limit=_LIMIT,
        exit_behavior=_exit_rule("continue", "error", "end"),
        tool_name=NON_EMPTY_NAME.or_none("a tool's name (a non-empty str) or None"),
        relations=(_some_limit, _run_within_thread),
    )

    def __init__(
        self,
        *,
        tool_name: str | None = None,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: ExitBehavior = "continue",
    ) -> None:
        self.tool_name = tool_name
        self.thread_limit = thread_limit
        self.run_limit = run_limit
        self.exit_behavior = exit_behavior

    @property
    def name(self) -> str:
        """``ToolCallLimitMiddleware[tool]`` with a ``tool_name``, else the class name (unless set explicitly)."""
        explicit: str | None = self.__dict__.get("_middleware_name")
        if explicit is not None:
            return explicit
        base = type(self).__name__
        return f"{base}[{self.tool_name}]" if self.tool_name is not None else base

    @name.setter
    def name(self, value: str) -> None:
        self.__dict__["_middleware_name"] = value

    @property
    def _key(self) -> str:
        return self.tool_name if self.tool_name is not None else ALL_TOOLS

    def before_agent(self, state: ToolCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any]:
        """Start this run's count at 0 (not on resume: a resumed run is the same run)."""
        return {"run_tool_call_count": {self._key: 0}}

    def _refusal(self, call: ToolCall) -> ToolMessage:
        return ToolMessage(
            content=tool_refusal_text(self.tool_name),
            tool_call_id=call["id"] or "",
            name=call["name"],
            status="error",
        )

    def _split(self, pending: list[ToolCall], thread0: int, run0: int) -> tuple[list[ToolCall], list[ToolCall]]:
        """The pending calls this instance limits, split into those within the limits and those beyond them."""
        allowed: list[ToolCall] = []
        refused: list[ToolCall] = []
        for call in pending:
            if self.tool_name is not None and call["name"] != self.tool_name:
                continue
            n = len(allowed) + 1
            if (self.thread_limit is not None and thread0 + n > self.thread_limit) or (
                self.run_limit is not None and run0 + n > self.run_limit
            ):
                refused.append(call)
            else:
                allowed.append(call)
        return allowed, refused

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: ToolCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Count the calls the model just asked for; refuse those beyond a limit (``exit_behavior`` says how)."""
        messages = state.get("messages") or []
        i = last_ai_index(messages)
        if i < 0 or not messages[i].tool_calls:  # type: ignore[union-attr]
            return None
        answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
        pending = [c for c in messages[i].tool_calls if c["id"] not in answered]  # type: ignore[union-attr]
        key = self._key
        thread0 = int((state.get("thread_tool_call_count") or {}).get(key, 0))
        run0 = int((state.get("run_tool_call_count") or {}).get(key, 0))
        allowed, refused = self._split(pending, thread0, run0)
        if not refused:
            if not allowed:
                return None
            return {
                "thread_tool_call_count": {key: thread0 + len(allowed)},
                "run_tool_call_count": {key: run0 + len(allowed)},
            }
        # Refused calls were attempted in this run: they count toward it (not toward the thread), as in LangChain.
        thread_count, run_count = thread0 + len(allowed), run0 + len(allowed) + len(refused)
        if self.exit_behavior == "error":
            raise ToolCallLimitExceededError(
                thread_count + len(refused),
                run_count,
                self.thread_limit,
                self.run_limit,
                self.tool_name,
                middleware=self.name,
            )
        if self.exit_behavior == "continue":
            return {
                "thread_tool_call_count": {key: thread_count},
                "run_tool_call_count": {key: run_count},
                "messages": [self._refusal(call) for call in refused],
            }
        # "end": no call of this turn runs, so the thread count stays where it was.
        return {
            "thread_tool_call_count": {key: thread0},
            "run_tool_call_count": {key: run_count},
            "jump_to": "end",
            "messages": self._end_messages(pending, refused, thread_count + len(refused), run_count),
        }

    def _end_messages(
        self, pending: list[ToolCall], refused: list[ToolCall], thread_count: int, run_count: int
    ) -> list[AnyMessage]:
        """Every open call of the turn answered, in call order (the pairing guarantee), then why the run ended."""
        refused_ids = {call["id"] for call in refused}
        answers: list[AnyMessage] = [
            self._refusal(call)
            if call["id"] in refused_ids
            else ToolMessage(
                content=f"Tool call '{call['name']}' was not executed: the run ended because another call of the "
                f"same turn exceeded the limit.",
                tool_call_id=call["id"] or "",
                name=call["name"],
                status="error",
            )
            for call in pending
        ]
        text = tool_limit_message(thread_count, run_count, self.thread_limit, self.run_limit, self.tool_name)
        return [*answers, AIMessage(content=text)]

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: ToolCallLimitState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """LangChain's async entry point of :meth:`after_model` (no I/O: the same body, without a thread hop)."""
        return self.after_model(state, runtime)
