"""``ModelRetryMiddleware`` and ``ToolRetryMiddleware``: retries with exponential backoff and jitter.

Each wrap hook is a single flow (:mod:`middleware_kit.flow`): ``response = yield request`` calls the next
handler and
``yield Sleep(delay)`` waits (``time.sleep`` under ``invoke``, ``asyncio.sleep`` under ``ainvoke``, so tests patch
``middleware_kit.flow.sleep``/``asleep``, or pass ``sleep=``). The policy engine is ``tenacity``: each call
builds
a ``tenacity.Retrying`` (stop, wait, retry and before-sleep from LangChain's :func:`calculate_delay`, ``Retry-After``,
the ``max_elapsed`` deadline and the per-run budget) and the flow drives it step by step (``Retrying.iter``:
``DoAttempt`` is ``yield request``, ``DoSleep`` is ``yield Sleep(delay)``), so no body is written twice and nothing
hops to a thread.

Beyond LangChain v1:

- a provider's ``Retry-After`` (``exc.response.headers``; seconds, ``retry-after-ms`` or an HTTP date) is honoured;
- ``max_elapsed``: no retry starts whose backoff would end past this many seconds after the first attempt began;
- ``budget``: a per-run cap on retries (an int, or ``budget=lambda runtime: runtime.context.retry_budget``), spent
  in state (``retry_budget_spent``), so one middleware instance serves every run;
- the layers inside see which attempt they run in: :func:`current_attempt` / :func:`current_retry` (a ContextVar,
  so nothing leaks into the provider call);
- each retry writes ``{"event": "retry", "middleware", "attempt", "delay", "error"}`` to the custom stream, and
  giving up writes ``{"event": "retry_gave_up", "middleware", "attempts", "error", "reason"}``;
- the default ``retry_on`` (:func:`is_retryable`) skips errors that cannot succeed on a retry (authentication,
  invalid request, programming errors), and errors that are not retried propagate at once, unchanged.

``GraphInterrupt``/``ParentCommand`` (LangGraph's ``GraphBubbleUp``) and ``MiddlewareError`` are never retried nor
turned into a message.
"""

from __future__ import annotations

import inspect
import math
import random
import sys
import warnings
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Annotated, Any, Literal, NotRequired, TypeAlias, TypedDict, Unpack

import tenacity
from langchain_core.exceptions import ModelError
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit._engine.bridge import run_coroutine_sync
from middleware_kit.errors import HookReturnError, MiddlewareConfigError, MiddlewareError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks, Sleep, ToolCallFlow, ToolCallFlowHooks
from middleware_kit.hooks import ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import CALLABLE, FINITE_AT_LEAST_0, INT_AT_LEAST_0, Config, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ToolCallRequest,
)

__all__ = [
    "ModelRetryMiddleware",
    "OnFailure",
    "RetryAttempt",
    "RetryOn",
    "RetryState",
    "ToolRetryMiddleware",
    "calculate_delay",
    "current_attempt",
    "current_retry",
    "is_retryable",
    "retry_after_seconds",
]


OnFailure: TypeAlias = "Literal['continue', 'error'] | Callable[[Exception], str]"
"""What to do when retrying gives up: ``"continue"`` (a message says what failed), ``"error"`` (re-raise), or a
function of the exception returning the message's text."""
RetryOn: TypeAlias = "type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool]"
"""Which exceptions are retried: exception types, or a predicate."""
Budget: TypeAlias = "int | Callable[[Any], int | None] | None"
"""Retries allowed per run: an int, or a function of the runtime returning one (None: no cap)."""

BUDGET_KEY = "retry_budget_spent"
_JITTER = 0.25


# -- the attempt in progress, for the layers inside ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RetryAttempt:
    """The attempt in progress, as the layers inside a retrying middleware see it (:func:`current_retry`)."""

    middleware: str
    """The name of the retrying middleware."""
    number: int
    """1 for the first try, 2 for the first retry, ..."""
    max_attempts: int
    """``max_retries + 1``; the budget, the deadline or a long ``Retry-After`` may stop sooner."""
    previous_error: BaseException | None
    """What made the previous attempt fail (None on the first)."""


_CURRENT: ContextVar[RetryAttempt | None] = ContextVar("middleware_kit_retry_attempt", default=None)


def current_retry() -> RetryAttempt | None:
    """The attempt of the innermost retrying middleware around the running code, or None outside any.

    Inner ``wrap_model_call``/``wrap_tool_call`` layers, the model and the tool all see it (it is a ContextVar, so it
    follows the call across threads and tasks and never reaches the provider request).
    """
    return _CURRENT.get()


