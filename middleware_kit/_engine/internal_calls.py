"""Model calls a middleware makes for itself, kept out of the user's message stream.

A middleware that calls a model of its own (a summarizer, a tool selector, a classifier) tags the call with
:func:`internal_call_metadata` and declares ``transformers = (InternalCallTransformer,)``; the agent's
``stream_events(version="v3")`` then never shows that call in ``run.messages`` nor in the raw event log::

    class Checker(AgentMiddleware):
        transformers = (InternalCallTransformer,)

        def wrap_model_call(self, request, handler):
            self.checker.invoke([HumanMessage("check")], config={"metadata": internal_call_metadata()})
            return handler(request)

The marker's value is a random token drawn once per process, so a caller cannot hide the agent's real answer by
putting the key in the run's own ``config["metadata"]`` (which reaches every model call of the run). This is
LangChain 1.5's ``langchain.agents.middleware.internal_call_transformer``, with the same public names. The bundled
middlewares tag their own calls this way (and with LangChain's ``lc_source``, see
``middleware_kit.middlewares._model_arg.internal_call_config``).

Made through :func:`invoke_internal` / :func:`ainvoke_internal`, such a call is also tagged, and it is under the
run's control (``create_agent(..., run_control=...)``): a call of a run that was cancelled or ran out of time does
not start, and

- under ``ainvoke`` a call in flight is abandoned the moment the run is stopped (its task cancelled);
- under ``invoke`` the call cannot be interrupted (Python cannot stop a thread): its answer, once it comes, is
  discarded.

Either way the call raises :class:`InternalCallAbandoned`; the hook that made it is abandoned with it (whatever it
would have written is dropped, as if it returned nothing) and the run ends at its next check, like any stopped run::

    class Checker(AgentMiddleware):
        transformers = (InternalCallTransformer,)

        def before_model(self, state, runtime):
            verdict = invoke_internal(self.checker, [HumanMessage("check")], site=f"{self.name}.before_model")
            ...

And it is paid once: in a run with a checkpointer (and the call ledger on, as it is by default) its answer is
recorded with the step, and a replay of the step after a crash is given the recorded answer instead of calling the
model again (:mod:`middleware_kit.ledger.model_calls`, docs/exactly_once.md). ``site`` names the call's hook in the
record (default: the config's ``run_name``, else the runnable's name); calls that one hook makes at the same time
(guards checked concurrently) must each have their own.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.stream import ProtocolEvent, StreamTransformer

from middleware_kit._engine.drive import Step, Steps, run_async, run_sync

__all__ = [
    "INTERNAL_CALL_METADATA_KEY",
    "InternalCallAbandoned",
    "InternalCallTransformer",
    "ainvoke_internal",
    "internal_call_metadata",
    "invoke_internal",
]

Input = TypeVar("Input")
Output = TypeVar("Output")

INTERNAL_CALL_METADATA_KEY = "lc_internal_call"
"""The ``config["metadata"]`` key that marks a model call as internal to a middleware (apart from ``lc_source``,
which says which middleware feature made the call)."""

_INTERNAL_CALL_TOKEN: str = secrets.token_hex(16)
"""The marker's value: random per process, so that caller-supplied metadata cannot forge it."""


def internal_call_metadata() -> dict[str, Any]:
    """Metadata to merge into an internal model call's ``config["metadata"]`` (a new dict each call)."""
    return {INTERNAL_CALL_METADATA_KEY: _INTERNAL_CALL_TOKEN}


