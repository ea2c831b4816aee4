"""Stream hold-back: no stream surface carries model text before the middleware that vets it has seen it.

Each middleware declares ``stream_holdback`` (:class:`~middleware_kit.middleware.AgentMiddleware`): ``None`` (tokens
pass through), an ``int`` (a window of characters per content block: PII), or ``"message"`` (the whole answer: an
output guard). The agent takes the strictest declaration of its stack (``"message"`` > the largest window > None)
and, when it holds anything back, gives each model call a :class:`Gate`.

How the gate works. Every stream surface of a model's tokens is a *streaming* callback handler on the model's run:
LangGraph's ``StreamMessagesHandler`` (``stream_mode="messages"``) and ``StreamMessagesHandlerV2``
(``stream_events(version="v3")``), langchain-core's ``astream_events`` and ``astream_log`` handlers (LangGraph
Server's ``events`` mode runs on them). The model is called with those handlers replaced by one proxy that records
what the model reports (start, tokens, protocol events, end) and forwards nothing the agent has not vetted:

- ``"message"``: everything waits until the model's node has finished (the wrap chain, the ``after_model`` hooks and
  the message guards all ran). The node's output decides: the answer landed unchanged: the recorded events are
  replayed as they came (same chunks, ids, run ids, metadata); it was rewritten or replaced (a guard's replacement):
  the events are made from what is written to state, under the model's run id; it was discarded (a retry) or the
  node failed: nothing is sent.
- a window: text is released as it arrives, less its last ``window`` characters, after the message guards
  (``guard_messages``, with ``runtime`` None) rewrote the whole text so far; the rest (the tail, tool-call
  arguments, usage) is released from the node's output when the node has finished. The protocol events of
  ``stream_events(version="v3")`` go the same way (text deltas per content block; the other blocks wait). A v1
  chunk whose content is a list of blocks (some providers' native format) stops the window: the rest of that call
  is held whole, as with ``"message"``.

Inside the model node the streaming handlers also see the hook runs (``{middleware}.{hook}``) without their input
and output, which may hold the answer before the verdict (an ``after_model`` hook reads it from the state view):
names, ids, tags and timing stay.

langchain-core privates used here (no public equivalent), through :mod:`~middleware_kit._engine.compat`:
``V2StreamingCallbackHandler`` (the marker that makes a model report protocol events) and ``message_to_events`` (a
whole message as protocol events).

Other handlers (tracers, OpenTelemetry, usage counters, your own) see the model's run live, as without hold-back:
they are records for operators, not streams to users.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.callbacks.base import BaseCallbackManager
from langchain_core.callbacks.manager import ahandle_event, handle_event
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.types import Command

from middleware_kit._engine.compat import V2StreamingCallbackHandler, message_to_events
from middleware_kit._engine.guards import Guards
from middleware_kit._engine.tracing import HOOK_TAG
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.structured_output import structured_holdback

__all__ = ["Gate", "Holdback", "current", "declared_holdback", "held", "scoped"]

Declaration = int | Literal["message"] | None

_HOLD_EVENTS = frozenset({"on_llm_new_token", "on_stream_event", "on_llm_end"})
Event = tuple[str, "str | None", tuple[Any, ...], dict[str, Any]]
"""A callback event: ``(method, ignore condition, args, kwargs)``, dispatched with langchain-core's handle_event."""


def declared_holdback(owner: str, value: object) -> Declaration:
    """``value`` checked as a ``stream_holdback`` declaration of the middleware ``owner``."""
    if value is None or value == "message":
        return "message" if value == "message" else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise MiddlewareConfigError(
        f"{owner}.stream_holdback is {value!r}; declare None (tokens pass through), an int >= 0 (characters held "
        f"back per content block) or \"message\" (the whole answer waits for the middleware's verdict).",
        middleware=owner,
        hook="stream_holdback",
    )