def current_attempt() -> int:
    """The attempt number (1-based) of the innermost retrying middleware around the running code; 1 outside any."""
    attempt = _CURRENT.get()
    return 1 if attempt is None else attempt.number


# -- what is worth retrying ------------------------------------------------------------------------------------
_PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    AssertionError,
    AttributeError,
    ImportError,
    NameError,
    NotImplementedError,
    SyntaxError,
    TypeError,
)
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def _status_code(exc: BaseException) -> int | None:
    for source in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status", "http_status"):
            value = getattr(source, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def is_retryable(exc: BaseException) -> bool:
    """The default ``retry_on``: False for errors a retry cannot fix, True otherwise.

    Not retried: LangGraph control flow and ``MiddlewareError``; langchain-core ``ModelError``s whose
    ``is_retryable`` is False (authentication, permission, invalid request, not found, context overflow); errors
    carrying an HTTP status (``exc.status_code``, ``exc.response.status_code``) of 4xx other than 408, 409, 425 and
    429; programming errors (``TypeError``, ``AttributeError``, ``NameError``, ``ImportError``,
    ``NotImplementedError``, ``AssertionError``, ``SyntaxError``); anything that is not an ``Exception``.
    """
    if not isinstance(exc, Exception) or isinstance(exc, (GraphBubbleUp, MiddlewareError)):
        return False
    if isinstance(exc, ModelError):
        return bool(exc.is_retryable)
    status = _status_code(exc)
    if status is not None:
        return status >= 500 or status in _RETRYABLE_STATUS or status < 400
    return not isinstance(exc, _PROGRAMMING_ERRORS)


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name)  # httpx/requests headers are case-insensitive
        if value is None and isinstance(headers, Mapping):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:
        return None
    return None if value is None else str(value)


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """How long the provider asked to wait, from ``exc.response.headers`` (``retry-after-ms``, or ``retry-after`` in
    seconds or as an HTTP date); None when the error carries no such header."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    seconds: float | None = None
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            seconds = float(millis) / 1000
        except ValueError:
            seconds = None
    if seconds is None:
        value = _header(headers, "retry-after")
        if value is None:
            return None
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


# -- the budget, spent in state --------------------------------------------------------------------------------
def _spend(current: dict[str, int] | None, update: dict[str, int | None]) -> dict[str, int]:
    """Reducer of ``retry_budget_spent``: adds each middleware's retries; None resets it (a new run)."""
    merged = dict(current or {})
    for owner, retries in update.items():
        merged[owner] = 0 if retries is None else merged.get(owner, 0) + retries
    return merged


class RetryState(AgentState):
    """State of a retrying middleware given a ``budget``: the retries each one spent in the current run."""

    retry_budget_spent: NotRequired[Annotated[dict[str, int], PrivateStateAttr, _spend]]


# -- the policy, written once for both modes -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Failure:
    """Retrying gave up on a retryable error."""

    error: Exception
    attempts: int
    reason: str
    """``max_retries``, ``budget``, ``max_elapsed`` or ``retry_after`` (the provider asked for more than
    ``max_delay``)."""


def calculate_delay(
    retry_number: int,
    *,
    backoff_factor: float,
    initial_delay: float,
    max_delay: float,
    jitter: bool,
) -> float:
    """The delay before retry ``retry_number`` (0-based), LangChain's formula: ``initial_delay * backoff_factor **
    retry_number`` (``backoff_factor == 0``: always ``initial_delay``), capped at ``max_delay``; with ``jitter``,
    moved randomly by up to ±25% (so clients that failed together do not retry together).

    Unlike LangChain, a jittered delay stays within ``[0, max_delay]``: ``max_delay`` is a promise.
    """
    delay = initial_delay if backoff_factor == 0 else initial_delay * backoff_factor**retry_number
    delay = min(delay, max_delay)
    if jitter and delay > 0:
        delay = min(max_delay, max(0.0, delay * (1 + random.uniform(-_JITTER, _JITTER))))
    return float(delay)