class InternalCallAbandoned(BaseException):
    """A middleware's own call (:func:`invoke_internal`) was abandoned: its run was cancelled or ran out of time.

    The hook that made the call is abandoned too: the engine counts it as a hook that returned nothing, and the run
    ends at its next check (every open tool call answered, a final message, a ``run_cancelled`` /
    ``run_deadline_exceeded`` event). Like ``asyncio.CancelledError`` it is a ``BaseException``, not an
    ``Exception``: a hook's ``except Exception`` (a summarizer's ``on_failure="skip"``, a retry) does not take the
    stop for a failed call."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"a middleware's own model call was abandoned: {reason}")
        self.reason = reason


def _tagged(config: RunnableConfig | None) -> RunnableConfig:
    """``config`` with the internal-call marker added to its metadata."""
    out: dict[str, Any] = dict(config or {})
    out["metadata"] = {**(out.get("metadata") or {}), **internal_call_metadata()}
    return out  # type: ignore[return-value]


_Guards = tuple[Callable[[Callable[[], Any]], Any], Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]]
_guards: list[_Guards] = []
"""The guard every internal call runs through, installed once by run control when it is imported (it builds on this
module, never the other way round): in a controlled run a call is not started once the run is stopped and is
abandoned the moment it is (:class:`InternalCallAbandoned`)."""


def guard_internal_calls(sync: Callable[[Callable[[], Any]], Any],
                         async_: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]) -> None:
    """Install the guard of :func:`invoke_internal`/:func:`ainvoke_internal` (run control's, at its import)."""
    _guards[:] = [(sync, async_)]


Recorder = Callable[[str, Any, Step], Steps[Any]]
"""``recorder(site, input, call)``: the body running ``call`` (the model call, a step) as the call ledger records it;
called in the caller's thread, where it may take the call's place in the run."""
_recorders: list[Recorder] = []
"""How every internal call is recorded, installed once by the call ledger when it is imported (it builds on this
module, never the other way round; ``create_agent`` imports it): see :mod:`middleware_kit.ledger.model_calls`."""


def record_internal_calls(recorder: Recorder) -> None:
    """Install the recorder of :func:`invoke_internal`/:func:`ainvoke_internal` (the call ledger's, at its import)."""
    _recorders[:] = [recorder]


def _unrecorded(call: Step) -> Steps[Any]:
    return (yield call)


def _call(
    runnable: Runnable[Any, Any], input: Any, config: RunnableConfig | None, site: str | None, kwargs: dict[str, Any]
) -> Steps[Any]:
    """The call, one body for both modes, through the call ledger (its place in the run is taken now, in the caller's
    thread: a site's ordinal follows the order of the hook's calls)."""
    call = Step(functools.partial(runnable.invoke, **kwargs), functools.partial(runnable.ainvoke, **kwargs), input,
                _tagged(config))
    if not _recorders:
        return _unrecorded(call)
    return _recorders[0](str(site or (config or {}).get("run_name") or runnable.get_name()), input, call)


def invoke_internal(
    runnable: Runnable[Input, Output], input: Input, config: RunnableConfig | None = None, *,
    site: str | None = None, **kwargs: Any
) -> Output:
    """``runnable.invoke(input, config)`` as a middleware's own call: tagged internal (see the module doc); in a
    controlled run, not started once the run is stopped and its answer discarded if the run was stopped meanwhile
    (:class:`InternalCallAbandoned`); in a run with a checkpointer, its answer recorded with the step and given back
    to a replay of the step instead of calling the model again. ``site``: the hook making the call, as
    ``"{middleware}.{hook}"`` (see the module doc)."""
    body = _call(runnable, input, config, site, kwargs)
    call: Callable[[], Output] = lambda: run_sync(body)  # noqa: E731
    return cast(Output, _guards[0][0](call)) if _guards else call()


async def ainvoke_internal(
    runnable: Runnable[Input, Output], input: Input, config: RunnableConfig | None = None, *,
    site: str | None = None, **kwargs: Any
) -> Output:
    """Async twin of :func:`invoke_internal`: in a controlled run the call is abandoned the moment the run is
    stopped (:class:`InternalCallAbandoned`)."""
    body = _call(runnable, input, config, site, kwargs)
    call: Callable[[], Awaitable[Output]] = lambda: run_async(body)  # noqa: E731
    return cast(Output, await _guards[0][1](call)) if _guards else await call()


def is_internal_call(metadata: object) -> bool:
    """Whether ``metadata`` (a callback's or stream event's metadata) carries the genuine internal-call marker."""
    return isinstance(metadata, dict) and metadata.get(INTERNAL_CALL_METADATA_KEY) == _INTERNAL_CALL_TOKEN


class InternalCallTransformer(StreamTransformer):
    """Drops the ``messages`` events of tagged internal model calls from ``stream_events(version="v3")``.

    It runs before LangGraph's built-in transformers (``before_builtins``). A tagged event in this transformer's
    own namespace is dropped from the raw event log; before it is dropped it is made invisible to the messages
    projection too (a streamed ``message-start`` is given the ``"tool"`` role, which ``MessagesTransformer`` skips
    for the rest of that message; a whole ``AIMessage`` payload is emptied). Events of other namespaces (a
    subgraph's) are left alone: that namespace's own transformer owns them.
    """

    before_builtins: ClassVar[bool] = True
    required_stream_modes: ClassVar[tuple[str, ...]] = ("messages",)

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._namespace = list(scope)

    def init(self) -> dict[str, Any]:
        """No projection of its own: this transformer only removes events."""
        return {}

    def process(self, event: ProtocolEvent) -> bool:
        """``False`` (drop) for a tagged internal call's ``messages`` event in this namespace; ``True`` otherwise."""
        if event["method"] != "messages":
            return True
        params: Any = event["params"]
        if params["namespace"] != self._namespace:
            return True
        payload, metadata = params["data"]
        if not is_internal_call(metadata):
            return True
        if isinstance(payload, dict) and payload.get("event") == "message-start":
            payload["role"] = "tool"
        elif isinstance(payload, BaseMessage):
            params["data"] = (None, metadata)
        return False