@dataclass(frozen=True, slots=True)
class Holdback:
    """The hold-back of one agent: the strictest declaration of its stack, and the guards that vet a window."""

    window: int | None
    """Characters held back per content block; None: the whole message."""
    owners: tuple[str, ...] = ()
    """The middlewares (or ``response_format``) whose declaration decided it."""
    guards: Any = field(default=None, compare=False)
    """The agent's message guards (:class:`~middleware_kit._engine.guards.Guards`), run over a window's text."""

    @classmethod
    def of(cls, declarations: Iterable[tuple[str, object]], guards: Any = None) -> Holdback | None:
        """The strictest of ``(owner, declaration)`` pairs; None when nothing is held back."""
        checked = [(owner, declared_holdback(owner, value)) for owner, value in declarations]
        whole = tuple(owner for owner, value in checked if value == "message")
        if whole:
            return cls(None, whole, guards)
        windows = [(value, owner) for owner, value in checked if isinstance(value, int)]
        if not windows:
            return None
        size = max(value for value, _ in windows)
        return cls(size, tuple(owner for value, owner in windows if value == size), guards)

    @classmethod
    def for_agent(cls, middleware: Sequence[Any], response_format: Any, guards: Any) -> Holdback | None:
        """The hold-back of an agent: its middlewares' declarations and its ``response_format``'s."""
        declarations = [(mw.name, mw.stream_holdback) for mw in middleware]
        return cls.of([*declarations, ("response_format", structured_holdback(response_format))], guards)

    @contextlib.contextmanager
    def calling(self, run_id: Any, *, is_async: bool) -> Iterator[Gate | None]:
        """Around one model call: the context's config gets the callbacks of :meth:`gate` (the context, not the
        call's config: a ``RunnableBinding`` merges the context's callbacks back into the config it is given)."""
        config = var_child_runnable_config.get()
        gated = self.gate(config.get("callbacks") if config else None, run_id, is_async=is_async)
        if config is None or gated is None:
            yield None
            return
        token = var_child_runnable_config.set({**config, "callbacks": gated[0]})
        try:
            yield gated[1]
        finally:
            var_child_runnable_config.reset(token)

    def gate(self, callbacks: Any, run_id: Any, *, is_async: bool) -> tuple[Any, Gate] | None:
        """The callbacks to call the model with and the call's gate; None when the call needs none (no scope is open,
        or no streaming handler listens)."""
        scope = _SCOPE.get()
        if scope is None or callbacks is None:
            return None
        handlers = callbacks.handlers if isinstance(callbacks, BaseCallbackManager) else list(callbacks)
        targets = [h for h in handlers if _streams(h)]
        if not targets:
            return None
        gate = Gate(self, targets, f"lc_run--{run_id}")
        proxy = _handler_class(_AsyncProxy if is_async else _Proxy, targets)(gate)
        kept = [h for h in handlers if not _streams(h)] + [proxy]
        swapped: Any
        if isinstance(callbacks, BaseCallbackManager):
            swapped = callbacks.copy()
            swapped.handlers = kept
            swapped.inheritable_handlers = [h for h in swapped.inheritable_handlers if not _streams(h)] + [proxy]
        else:
            swapped = kept
        scope.gates.append(gate)
        return swapped, gate


    @staticmethod
    def strictest(holdbacks: Iterable[Holdback | None]) -> Holdback | None:
        """The strictest of ``holdbacks`` (an agent's own and its callers' inherited ones): the whole message if any
        holds it, else the largest window; a window is vetted by the guards of all of them."""
        found = [h for h in holdbacks if h is not None]
        if len(found) <= 1:
            return found[0] if found else None
        whole = [h for h in found if h.window is None]
        chosen = whole or [max(found, key=lambda h: h.window or 0)]
        window = None if whole else chosen[0].window
        owners = tuple(o for h in found if h.window == window for o in h.owners)
        guards = tuple(g for h in found if h.guards for g in h.guards.guards)
        return Holdback(window, owners, Guards(guards) if guards else None)


NodeRun = Callable[[Any, Any], Any]
NodeArun = Callable[[Any, Any], Awaitable[Any]]