class _FlowRetrying(tenacity.Retrying):
    """tenacity's policy engine, driven step by step by a flow (:meth:`_Call.attempts_flow`), never called itself.

    tenacity keeps its statistics per thread; a flow may resume on another thread than it started on, so this one
    keeps them on the object (made per call, so never shared).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._own_statistics: dict[str, Any] = {}

    @property
    def statistics(self) -> dict[str, Any]:
        return self._own_statistics


class _Call:
    """One retried call: a :class:`tenacity.Retrying` built from the middleware's policy (``stop``: ``max_retries``,
    the budget, ``max_elapsed``, a too-long ``Retry-After``; ``wait``: :func:`calculate_delay` and ``Retry-After``;
    ``retry``: ``retry_on``), driven by a flow. Made per call, so the middleware itself holds configuration only."""

    def __init__(self, mw: _RetryMiddleware, runtime: Any, state: Any, tool: str | None) -> None:
        self.mw = mw
        self.runtime = runtime
        self.tool = tool
        self.budget_left = mw._budget_left(runtime, state)
        self.attempts = 0
        self.last_error: BaseException | None = None
        self.reason = "max_retries"
        self._planned: dict[int, float | None] = {}
        """The wait after each failed attempt (None: stop), decided once so ``stop`` and ``wait`` agree (tenacity 8
        asks ``stop`` first, 9 ``wait`` first) and a jittered delay is drawn once."""

    def retrying(self) -> tenacity.Retrying:
        return _FlowRetrying(
            stop=self._stop,
            wait=self._wait,
            retry=tenacity.retry_if_exception(self._should_retry),
            before_sleep=self._before_sleep,
            retry_error_callback=self._gave_up,
        )

    def _should_retry(self, exc: BaseException) -> bool:
        if not isinstance(exc, Exception) or isinstance(exc, (GraphBubbleUp, MiddlewareError)):
            return False
        return self.mw._retry_on(exc)

    def _plan(self, state: tenacity.RetryCallState) -> float | None:
        """The wait before the next attempt, after attempt ``state.attempt_number`` failed; None to stop
        (``self.reason`` then says why)."""
        n = state.attempt_number
        if n in self._planned:
            return self._planned[n]
        mw = self.mw
        delay: float | None = None
        if n > mw.max_retries:
            self.reason = "max_retries"
        elif self.budget_left is not None and n > self.budget_left:
            self.reason = "budget"
        else:
            delay = calculate_delay(
                n - 1,
                backoff_factor=mw.backoff_factor,
                initial_delay=mw.initial_delay,
                max_delay=mw.max_delay,
                jitter=mw.jitter,
            )
            error = state.outcome.exception() if state.outcome is not None else None
            hinted = retry_after_seconds(error) if mw.respect_retry_after else None
            if hinted is not None and hinted > mw.max_delay:
                self.reason, delay = "retry_after", None
            elif hinted is not None:
                delay = max(delay, hinted)
            # Time waited counts even when the wait is faked in tests, so deadlines behave the same.
            elapsed = max(state.seconds_since_start or 0.0, state.idle_for)
            if delay is not None and mw.max_elapsed is not None and elapsed + delay > mw.max_elapsed:
                self.reason, delay = "max_elapsed", None
        self._planned[n] = delay
        return delay

    def _stop(self, state: tenacity.RetryCallState) -> bool:
        return self._plan(state) is None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        return self._plan(state) or 0.0

    def _event(self, event: dict[str, Any]) -> None:
        if self.tool is not None:
            event["tool"] = self.tool
        emit(self.runtime, event)

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        self.last_error = error
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        self._event(
            {
                "event": "retry",
                "middleware": self.mw.name,
                "attempt": state.attempt_number,
                "delay": delay,
                "error": type(error).__name__,
            }
        )

    def _gave_up(self, state: tenacity.RetryCallState) -> _Failure:
        error = state.outcome.exception() if state.outcome is not None else None
        assert isinstance(error, Exception)  # tenacity gives up only on an error ``_should_retry`` accepted
        failure = _Failure(error, state.attempt_number, self.reason)
        self._event(
            {
                "event": "retry_gave_up",
                "middleware": self.mw.name,
                "attempts": failure.attempts,
                "error": type(error).__name__,
                "reason": failure.reason,
            }
        )
        return failure

    def attempts_flow(self, request: Any) -> Generator[Any, Any, Any]:
        """The attempts, as a flow driving tenacity step by step: ``DoAttempt`` is ``yield request`` (the next
        handler), ``DoSleep`` is ``yield Sleep(d)``. Returns the result, or a :class:`_Failure` when retrying gave
        up; errors not retried propagate unchanged (tenacity re-raises them)."""
        retrying = self.retrying()
        retrying.begin()
        state = tenacity.RetryCallState(retrying, fn=None, args=(), kwargs={})
        while True:
            action = retrying.iter(state)
            if isinstance(action, tenacity.DoAttempt):
                self.attempts = state.attempt_number
                token = _CURRENT.set(
                    RetryAttempt(self.mw.name, self.attempts, self.mw.max_retries + 1, self.last_error)
                )
                try:
                    result = yield request
                except Exception as exc:
                    state.set_exception((type(exc), exc, exc.__traceback__))
                else:
                    state.set_result(result)
                finally:
                    _CURRENT.reset(token)
            elif isinstance(action, tenacity.DoSleep):
                state.prepare_for_next_attempt()
                delay = float(action)
                if self.mw._sleep is not None:
                    waited = self.mw._sleep(delay)
                    if inspect.isawaitable(waited):
                        run_coroutine_sync(_awaited(waited))
                else:
                    yield Sleep(delay)
            else:
                return action


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside middleware_kit (the user's call)."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("middleware_kit."):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    return level


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class _Policy(TypedDict, total=False):
    """The parameters :class:`ToolRetryMiddleware` passes on to :class:`_RetryMiddleware` (typed keyword arguments)."""

    max_retries: int
    retry_on: RetryOn
    on_failure: OnFailure
    backoff_factor: float
    initial_delay: float
    max_delay: float
    jitter: bool
    max_elapsed: float | None
    budget: Budget
    respect_retry_after: bool
    sleep: Callable[[float], object] | None


_LANGCHAIN_FIRST = "{param} must be >= 0. {owner}: got {value!r}; pass {expected}."
"""LangChain's sentence first, then which class and how to fix it."""
_SECONDS = FINITE_AT_LEAST_0.saying("a finite number of seconds >= 0", _LANGCHAIN_FIRST)