def held(own: Holdback | None, callers: Callable[[], Sequence[Any]], run: NodeRun, arun: NodeArun) -> tuple[
    NodeRun, NodeArun
]:
    """A model node's functions with a scope around each run: its gates settle when the node has returned (every
    vetting hook ran), or give up when it raised. The hold-back is the strictest of the agent's own (``own``) and
    its callers' inherited ones (``callers()``: the frames of the runs this one is nested in, each with its
    ``holdback``), worked out once per caller stack: a sub-agent's tokens wait for its callers' guards too. With
    neither, the node runs as it is."""
    known: dict[tuple[Any, ...], Holdback | None] = {}

    def effective() -> Holdback | None:
        frames = tuple(callers())
        if not frames:
            return own
        if frames not in known:
            if len(known) > 32:  # a few caller stacks per agent in practice
                known.clear()
            known[frames] = Holdback.strictest([own, *(getattr(f, "holdback", None) for f in frames)])
        return known[frames]

    def held_run(state: Any, runtime: Any) -> Any:
        __tracebackhide__ = True
        holdback = effective()
        if holdback is None:
            return run(state, runtime)
        with scoped(holdback) as scope, _quieted(is_async=False):
            try:
                output = run(state, runtime)
            except BaseException as exc:
                dispatch(abandon(scope, exc))
                raise
            dispatch(settle(scope, output))
            return output

    async def held_arun(state: Any, runtime: Any) -> Any:
        __tracebackhide__ = True
        holdback = effective()
        if holdback is None:
            return await arun(state, runtime)
        with scoped(holdback) as scope, _quieted(is_async=True):
            try:
                output = await arun(state, runtime)
            except BaseException as exc:
                await adispatch(abandon(scope, exc))
                raise
            await adispatch(settle(scope, output))
            return output

    return held_run, held_arun


def current() -> Holdback | None:
    """The hold-back of the model node running now (None outside one, or when nothing is held back)."""
    scope = _SCOPE.get()
    return None if scope is None else scope.holdback


def _streams(handler: Any) -> bool:
    """A handler that streams the model's tokens to a consumer (langchain-core's markers), not a tracer."""
    return callable(getattr(handler, "tap_output_iter", None)) or isinstance(handler, V2StreamingCallbackHandler)


# -- the node scope: where the gates of one model node wait for its output -----------------------------------------
@dataclass(slots=True)
class _Scope:
    holdback: Holdback
    gates: list[Gate] = field(default_factory=list)


_SCOPE: ContextVar[_Scope | None] = ContextVar("middleware_kit_holdback", default=None)


@contextlib.contextmanager
def scoped(holdback: Holdback) -> Iterator[_Scope]:
    """Open the scope of one model node run: the gates its model calls make wait in it (a list shared with copied
    contexts, so a model call run in a worker thread or task lands there too)."""
    scope = _Scope(holdback)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@contextlib.contextmanager
def _quieted(*, is_async: bool) -> Iterator[None]:
    """Within the model node, the streaming handlers see the hook runs without their payloads: a hook's input or
    output may hold the answer before the node's verdict (an ``after_model`` hook reads it from the state view)."""
    config = var_child_runnable_config.get()
    callbacks = config.get("callbacks") if config else None
    handlers = callbacks.handlers if isinstance(callbacks, BaseCallbackManager) else list(callbacks or ())
    targets = [h for h in handlers if _streams(h)]
    if config is None or not targets or not isinstance(callbacks, BaseCallbackManager):
        yield
        return
    quiet = _handler_class(_AsyncQuiet if is_async else _Quiet, targets)(targets)
    swapped = callbacks.copy()
    swapped.handlers = [h for h in handlers if not _streams(h)] + [quiet]
    swapped.inheritable_handlers = [h for h in swapped.inheritable_handlers if not _streams(h)] + [quiet]
    token = var_child_runnable_config.set({**config, "callbacks": swapped})
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


_CONDITIONS = {"on_chat_model_start": "ignore_chat_model", "on_retry": "ignore_retry", "on_text": None,
               "on_custom_event": "ignore_custom_event", "on_stream_event": "ignore_llm"}
_PREFIX_CONDITIONS = {"on_chain": "ignore_chain", "on_llm": "ignore_llm", "on_tool": "ignore_agent",
                      "on_agent": "ignore_agent", "on_retriever": "ignore_retriever"}