class _RetryMiddleware(FrozenConfig, AgentMiddleware):
    """What the model and the tool variants share: parameters, validation, the budget, sleeping."""

    __config__ = Config(
        max_retries=INT_AT_LEAST_0.saying("an int (0: no retry)", _LANGCHAIN_FIRST),  # in LangChain's order
        initial_delay=_SECONDS,
        max_delay=_SECONDS,
        backoff_factor=FINITE_AT_LEAST_0.saying("a finite number >= 0 (0: constant delay)", _LANGCHAIN_FIRST),
        max_elapsed=rule(lambda v: v is None or (_is_seconds(v) and v > 0), "a number of seconds > 0 (or None)"),
        budget=(INT_AT_LEAST_0 | CALLABLE).or_none(
            "an int >= 0, a function of the runtime returning one, or None", "{owner}: {param} must be {expected}; "
            "got {value!r}."
        ),
    )

    def __init__(
        self,
        *,
        max_retries: int = 2,
        retry_on: RetryOn = is_retryable,
        on_failure: OnFailure = "continue",
        backoff_factor: float = 2.0,
        initial_delay: float = 1.0,
        max_delay: float = 60.0,
        jitter: bool = True,
        max_elapsed: float | None = None,
        budget: Budget = None,
        respect_retry_after: bool = True,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        self.max_retries = max_retries
        self.retry_on = retry_on
        self._retry_on = self._retry_predicate(retry_on)
        self.on_failure = self._check_on_failure(on_failure, type(self).__name__)
        self.backoff_factor = float(backoff_factor)
        self.initial_delay = float(initial_delay)
        self.max_delay = float(max_delay)
        self.jitter = jitter
        self.max_elapsed = None if max_elapsed is None else float(max_elapsed)
        self.budget = budget
        self.respect_retry_after = respect_retry_after
        self._sleep = sleep
        if budget is not None:
            # Only a budgeted instance has state and a before_agent hook (which resets the spend for each run);
            # the others add no node to the graph. The engine reads hooks set on the instance.
            self.state_schema = RetryState
            self.before_agent = self._reset_budget  # type: ignore[method-assign]

    def _config_error(self, param: str, detail: str) -> MiddlewareConfigError:
        """A constructor error; ``detail`` names the class itself when it starts with LangChain's sentence."""
        cls = type(self).__name__
        text = detail if cls in detail else f"{cls}: {detail}"
        return MiddlewareConfigError(text, middleware=cls, hook=param)

    def _retry_predicate(self, retry_on: RetryOn) -> Callable[[Exception], bool]:
        if isinstance(retry_on, type) and issubclass(retry_on, BaseException):
            retry_on = (retry_on,)
        if isinstance(retry_on, tuple):
            if not retry_on or not all(isinstance(t, type) and issubclass(t, BaseException) for t in retry_on):
                raise self._config_error(
                    "retry_on", f"retry_on must hold exception classes (or be a predicate), got {retry_on!r}."
                )
            types = retry_on
            return lambda exc: isinstance(exc, types)
        if callable(retry_on) and not isinstance(retry_on, type):
            predicate: Callable[[Exception], bool] = retry_on
            return predicate
        raise self._config_error(
            "retry_on",
            f"retry_on must be a tuple of exception classes or a function (exception) -> bool, got {retry_on!r}.",
        )

    def _check_on_failure(self, on_failure: Any, cls: str) -> OnFailure:
        legacy = {"raise": "error", "return_message": "continue"}
        if on_failure in legacy:
            warnings.warn(
                f"on_failure={on_failure!r} is deprecated and will be removed in a future version. Use "
                f"on_failure={legacy[on_failure]!r} instead. ({cls})",
                DeprecationWarning,
                stacklevel=_caller_stacklevel(),
            )
            return legacy[on_failure]  # type: ignore[return-value]
        if on_failure in ("continue", "error") or (callable(on_failure) and not isinstance(on_failure, str)):
            return on_failure  # type: ignore[no-any-return]
        raise self._config_error(
            "on_failure",
            f"on_failure must be 'continue', 'error' or a function (exception) -> str, got {on_failure!r}.",
        )

    # -- budget --------------------------------------------------------------------------------------------------
    def _budget_left(self, runtime: Any, state: Any) -> int | None:
        if self.budget is None:
            return None
        total = self.budget(runtime) if callable(self.budget) else self.budget
        if total is None:
            return None
        if not _is_count(total):
            raise MiddlewareConfigError(
                f"{self.name}: the budget function returned {total!r}; it must return an int >= 0 (the retries "
                f"allowed in this run) or None (no cap).",
                middleware=self.name,
                hook="budget",
            )
        spent = (state.get(BUDGET_KEY) if isinstance(state, Mapping) else None) or {}
        return max(0, total - int(spent.get(self.name, 0)))

    def _charge(self, call: _Call) -> dict[str, Any] | None:
        """The state update recording the retries this call spent (None without a budget or without retries)."""
        if self.budget is None or call.attempts <= 1:
            return None
        return {BUDGET_KEY: {self.name: call.attempts - 1}}

    def _reset_budget(self, state: Any, runtime: Runtime[Any] | None) -> dict[str, Any]:
        """``before_agent`` of a budgeted instance: nothing spent yet in this run (sync only: no I/O; the engine
        runs it under ``ainvoke`` too)."""
        return {BUDGET_KEY: {self.name: None}}

    # -- failure -------------------------------------------------------------------------------------------------
    def _failure_text(self, failure: _Failure, default: str) -> str:
        if self.on_failure == "error":
            raise failure.error
        if self.on_failure == "continue":
            return default
        assert callable(self.on_failure)
        text = self.on_failure(failure.error)
        if not isinstance(text, str):
            raise HookReturnError(
                f"{self.name}: on_failure returned {type(text).__name__}; it must return the message text (a str).",
                middleware=self.name,
                hook="on_failure",
            )
        return text


class ModelRetryMiddleware(ModelCallFlowHooks, _RetryMiddleware):
    """Retry failed model calls with exponential backoff, then give up as ``on_failure`` says.

    Args:
        max_retries: Retries after the first attempt (``0``: no retry). Default 2, so 3 attempts.
        retry_on: Exception classes to retry, or a predicate ``(exception) -> bool``. Default :func:`is_retryable`:
            everything except errors a retry cannot fix. Errors not retried propagate at once, unchanged.
        on_failure: When retrying gives up: ``"continue"`` (default) ends the model call with an ``AIMessage``
            saying it failed after N attempts and the error type (the agent answers with it); ``"error"`` re-raises
            the last error; a function ``(exception) -> str`` gives the ``AIMessage``'s text.
        backoff_factor: The delay before retry ``n`` (0-based) is ``initial_delay * backoff_factor ** n``
            (``0``: always ``initial_delay``). Default 2.0.
        initial_delay: Seconds before the first retry. Default 1.0.
        max_delay: Cap on any one delay, in seconds. Default 60.0. A ``Retry-After`` longer than this stops retrying.
        jitter: Move each delay randomly by up to ±25% (still capped). Default True.
        max_elapsed: Seconds from the first attempt after which no retry starts (one whose delay would end later
            is not started). Default None: no deadline. It does not interrupt a running attempt.
        budget: Retries allowed per run, across every model call of the run: an int, or a function of the runtime
            (``lambda runtime: runtime.context.retry_budget``) returning an int or None (no cap). Spent in state.
        respect_retry_after: Wait at least what the provider's ``Retry-After`` header asks. Default True.
        sleep: Replaces the wait between attempts (tests: ``sleep=delays.append``). Called in place of
            ``yield Sleep(delay)``; an awaitable it returns is driven to completion (blocking). Default None: the
            flow's sleep (``middleware_kit.flow.sleep``/``asleep``, looked up at each wait).

    Negative or non-numeric values raise ``MiddlewareConfigError`` (a ``ValueError``) naming the parameter.
    """

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Retry the model call (a flow: one body for invoke and ainvoke; waits are ``yield Sleep(delay)``)."""
        call = _Call(self, request.runtime, request.state, None)
        result = yield from call.attempts_flow(request)
        return self._finish(call, result)

    def _finish(self, call: _Call, result: Any) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        if isinstance(result, _Failure):
            default = (
                f"Model call failed after {_attempts(result.attempts)} with "
                f"{type(result.error).__name__}: {result.error}"
            )
            result = ModelResponse(result=[AIMessage(content=self._failure_text(result, default))])
        update = self._charge(call)
        if update is None:
            return result  # type: ignore[no-any-return]
        return ExtendedModelResponse(model_response=result, command=Command(update=update))


class ToolRetryMiddleware(ToolCallFlowHooks, _RetryMiddleware):
    """Retry failed tool calls with exponential backoff, then give up as ``on_failure`` says.

    Takes the parameters of :class:`ModelRetryMiddleware`, plus ``tools``: the tools to retry (names or
    ``BaseTool``s; default None: every tool); calls to other tools pass through untouched. With ``"continue"``
    (default) a call that keeps failing ends with an error ``ToolMessage`` naming the tool, the attempts and the error
    type, so the model can react; ``"error"`` re-raises; a function ``(exception) -> str`` gives the message's text.

    With a ``budget``, a call that was retried returns ``Command(update={"messages": [tool_message],
    "retry_budget_spent": ...})`` rather than the bare ``ToolMessage``, so the spend reaches state.
    """

    def __init__(self, *, tools: Sequence[BaseTool | str] | None = None, **policy: Unpack[_Policy]) -> None:
        super().__init__(**policy)
        names: list[str] = []
        for tool in tools or ():
            if isinstance(tool, BaseTool):
                names.append(tool.name)
            elif isinstance(tool, str):
                names.append(tool)
            else:
                raise self._config_error("tools", f"tools must hold tool names or BaseTool instances, got {tool!r}.")
        self.tools_to_retry: frozenset[str] | None = frozenset(names) if tools is not None else None
        """Names of the tools retried (None: all)."""

    def _applies(self, request: ToolCallRequest) -> bool:
        return self.tools_to_retry is None or request.tool_call["name"] in self.tools_to_retry

    def tool_call_flow(self, request: ToolCallRequest) -> ToolCallFlow:
        """Retry the tool call (a flow: one body for invoke and ainvoke; waits are ``yield Sleep(delay)``)."""
        if not self._applies(request):
            return (yield request)
        call = _Call(self, request.runtime, request.state, request.tool_call["name"])
        result = yield from call.attempts_flow(request)
        return self._finish(call, request, result)

    def _finish(self, call: _Call, request: ToolCallRequest, result: Any) -> ToolResult:
        name = request.tool_call["name"]
        if isinstance(result, _Failure):
            default = (
                f"Tool '{name}' failed after {_attempts(result.attempts)} with {type(result.error).__name__}: "
                f"{result.error}. Try different arguments or another approach."
            )
            result = ToolMessage(
                content=self._failure_text(result, default),
                tool_call_id=request.tool_call["id"] or "",
                name=name,
                status="error",
            )
        update = self._charge(call)
        if update is None:
            return result  # type: ignore[no-any-return]
        if isinstance(result, ToolMessage):
            return Command(update={"messages": [result], **update})
        if isinstance(result, Command) and isinstance(result.update, dict):
            merged = dict(result.update)
            for key, value in update.items():
                merged[key] = {**merged[key], **value} if isinstance(merged.get(key), dict) else value
            return Command(graph=result.graph, update=merged, resume=result.resume, goto=result.goto)
        return result  # type: ignore[no-any-return]