def _condition(name: str) -> str | None:
    if name in _CONDITIONS:
        return _CONDITIONS[name]
    return next((c for prefix, c in _PREFIX_CONDITIONS.items() if name.startswith(prefix)), None)


def _blanked(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A hook run's chain event without its payload (the run, its name, tags and timing stay)."""
    if not name.startswith("on_chain") or HOOK_TAG not in (kwargs.get("tags") or ()):
        return args, kwargs
    if "inputs" in kwargs:
        kwargs = {**kwargs, "inputs": {}}
    if name == "on_chain_start" and len(args) >= 2:
        args = (args[0], {}, *args[2:])
    elif name == "on_chain_end" and args:
        args = ({}, *args[1:])
    return args, kwargs


class _Quiet:
    """Stands for the streaming handlers inside the model node: forwards every event, hook payloads blanked."""

    run_inline = True
    ignore_llm = ignore_chain = ignore_agent = ignore_retriever = ignore_chat_model = False
    ignore_retry = ignore_custom_event = False

    def __init__(self, targets: list[Any]) -> None:
        self.targets = targets
        self.raise_error = any(getattr(h, "raise_error", False) for h in targets)

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        """A runnable streamed inside the node: each target taps it, as without this proxy."""
        for target in self.targets:
            tap = getattr(target, "tap_output_iter", None)
            output = tap(run_id, output) if tap is not None else output
        return output

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        for target in self.targets:
            tap = getattr(target, "tap_output_aiter", None)
            output = tap(run_id, output) if tap is not None else output
        return output

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_"):
            raise AttributeError(name)
        return functools.partial(self._forward, name)

    def _forward(self, event: str, /, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _blanked(event, args, kwargs)
        handle_event(self.targets, event, _condition(event), *args, **kwargs)


class _AsyncQuiet(_Quiet):
    async def _forward(self, event: str, /, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _blanked(event, args, kwargs)
        await ahandle_event(self.targets, event, _condition(event), *args, **kwargs)


_HANDLER_CLASSES: dict[tuple[type[Any], bool], type[Any]] = {}


def _handler_class(base: type[Any], targets: Sequence[Any]) -> type[Any]:
    """``base`` (a recording or quieting handler class, sync or async), made a ``V2StreamingCallbackHandler`` when
    one of ``targets`` is one (the model then reports protocol events, as it would to them). Made once per kind."""
    v2 = any(isinstance(t, V2StreamingCallbackHandler) for t in targets)
    key = (base, v2)
    if key not in _HANDLER_CLASSES:
        _HANDLER_CLASSES[key] = type(base.__name__ + "V2", (base, V2StreamingCallbackHandler), {}) if v2 else base
    return _HANDLER_CLASSES[key]


def settle(scope: _Scope, output: Any) -> list[tuple[list[Any], list[Event]]]:
    """What each gate of the node sends now that the node returned ``output`` (its writes)."""
    written = [m for m in _written(output) if isinstance(m, AIMessage)]
    landed = {gate: next((m for m in written if m.id and m.id == gate.answer_id), None) for gate in scope.gates}
    spare = [m for m in written if all(m is not found for found in landed.values())]
    last = scope.gates[-1] if scope.gates else None
    plan = []
    for gate in scope.gates:
        final = landed[gate]
        if final is None and gate is last and spare:
            final = spare[-1]  # the answer was replaced (a tripped guard): the replacement is what the call shows
            if final.id is None:
                final.id = gate.message_id
        plan.append((gate.targets, gate.finish(final)))
    scope.gates.clear()
    return plan


def abandon(scope: _Scope, error: BaseException) -> list[tuple[list[Any], list[Event]]]:
    """What each gate sends when the node failed (or was interrupted): no held text, ever."""
    plan = [(gate.targets, gate.fail(error)) for gate in scope.gates]
    scope.gates.clear()
    return plan


def dispatch(plan: Sequence[tuple[list[Any], list[Event]]]) -> None:
    for targets, events in plan:
        for name, condition, args, kwargs in events:
            handle_event(targets, name, condition, *args, **kwargs)


async def adispatch(plan: Sequence[tuple[list[Any], list[Event]]]) -> None:
    for targets, events in plan:
        for name, condition, args, kwargs in events:
            await ahandle_event(targets, name, condition, *args, **kwargs)


def _written(output: Any) -> list[BaseMessage]:
    """The messages a node's return value writes (a dict, a ``Command``, or a list of them)."""
    if isinstance(output, list):
        return [m for item in output for m in _written(item)]
    update = output.update if isinstance(output, Command) else output
    if isinstance(update, dict):
        value = update.get("messages")
    elif isinstance(update, (list, tuple)):
        value = [v for pair in update if isinstance(pair, tuple) and len(pair) == 2 and pair[0] == "messages"
                 for v in (pair[1] if isinstance(pair[1], list) else [pair[1]])]
    else:
        return []
    values = value if isinstance(value, (list, tuple)) else [value]
    return [m for m in values if isinstance(m, BaseMessage)]


# -- one model call ----------------------------------------------------------------------------------------------
class Gate:
    """What one model call reported to the streaming handlers, and what of it has been sent.

    Mutable, per call: created by :meth:`Holdback.gate`, fed by the proxy handler, settled by the node."""

    def __init__(self, holdback: Holdback, targets: list[Any], message_id: str) -> None:
        self.holdback = holdback
        self.targets = targets
        self.message_id = message_id
        self.held: list[Event] = []
        self.started = False
        """The start event was sent (a window releases as it goes)."""
        self.done = False
        self.raw: AIMessage | None = None
        self.raw_text = ""
        self.released = ""
        self.stopped = holdback.window is None
        """No more text goes out before the node settles (whole-message mode, list content, a guard raised)."""
        self.windowed = False
        """Tokens went through the window (they are not among the held events)."""
        self.head_sent = False
        """Protocol events: the ``message-start`` went out (a window)."""
        self.blocks: dict[int, str] = {}
        """Protocol events: the text released per content block whose start went out (a window)."""
        self.raw_blocks: dict[int, str] = {}
        self.streamed = False
        """The model reported tokens (``on_llm_new_token``): the call's closing events include token events."""
        self.base: dict[str, Any] = {}
        """``run_id``, ``parent_run_id``, ``tags`` of the model's run, for the events made here."""
        self.lock = threading.Lock()
        """A model call may run in a worker thread while its node settles (a guard beside it tripped)."""

    @property
    def answer_id(self) -> str:
        """The id of the model's message: the provider's, else ``lc_run--{run id}``."""
        return (self.raw.id if self.raw is not None else None) or self.message_id

    def on(self, name: str, condition: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Event]:
        """The events to send now for the model's event ``name``. After the gate closed, nothing: a call the node
        left running (a guard tripped beside it) keeps its tokens."""
        with self.lock:
            return [] if self.done else self._on(name, condition, args, kwargs)

    def _on(self, name: str, condition: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Event]:
        if not self.base and "run_id" in kwargs:
            self.base = {k: kwargs.get(k) for k in ("run_id", "parent_run_id", "tags")}
        event: Event = (name, condition, args, kwargs)
        if name == "on_llm_error":
            self.done = True
            sent = [*([] if self.started else [e for e in self.held if e[0] not in _HOLD_EVENTS]), event]
            self.held.clear()
            return sent
        if name == "on_llm_end":
            self.raw = _result_message(args[0] if args else kwargs.get("response"))
        self.held.append(event)
        if self.stopped:
            return []
        if name == "on_llm_new_token":
            self.streamed = True
            return self._window(kwargs)
        if name in ("on_chat_model_start", "on_llm_start"):
            self.started = True
            self.held.pop()
            return [event]
        if name == "on_stream_event":
            return self._window_event(event)
        return []

    def _window_event(self, event: Event) -> list[Event]:
        """A protocol event (``stream_events(version="v3")``) through the window: the message's start and its text
        blocks' starts go out, text deltas as they are vetted; anything else waits for the node."""
        payload = event[2][0] if event[2] else None
        if not isinstance(payload, dict):
            return []
        kind = payload.get("event")
        if kind == "message-start" and not self.blocks:
            self.head_sent = True
        elif kind == "content-block-start" and payload["content"].get("type") == "text" \
                and not payload["content"].get("text"):
            self.blocks[payload.get("index", 0)] = ""
        elif kind == "content-block-delta" and payload.get("index", 0) in self.blocks \
                and payload["delta"].get("type") == "text-delta" and not self.stopped:
            return self._release_delta(event, payload)
        else:
            return []  # held
        self.held.pop()
        return [event]

    def _release_delta(self, event: Event, payload: dict[str, Any]) -> list[Event]:
        self.held.pop()
        self.windowed = True
        index = payload.get("index", 0)
        self.raw_blocks[index] = self.raw_blocks.get(index, "") + str(payload["delta"].get("text", ""))
        piece = self._vetted_piece(self.raw_blocks[index], self.blocks[index])
        if not piece:
            return []
        self.blocks[index] += piece
        delta = {**payload, "delta": {**payload["delta"], "text": piece}}
        return [(event[0], event[1], (delta, *event[2][1:]), event[3])]

    def _vetted_piece(self, raw: str, released: str) -> str:
        """What of ``raw`` (vetted) may go out after ``released``: all but the window; "" when the guards refuse it
        or rewrote what is already out (then nothing more goes out before the node settles)."""
        try:
            vetted = self._vet(raw)
        except Exception:  # the guard refuses this text (e.g. PII "block")
            self.stopped = True
            return ""
        if not vetted.startswith(released):
            self.stopped = True
            return ""
        return vetted[len(released):max(len(released), len(vetted) - (self.holdback.window or 0))]

    def _window(self, kwargs: dict[str, Any]) -> list[Event]:
        chunk = kwargs.get("chunk")
        message = getattr(chunk, "message", None)
        if not isinstance(message, AIMessageChunk) or not isinstance(message.content, str):
            self.stopped = True  # content blocks: held whole
            return []
        self.held.pop()
        self.windowed = True
        self.raw_text += message.content
        text = self._vetted_piece(self.raw_text, self.released)
        if not text:
            return []
        self.released += text
        piece = AIMessageChunk(content=text, id=message.id, name=message.name)
        return [("on_llm_new_token", "ignore_llm", (), {**kwargs, "token": text, "chunk": ChatGenerationChunk(
            message=piece, generation_info=getattr(chunk, "generation_info", None))})]

    def _vet(self, text: str) -> str:
        guards = self.holdback.guards
        if not guards:
            return text
        vetted = guards.messages([AIMessage(content=text, id=self.message_id)], None)
        content = vetted[0].content if len(vetted) == 1 else text
        return content if isinstance(content, str) else text

    def finish(self, final: AIMessage | None) -> list[Event]:
        """The events that close this call, now that the node wrote ``final`` (None: the answer was dropped)."""
        with self.lock:
            if self.done:
                return []
            self.done = True
            held, self.held = self.held, []
        start = [e for e in held if e[0] in ("on_chat_model_start", "on_llm_start")]
        if not start and not self.started:  # the handlers never saw this call begin: it stays unseen
            return []
        if final is None:  # discarded: a held call vanishes; a started one ends with what it showed
            return [self._end(AIMessage(content=self.released, id=self.message_id))] if self.started else []
        raw = self.raw
        if raw is not None and _same(raw, final) and not self.windowed:
            return held  # landed unchanged: the model's own events, as they came (less a start already sent)
        tokens = self._tokens(final, held)
        return [*start, *tokens, self._end(final)]

    def _tokens(self, final: AIMessage, held: list[Event]) -> list[Event]:
        streamed_v2 = any(e[0] == "on_stream_event" for e in held)
        streamed_v1 = self.streamed or any(e[0] == "on_llm_new_token" for e in held)
        if streamed_v2 or self.head_sent:
            return [("on_stream_event", "ignore_llm", (event,), dict(self.base))
                    for event in self._rest_of_protocol(final)]
        if not streamed_v1:
            return []
        content: Any = final.content
        if isinstance(content, str) and self.released:
            content = content[len(self.released):] if content.startswith(self.released) else ""
        rest = AIMessageChunk(
            content=content, id=final.id or self.message_id, name=final.name,
            tool_call_chunks=[{"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i,
                               "type": "tool_call_chunk"} for i, c in enumerate(final.tool_calls)],
            usage_metadata=final.usage_metadata, response_metadata=final.response_metadata,
        )
        last = AIMessageChunk(content="" if isinstance(content, str) else [], id=final.id or self.message_id,
                              chunk_position="last")
        return [("on_llm_new_token", "ignore_llm", (), {**self.base, "token": piece.content,
                                                        "chunk": ChatGenerationChunk(message=piece)})
                for piece in (rest, last)]

    def _end(self, final: AIMessage) -> Event:
        return ("on_llm_end", "ignore_llm", (LLMResult(generations=[[ChatGeneration(message=final)]]),),
                dict(self.base))

    def fail(self, error: BaseException) -> list[Event]:
        """The node failed: a started call ends with ``error``; a held one sends nothing."""
        with self.lock:
            if self.done:
                return []
            self.done = True
            self.held.clear()
        return [("on_llm_error", "ignore_llm", (error,), dict(self.base))] if self.started else []


    def _rest_of_protocol(self, final: AIMessage) -> list[Any]:
        """The protocol events of ``final`` less what a window already sent (the start, text already released)."""
        rest = []
        for event in _protocol_events(final, self.message_id):
            kind, index = event.get("event"), event.get("index", 0)
            if kind == "message-start" and self.head_sent:
                continue
            if index in self.blocks and kind == "content-block-start":
                continue
            if index in self.blocks and kind == "content-block-delta" and event["delta"].get("type") == "text-delta":
                text, released = str(event["delta"].get("text", "")), self.blocks[index]
                event = {**event, "delta": {**event["delta"], "text": text[len(released):]
                                            if text.startswith(released) else ""}}
            rest.append(event)
        return rest


def _result_message(result: Any) -> AIMessage | None:
    generations = getattr(result, "generations", None)
    if generations and generations[0]:
        message = getattr(generations[0][0], "message", None)
        return message if isinstance(message, AIMessage) else None
    return None


def _same(raw: AIMessage, final: AIMessage) -> bool:
    return final.id == raw.id and final.content == raw.content and final.tool_calls == raw.tool_calls


def _protocol_events(message: AIMessage, message_id: str) -> list[Any]:
    """The ``stream_events(version="v3")`` lifecycle of a whole message (langchain-core's own replay)."""
    return list(message_to_events(message, message_id=message.id or message_id))


# -- the proxy handler: one per gated model call ----------------------------------------------------------------
_EVENTS = {
    "on_chat_model_start": "ignore_chat_model",
    "on_llm_start": "ignore_llm",
    "on_llm_new_token": "ignore_llm",
    "on_stream_event": "ignore_llm",
    "on_llm_end": "ignore_llm",
    "on_llm_error": "ignore_llm",
}


class _ProxyState:
    """Stands for the streaming handlers on the model's run: records, and sends what its gate lets through (the
    event methods, sync or async, are set below from ``_EVENTS``)."""

    run_inline = True

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.raise_error = any(getattr(h, "raise_error", False) for h in gate.targets)

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output


class _Proxy(_ProxyState, BaseCallbackHandler):
    """:class:`_ProxyState` for a sync run."""


class _AsyncProxy(_ProxyState, AsyncCallbackHandler):
    """:class:`_ProxyState` for an async run."""


def _sync_method(name: str, condition: str) -> Any:
    def method(self: _Proxy, *args: Any, **kwargs: Any) -> None:
        dispatch([(self.gate.targets, self.gate.on(name, condition, args, kwargs))])

    method.__name__ = name
    return method


def _async_method(name: str, condition: str) -> Any:
    async def method(self: _AsyncProxy, *args: Any, **kwargs: Any) -> None:
        await adispatch([(self.gate.targets, self.gate.on(name, condition, args, kwargs))])

    method.__name__ = name
    return method


for _event_name, _ignore in _EVENTS.items():
    setattr(_Proxy, _event_name, _sync_method(_event_name, _ignore))
    setattr(_AsyncProxy, _event_name, _async_method(_event_name, _ignore))

