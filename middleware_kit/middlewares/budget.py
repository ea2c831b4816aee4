"""``BudgetMiddleware``: token and cost budgets per run, per thread and per tenant, with an escalation ladder.

Where the numbers live (so the middleware stays stateless and the limits hold across workers):

- **run** and **thread** usage live in state (the ``budget`` key): the run usage is reset by ``before_agent`` at the
  start of an invocation (not on resume), the thread usage is checkpointed with the thread.
- **tenant** usage lives in the LangGraph store (``runtime.store``), one item per thread of the tenant under
  ``(*namespace, tenant_id)``, holding that thread's cumulative usage for the tenant. Each thread has one writer at a
  time (one run per thread), and the value written is cumulative (idempotent when a step is replayed), so concurrent
  workers never lose an update; the tenant total is the sum of the items, read before every model call.

Usage of a model call comes from the answer's ``usage_metadata``; when a provider gives none, it is counted exactly
with tiktoken (:mod:`middleware_kit.middlewares._tokens`: offline vocabularies, never a silent estimate; the event
says ``counted_by="tiktoken"``). Money is ``tokens x price`` from a :class:`PriceTable` keyed by model name.

Model calls made *inside* middleware (a summarizer, a checking model, a tool emulator) are reported with
:func:`charge`: they are charged to the middleware that made them (``by_source`` in the usage) and count against the
same limits, from the next check on.

**Sub-agents** (``inherited``: docs/subagents.md): an agent run inside a run of this agent (a ``task`` tool, a tool
that invokes an agent) has no ``budget`` state; its model calls are checked against this agent's run, thread and tenant
usage (as this agent's last budget hook worked it out, plus the sub-agents' calls since) and charged to them, under
``by_source["subagent:<its name>"]``, folded in at this agent's next budget hook (:class:`_SubagentBudget`). A spent
budget ends the sub-agent with the final message and this agent at its next check.

The escalation ladder, each step optional, on the ratio ``used / limit`` of the tightest limit:
``warn_at`` (a ``budget_warning`` event), ``switch_at`` (later calls go to ``cheaper_model``), ``check_in_at`` (an
``interrupt()`` asks a human whether to continue; its ``before_model`` hook is then declared ``may_interrupt`` and gets
a node of its own), and ``1.0``: the run ends with a final message (``on_exceeded="end"``) or raises
:class:`BudgetExceededError` (``"error"``). Ending never leaves a tool call unanswered.
"""

from __future__ import annotations

import inspect
import json
import math
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, Literal, NotRequired, TypedDict, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Command, interrupt
from pydantic import PlainValidator, ValidationError

from middleware_kit._engine.compat import mark_invalid_resume
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.pairing import close_pending
from middleware_kit.decorators import hook_config
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import (
    CALLABLE,
    FINITE_AT_LEAST_0,
    FRACTION,
    INT_AT_LEAST_0,
    NON_EMPTY_NAME,
    Config,
    config_error,
    instance_of,
    one_of,
    rule,
)
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.middlewares._tokens import (
    TOOL_CALL_FRAMING,
    TiktokenCounter,
    VocabularyNotFoundError,
    encoding_for_model,
)
from middleware_kit.types import AgentState, ExtendedModelResponse, ModelRequest, ModelResponse, OmitFromInput

__all__ = [
    "MODEL_SOURCE",
    "NO_MODEL_CALL",
    "BudgetCheckInError",
    "BudgetExceededError",
    "BudgetLimit",
    "BudgetMiddleware",
    "BudgetState",
    "ModelPrice",
    "PriceTable",
    "UnknownModelPriceError",
    "Usage",
    "charge",
]

Scope = Literal["run", "thread", "tenant"]
_SCOPES: tuple[Scope, ...] = ("run", "thread", "tenant")
NO_MODEL_CALL = "middleware_kit_no_model_call"
"""``response_metadata`` key a middleware sets (to True) on an answer it wrote itself without calling a model (a
refusal, a cached reply): the budget then charges nothing for it, instead of counting its text with tiktoken."""
MODEL_SOURCE = "model"
"""The ``by_source`` key of the agent's own model calls (other sources are middleware names)."""


# -- values ----------------------------------------------------------------------------------------------------
class Usage(TypedDict):
    """Tokens, money and model calls (a plain dict, so it checkpoints and stores as JSON)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float
    """In the currency of the price table (0.0 without one)."""
    calls: int


def _zero() -> Usage:
    return Usage(input_tokens=0, output_tokens=0, total_tokens=0, cost=0.0, calls=0)


def _add(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> Usage:
    a = a or _zero()
    return Usage(
        input_tokens=int(a["input_tokens"]) + int(b["input_tokens"]),
        output_tokens=int(a["output_tokens"]) + int(b["output_tokens"]),
        total_tokens=int(a["total_tokens"]) + int(b["total_tokens"]),
        cost=float(a["cost"]) + float(b["cost"]),
        calls=int(a["calls"]) + int(b["calls"]),
    )


_TOKENS = INT_AT_LEAST_0.or_none()
_MONEY = FINITE_AT_LEAST_0.or_none("a number >= 0 or None")


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetLimit:
    """A limit in tokens (input + output), in money, or both (whichever is reached first)."""

    tokens: int | None = None
    cost: float | None = None
    """In the currency of the :class:`PriceTable` (needs ``prices=``)."""

    def __post_init__(self) -> None:
        _TOKENS.check("BudgetLimit", "tokens", self.tokens)
        _MONEY.check("BudgetLimit", "cost", self.cost)
        if self.tokens is None and self.cost is None:
            raise MiddlewareConfigError(
                "BudgetLimit: give tokens=..., cost=... or both.", middleware="BudgetLimit", hook="tokens"
            )

    def ratio(self, used: Mapping[str, Any]) -> float:
        """``used / limit`` of the tighter of the two (1.0 or more: reached)."""
        ratios = [
            _ratio(float(used[key]), float(limit))
            for key, limit in (("total_tokens", self.tokens), ("cost", self.cost))
            if limit is not None
        ]
        return max(ratios)


def _ratio(used: float, limit: float) -> float:
    if limit > 0:
        return used / limit
    return 1.0 if used <= 0 else math.inf


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Price per million tokens: ``input``, ``output`` and (optional) ``cached_input`` (cache reads)."""

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:
        for param in ("input", "output", "cached_input"):
            value = getattr(self, param)
            if param == "cached_input" and value is None:
                continue
            _MONEY.check("ModelPrice", param, value)
            if value is None:
                raise MiddlewareConfigError("ModelPrice: input and output prices are required.",
                                            middleware="ModelPrice", hook=param)

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        cached = min(cached_input_tokens, input_tokens) if self.cached_input is not None else 0
        cached_price = self.cached_input if self.cached_input is not None else self.input
        return ((input_tokens - cached) * self.input + cached * cached_price + output_tokens * self.output) / 1e6


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per model name. A name matches exactly, else the longest key it starts with (``"gpt-4o-2024-08-06"``
    uses ``"gpt-4o"``; ``"gpt-4o-mini"`` uses ``"gpt-4o-mini"`` when listed). Values: :class:`ModelPrice` or an
    ``(input, output)`` pair, per million tokens."""

    prices: Mapping[str, ModelPrice] = field(default_factory=dict)

    def __init__(self, prices: Mapping[str, ModelPrice | tuple[float, float]] | None = None) -> None:
        table: dict[str, ModelPrice] = {}
        for name, price in (prices or {}).items():
            if not isinstance(name, str) or not name:
                raise MiddlewareConfigError(f"PriceTable: model names must be non-empty strings, got {name!r}.",
                                            middleware="PriceTable", hook="prices")
            if isinstance(price, tuple) and len(price) == 2:
                price = ModelPrice(float(price[0]), float(price[1]))
            if not isinstance(price, ModelPrice):
                raise MiddlewareConfigError(
                    f"PriceTable: the price of {name!r} must be a ModelPrice or an (input, output) pair per million "
                    f"tokens, got {price!r}.",
                    middleware="PriceTable",
                    hook="prices",
                )
            table[name] = price
        object.__setattr__(self, "prices", dict(sorted(table.items())))

    def price_for(self, model_name: str | None) -> ModelPrice | None:
        if not model_name:
            return None
        found = self.prices.get(model_name)
        if found is not None:
            return found
        best = max((k for k in self.prices if model_name.startswith(k)), key=len, default=None)
        return self.prices[best] if best is not None else None


# -- errors ------------------------------------------------------------------------------------------------------
class BudgetExceededError(MiddlewareError):
    """A budget limit is reached (``on_exceeded="error"``), or a human declined to continue at the check-in.

    Attributes:
        scope: ``"run"``, ``"thread"`` or ``"tenant"``.
        used: The usage of that scope (a :class:`Usage` dict).
        limit: The :class:`BudgetLimit` reached.
    """

    def __init__(self, scope: str, used: Mapping[str, Any], limit: BudgetLimit, *, middleware: str) -> None:
        super().__init__(
            f"{middleware}: the {scope} budget is spent ({_describe(used, limit)}), so the model was not called "
            f"again. Raise the {scope} limit, start a new "
            f"{'thread' if scope == 'thread' else 'run' if scope == 'run' else 'budget period'}, or pass "
            f"on_exceeded='end' to end the run with a message instead of raising.",
            middleware=middleware,
            hook="before_model",
        )
        self.scope = scope
        self.used = dict(used)
        self.limit = limit


class UnknownModelPriceError(MiddlewareError, LookupError):
    """A cost limit is set but the price table has no price for a model that was (or is about to be) called."""

    def __init__(self, model_name: str | None, known: Sequence[str], *, middleware: str, hook: str) -> None:
        super().__init__(
            f"{middleware}: no price for model {model_name!r} (known: {sorted(known)}), so its cost cannot be "
            f"counted against a cost limit. Add it: prices={{{model_name!r}: ModelPrice(input=..., output=...)}} "
            f"(per million tokens), or use token limits only.",
            middleware=middleware,
            hook=hook,
        )
        self.model_name = model_name


class BudgetCheckInError(MiddlewareError, ValueError):
    """The resume value of a budget check-in is not a decision (``True``/``False`` or ``{"continue": bool}``)."""


# -- charges from other middlewares ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Charge:
    source: str
    model: str | None
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    counted_by: str


class _Ledger:
    """Charges reported by middlewares, waiting for a budget hook of the same run to fold them into state.

    Keyed by the run's ``RunControl`` (one per invocation, shared by every node of it); holds a reference to it, so
    its id cannot be reused while the entry lives. Bounded: runs without a BudgetMiddleware never drain theirs."""

    max_runs = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, tuple[object, list[_Charge]]] = OrderedDict()

    def add(self, key: object, item: _Charge) -> None:
        with self._lock:
            entry = self._entries.get(id(key))
            if entry is None or entry[0] is not key:
                entry = (key, [])
                self._entries[id(key)] = entry
            entry[1].append(item)
            self._entries.move_to_end(id(key))
            while len(self._entries) > self.max_runs:
                self._entries.popitem(last=False)

    def drain(self, key: object) -> list[_Charge]:
        with self._lock:
            entry = self._entries.pop(id(key), None)
        return entry[1] if entry is not None and entry[0] is key else []


AccountKey = tuple[str, Any, str]


class _Accounts:
    """Per caller (its thread, else its run) and :class:`BudgetMiddleware` name: the usage the caller's last budget
    hook worked out, and the model calls of the agents run inside it not yet folded into its state
    (:class:`_SubagentBudget`). Keyed by the thread when the run has one: a sub-agent paused for review and resumed by
    a later invocation charges the same account, and checks against the usage its caller had when it paused (one run
    per thread: run control). Bounded; entries of runs without a thread hold their run's key, so its id cannot be
    reused while they live."""

    max_entries = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[AccountKey, tuple[object | None, dict[str, Any], list[_Charge]]] = OrderedDict()

    @staticmethod
    def key(runtime: Any, owner: str) -> tuple[AccountKey, object | None] | None:
        """The account of the current run for the budget named ``owner`` (None outside a run)."""
        from langchain_core.runnables.config import var_child_runnable_config

        config = var_child_runnable_config.get() or {}
        thread = (config.get("configurable") or {}).get("thread_id")
        if thread is not None:
            return ("thread", str(thread), owner), None
        run = _run_key(runtime)
        return (("run", id(run), owner), run) if run is not None else None

    def _entry(self, found: tuple[AccountKey, object | None]) -> tuple[object | None, dict[str, Any], list[_Charge]]:
        key, anchor = found
        entry = self._entries.get(key)
        if entry is None or entry[0] is not anchor:
            entry = self._entries[key] = (anchor, {}, [])
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return entry

    def publish(self, found: tuple[AccountKey, object | None] | None, book: Mapping[str, Any]) -> None:
        if found is None:
            return
        usage = {scope: dict(book[scope]) for scope in ("run", "thread", "tenant_total") if book.get(scope)}
        with self._lock:
            entry = self._entry(found)
            entry[1].clear()
            entry[1].update(usage)

    def charge(self, found: tuple[AccountKey, object | None] | None, item: _Charge) -> None:
        if found is not None:
            with self._lock:
                self._entry(found)[2].append(item)

    def read(self, found: tuple[AccountKey, object | None] | None) -> tuple[dict[str, Any], list[_Charge]]:
        """(the caller's usage as last published, the charges still pending), left in place."""
        if found is None:
            return {}, []
        with self._lock:
            entry = self._entries.get(found[0])
            if entry is None or entry[0] is not found[1]:
                return {}, []
            return dict(entry[1]), list(entry[2])

    def drain(self, found: tuple[AccountKey, object | None] | None) -> list[_Charge]:
        if found is None:
            return []
        with self._lock:
            entry = self._entries.get(found[0])
            if entry is None or entry[0] is not found[1]:
                return []
            charges = list(entry[2])
            entry[2].clear()
            return charges


_LEDGER = _Ledger()
_ACCOUNTS = _Accounts()


def _run_key(runtime: Any) -> object | None:
    control = getattr(runtime, "control", None)
    if control is not None:
        return cast(object, control)
    from langgraph.runtime import get_runtime

    try:
        return cast(object, getattr(get_runtime(), "control", None))
    except (RuntimeError, KeyError, AttributeError):
        return None


def _model_name(model: Any) -> str | None:
    if isinstance(model, str):
        return model
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _output_tokens(counter: TiktokenCounter, message: BaseMessage) -> int:
    total = counter.text(message.text)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            total += TOOL_CALL_FRAMING + counter.text(call["name"]) + counter.text(json.dumps(call["args"]))
    return total


def _measure(
    source: str,
    response: BaseMessage | None,
    usage: Mapping[str, Any] | None,
    messages: Sequence[BaseMessage] | None,
    model_name: str | None,
    tools: Sequence[Any] = (),
    encoding: str | None = None,
) -> _Charge:
    meta: Mapping[str, Any] | None = usage
    if meta is None and isinstance(response, AIMessage):
        meta = cast("Mapping[str, Any] | None", response.usage_metadata)
    if isinstance(response, AIMessage):
        model_name = response.response_metadata.get("model_name") or model_name
    if meta is not None:
        details = meta.get("input_token_details") or {}
        return _Charge(source, model_name, int(meta.get("input_tokens") or 0), int(meta.get("output_tokens") or 0),
                       int(details.get("cache_read") or 0), "usage_metadata")
    if response is None or messages is None:
        raise MiddlewareConfigError(
            f"charge() from {source}: pass usage=... (a usage_metadata dict), or the model's answer as response= "
            f"(with usage_metadata, or with messages= to count both sides with tiktoken).",
            middleware=source,
            hook="charge",
        )
    counter = TiktokenCounter(encoding or encoding_for_model(model_name))
    try:
        input_tokens = counter(messages) + (counter.count_tools(tools) if tools else 0)
        output_tokens = _output_tokens(counter, response)
    except VocabularyNotFoundError as exc:
        raise VocabularyNotFoundError(
            f"{source}: the model gave no usage_metadata and it cannot be counted exactly: {exc}",
            middleware=source,
            hook="charge",
        ) from None
    return _Charge(source, model_name, input_tokens, output_tokens, 0, "tiktoken")


def charge(
    runtime: Any,
    *,
    middleware: str,
    response: BaseMessage | None = None,
    usage: Mapping[str, Any] | None = None,
    messages: Sequence[BaseMessage] | None = None,
    model: Any = None,
) -> dict[str, Any]:
    """Report a model call a middleware made itself (a summarizer, a checking model, a tool emulator).

    The usage is charged to ``middleware`` (its name): a ``usage_charged`` event goes to the custom stream at once,
    and the run's :class:`BudgetMiddleware`, if any, adds it to the run, thread and tenant usage (under
    ``by_source[middleware]``) at its next hook, so it counts against the limits from the next check on.

    Args:
        runtime: The runtime of the hook making the call (``request.runtime``, the hook's ``runtime``), or None to
            use the current run's.
        middleware: Who made the call (``self.name``).
        response: The model's answer: its ``usage_metadata`` is used when present.
        usage: A ``usage_metadata``-shaped dict (``input_tokens``, ``output_tokens``), instead of ``response``.
        messages: What the model was sent: counted with tiktoken (exactly, offline) when the answer has no usage.
        model: The model (or its name) that answered, for the price table.

    Returns:
        The event written (with ``input_tokens``, ``output_tokens``, ``model`` and ``counted_by``).
    """
    item = _measure(middleware, response, usage, messages, _model_name(model))
    key = _run_key(runtime)
    if key is not None:
        _LEDGER.add(key, item)
    event = {
        "event": "usage_charged",
        "middleware": middleware,
        "model": item.model,
        "input_tokens": item.input_tokens,
        "output_tokens": item.output_tokens,
        "counted_by": item.counted_by,
    }
    emit(runtime, event)
    return event


# -- state -------------------------------------------------------------------------------------------------------
def _newest(current: Any, new: Any) -> Any:
    return new


class BudgetState(AgentState):
    """State of :class:`BudgetMiddleware`: the ``budget`` key (in the result, not accepted as input).

    ``budget`` holds ``run``, ``thread`` (:class:`Usage`), ``tenant`` (this thread's usage per tenant id),
    ``tenant_total`` (the tenant's usage over all its threads, as of the last check), ``by_source`` (``{"run":
    {source: Usage}, "thread": {...}}``; source ``"model"`` is the agent's own model, others are middleware names),
    ``ledger`` (the id of this thread's item in the store) and the run's escalation ``flags``.
    """

    budget: NotRequired[Annotated[dict[str, Any], OmitFromInput, _newest]]


# -- the middleware ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Verdict:
    ratio: float
    scope: Scope | None
    used: Mapping[str, Any] | None
    limit: BudgetLimit | None


def _some_limit(owner: str, args: Mapping[str, Any]) -> None:
    if args["run"] is None and args["thread"] is None and args["tenant"] is None:
        raise config_error(owner, "run", f"{owner}: run (or thread=, tenant=): give at least one limit, e.g. "
                                         f"run=BudgetLimit(tokens=50_000).")


def _cost_has_prices(owner: str, args: Mapping[str, Any]) -> None:
    limits = (args["run"], args["thread"], args["tenant"])
    if args["prices"] is None and any(isinstance(x, BudgetLimit) and x.cost is not None for x in limits):
        raise config_error(owner, "prices", f"{owner}: prices is required by a cost limit: pass prices={{'model-name': "
                                            f"ModelPrice(input=..., output=...)}} (per million tokens).")


def _switch_pair(owner: str, args: Mapping[str, Any]) -> None:
    switch_at, cheaper_model = args["switch_at"], args["cheaper_model"]
    if (switch_at is None) != (cheaper_model is None):
        param = "switch_at" if switch_at is None else "cheaper_model"
        raise config_error(owner, param, f"{owner}: {param} is missing: switch_at (a fraction) and cheaper_model (a "
                                         f"chat model) go together; give both or neither.")
    if cheaper_model is not None and not isinstance(cheaper_model, BaseChatModel):
        raise config_error(owner, "cheaper_model", f"{owner}: cheaper_model must be a chat model instance, got "
                                                   f"{cheaper_model!r}.")


_LIMIT = instance_of(BudgetLimit, expected="a BudgetLimit(tokens=..., cost=...)").or_none()
_LADDER_STEP = FRACTION.or_none("a fraction of the limit in (0, 1] or None")
_PRICES = "a PriceTable or a mapping of model name to ModelPrice"


class BudgetMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware[BudgetState, Any]):
    """Token and money budgets per run, thread and tenant, with a warning, a cheaper model, a human check-in and a
    final message as the budget runs out.

    Args:
        run: The limit of one invocation.
        thread: The limit of a thread (checkpointed; needs a checkpointer to span invocations).
        tenant: The limit of a tenant over all its threads and workers (in ``runtime.store``; needs
            ``create_agent(store=...)``), or a function ``tenant_id -> BudgetLimit | None`` (per-tenant plans).
        tenant_id: Where the tenant id is read: an attribute/key of ``runtime.context`` (default ``"tenant_id"``) or
            a function of the runtime. A run without one, with a tenant limit, is an error (never unbudgeted).
        prices: A :class:`PriceTable` (or the mapping to build one); required by cost limits.
        warn_at: Emit a ``budget_warning`` event once per run and scope when a scope reaches this fraction (None: no).
        cheaper_model: The model to switch to at ``switch_at``.
        switch_at: From this fraction on, model calls go to ``cheaper_model`` (a ``budget_model_switched`` event).
        check_in_at: At this fraction, once per run, ``interrupt()`` asks whether to continue: resume with ``True``
            / ``{"continue": True}`` to go on, ``False`` to end the run (needs a checkpointer).
        on_exceeded: At the limit: ``"end"`` (default) ends the run with a final ``AIMessage``; ``"error"`` raises
            :class:`BudgetExceededError`.
        namespace: The store namespace prefix of the tenant items (``(*namespace, tenant_id)``).
        encoding: The tiktoken encoding used when a model gives no ``usage_metadata`` (default: from the model name).
    """

    inherited = True  # applied by agents run inside this agent's runs too (AgentMiddleware.inherited)

    state_schema = BudgetState
    __config__ = Config(
        run=_LIMIT,
        thread=_LIMIT,
        tenant=(instance_of(BudgetLimit, expected="a BudgetLimit") | CALLABLE).or_none(
            "a BudgetLimit, a function tenant_id -> BudgetLimit | None, or None"
        ),
        tenant_id=(NON_EMPTY_NAME | CALLABLE).saying("a context attribute name or a function of the runtime"),
        prices=instance_of(PriceTable, Mapping, expected=_PRICES).or_none(_PRICES),
        warn_at=_LADDER_STEP,
        switch_at=_LADDER_STEP,
        check_in_at=_LADDER_STEP,
        on_exceeded=one_of("end", "error"),
        namespace=rule(
            lambda v: isinstance(v, tuple) and bool(v) and all(isinstance(p, str) and p for p in v),
            "a non-empty tuple of non-empty strings",
        ),
        relations=(_some_limit, _cost_has_prices, _switch_pair),
    )

    def __init__(
        self,
        *,
        run: BudgetLimit | None = None,
        thread: BudgetLimit | None = None,
        tenant: BudgetLimit | Callable[[str], BudgetLimit | None] | None = None,
        tenant_id: str | Callable[[Any], str | None] = "tenant_id",
        prices: PriceTable | Mapping[str, ModelPrice | tuple[float, float]] | None = None,
        warn_at: float | None = 0.8,
        cheaper_model: BaseChatModel | None = None,
        switch_at: float | None = None,
        check_in_at: float | None = None,
        on_exceeded: Literal["end", "error"] = "end",
        namespace: tuple[str, ...] = ("middleware_kit", "budget"),
        encoding: str | None = None,
    ) -> None:
        if prices is not None and not isinstance(prices, PriceTable):
            prices = PriceTable(prices)
        self.run = run
        self.thread = thread
        self.tenant = tenant
        self.tenant_id = tenant_id
        self.prices = prices
        self.warn_at = warn_at
        self.cheaper_model = cheaper_model
        self.switch_at = switch_at
        self.check_in_at = check_in_at
        self.on_exceeded = on_exceeded
        self.namespace = namespace
        self.encoding = encoding
        self._cost_limited = any(isinstance(x, BudgetLimit) and x.cost is not None for x in (run, thread, tenant))
        if check_in_at is not None:
            # Only an agent that may ask a human pays for a node of its own (see the module docstring).
            self.__dict__["before_model"] = self._before_model_check_in
            self.__dict__["abefore_model"] = self._abefore_model_check_in

    # -- reading state ---------------------------------------------------------------------------------------
    def _book(self, state: Mapping[str, Any] | None) -> dict[str, Any]:
        book = dict((state or {}).get("budget") or {})
        book.setdefault("run", _zero())
        book.setdefault("thread", _zero())
        book.setdefault("tenant", {})
        book.setdefault("by_source", {"run": {}, "thread": {}})
        book.setdefault("flags", {})
        return book

    def _tenant_of(self, runtime: Any) -> str | None:
        if self.tenant is None:
            return None
        if callable(self.tenant_id):
            value = self.tenant_id(runtime)
        else:
            context = getattr(runtime, "context", None)
            value = (context.get(self.tenant_id) if isinstance(context, Mapping)
                     else getattr(context, self.tenant_id, None))
        if value is None or value == "":
            raise MiddlewareConfigError(
                f"{self.name}: a tenant budget is set but this run has no tenant id (runtime.context."
                f"{self.tenant_id if isinstance(self.tenant_id, str) else '<tenant_id(runtime)>'} is missing). Pass "
                f"context={{'{self.tenant_id if isinstance(self.tenant_id, str) else 'tenant_id'}': ...}} to "
                f"invoke, or build an agent without tenant=.",
                middleware=self.name,
                hook="tenant_id",
            )
        return str(value)

    def _tenant_limit(self, tenant: str | None) -> BudgetLimit | None:
        if tenant is None or self.tenant is None:
            return None
        limit = self.tenant if isinstance(self.tenant, BudgetLimit) else self.tenant(tenant)
        if limit is not None and not isinstance(limit, BudgetLimit):
            raise MiddlewareConfigError(
                f"{self.name}: tenant({tenant!r}) returned {limit!r}; it must return a BudgetLimit or None.",
                middleware=self.name,
                hook="tenant",
            )
        if limit is not None and limit.cost is not None and self.prices is None:
            raise MiddlewareConfigError(
                f"{self.name}: the tenant limit of {tenant!r} has a cost but no prices= were given.",
                middleware=self.name,
                hook="prices",
            )
        return limit

    def _store(self, runtime: Any) -> Any:
        store = getattr(runtime, "store", None)
        if store is None:
            raise MiddlewareConfigError(
                f"{self.name}: tenant budgets live in the LangGraph store, and this agent has none. Pass "
                f"create_agent(..., store=...) (PostgresStore to share them across workers).",
                middleware=self.name,
                hook="tenant",
            )
        return store

    def _namespace(self, tenant: str) -> tuple[str, ...]:
        return (*self.namespace, tenant)

    @staticmethod
    def _sum_items(items: Sequence[Any], ledger: str | None) -> Usage:
        total = _zero()
        for item in items:
            if item.key != ledger and isinstance(item.value, Mapping):
                total = _add(total, item.value)
        return total

    def _tenant_total(self, runtime: Any, tenant: str, ledger: str | None) -> Steps[Usage]:
        """The tenant's usage in the store, every thread but this one (one body: ``search``/``asearch``)."""
        store, offset = self._store(runtime), 0
        namespace = self._namespace(tenant)
        items: list[Any] = []
        while True:
            page = yield Step(partial(store.search, limit=1000, offset=offset),
                              partial(store.asearch, limit=1000, offset=offset), namespace)
            items.extend(i for i in page if tuple(i.namespace) == namespace)
            if len(page) < 1000:
                return self._sum_items(items, ledger)
            offset += len(page)

    def _put_tenant(self, runtime: Any, put: tuple[tuple[str, ...], str, Usage] | None) -> Steps[None]:
        """Write this thread's tenant item, when a hook owes it (``put``/``aput``)."""
        if put is not None:
            store = self._store(runtime)
            yield Step(store.put, store.aput, put[0], put[1], dict(put[2]))

    # -- accounting ------------------------------------------------------------------------------------------
    def _needs_price(self, tenant: str | None) -> bool:
        """A cost limit applies to this run (a per-tenant plan may have one)."""
        if self._cost_limited:
            return True
        limit = self._tenant_limit(tenant) if callable(self.tenant) else None
        return limit is not None and limit.cost is not None

    def _cost(self, item: _Charge, hook: str, tenant: str | None) -> float:
        if self.prices is None:
            return 0.0
        price = self.prices.price_for(item.model)
        if price is None:
            if not self._needs_price(tenant):
                return 0.0
            raise UnknownModelPriceError(item.model, list(self.prices.prices), middleware=self.name, hook=hook)
        return price.cost(item.input_tokens, item.output_tokens, item.cached_input_tokens)

    def _usage_of(self, item: _Charge, hook: str, tenant: str | None) -> Usage:
        return Usage(input_tokens=item.input_tokens, output_tokens=item.output_tokens,
                     total_tokens=item.input_tokens + item.output_tokens, cost=self._cost(item, hook, tenant), calls=1)

    def _post(self, book: dict[str, Any], item: _Charge, tenant: str | None, hook: str) -> Usage:
        usage = self._usage_of(item, hook, tenant)
        book["run"] = _add(book["run"], usage)
        book["thread"] = _add(book["thread"], usage)
        by = {scope: dict(v) for scope, v in book["by_source"].items()}
        for scope in ("run", "thread"):
            by.setdefault(scope, {})[item.source] = _add(by.get(scope, {}).get(item.source), usage)
        book["by_source"] = by
        if tenant is not None:
            book["tenant"] = {**book["tenant"], tenant: _add(book["tenant"].get(tenant), usage)}
            if book.get("tenant_total") is not None:
                book["tenant_total"] = _add(book["tenant_total"], usage)
        return usage

    def _drain(self, runtime: Any, book: dict[str, Any], tenant: str | None, hook: str) -> bool:
        key = _run_key(runtime)
        account = _ACCOUNTS.key(runtime, self.name)
        items = [*(_LEDGER.drain(key) if key is not None else ()), *_ACCOUNTS.drain(account)]
        for item in items:
            self._post(book, item, tenant, hook)
        _ACCOUNTS.publish(account, book)  # what the agents run inside this run check against
        return bool(items)

    def _tenant_put(self, tenant: str | None, book: Mapping[str, Any]) -> tuple[tuple[str, ...], str, Usage] | None:
        used = book["tenant"].get(tenant) if tenant is not None else None
        if tenant is None or not used:  # nothing spent for this tenant in this thread: no item
            return None
        return self._namespace(tenant), str(book["ledger"]), cast(Usage, used)

    # -- deciding --------------------------------------------------------------------------------------------
    def _verdict(self, book: Mapping[str, Any], tenant: str | None) -> _Verdict:
        best = _Verdict(0.0, None, None, None)
        candidates: list[tuple[Scope, BudgetLimit | None, Mapping[str, Any] | None]] = [
            ("run", self.run, book["run"]),
            ("thread", self.thread, book["thread"]),
            ("tenant", self._tenant_limit(tenant), book.get("tenant_total")),
        ]
        for scope, limit, used in candidates:
            if limit is None or used is None:
                continue
            ratio = limit.ratio(used)
            if ratio > best.ratio or best.scope is None:
                best = _Verdict(ratio, scope, used, limit)
        return best

    def _final(self, verdict: _Verdict, why: str) -> AIMessage:
        assert verdict.used is not None and verdict.limit is not None
        return AIMessage(
            content=f"Budget {why}: the {verdict.scope} budget is spent ({_describe(verdict.used, verdict.limit)}); "
            f"the run stopped here.",
            response_metadata={"budget": {"scope": verdict.scope, "middleware": self.name}},
        )

    def _end(self, state: Mapping[str, Any], verdict: _Verdict, runtime: Any, book: dict[str, Any],
             hook: str, why: str = "exceeded") -> dict[str, Any]:
        assert verdict.used is not None and verdict.limit is not None and verdict.scope is not None
        emit(runtime, {"event": "budget_exceeded", "middleware": self.name, "scope": verdict.scope,
                       "ratio": verdict.ratio, "used": dict(verdict.used), "action": self.on_exceeded
                       if why == "exceeded" else "declined", "hook": hook})
        if self.on_exceeded == "error" and why == "exceeded":
            error = BudgetExceededError(verdict.scope, verdict.used, verdict.limit, middleware=self.name)
            error.hook = hook
            raise error
        fix = close_pending(list(state.get("messages") or []), "the run ended because its budget is spent.")
        messages = list(fix.update) if fix is not None else []
        return {"jump_to": "end", "messages": [*messages, self._final(verdict, why)], "budget": book}

    def _warn(self, runtime: Any, book: dict[str, Any], tenant: str | None) -> bool:
        if self.warn_at is None:
            return False
        flags = dict(book["flags"])
        warned = set(flags.get("warned", ()))
        changed = False
        for scope, limit, used in (("run", self.run, book["run"]), ("thread", self.thread, book["thread"]),
                                   ("tenant", self._tenant_limit(tenant), book.get("tenant_total"))):
            if limit is None or used is None or scope in warned:
                continue
            ratio = limit.ratio(used)
            if self.warn_at <= ratio < 1:
                warned.add(scope)
                changed = True
                emit(runtime, {"event": "budget_warning", "middleware": self.name, "scope": scope, "ratio": ratio,
                               "threshold": self.warn_at, "used": dict(used)})
        if changed:
            flags["warned"] = sorted(warned)
            book["flags"] = flags
        return changed

    # -- node hooks ------------------------------------------------------------------------------------------
    def before_agent(self, state: BudgetState, runtime: Any) -> dict[str, Any]:
        book = self._book(state)
        book["ledger"] = book.get("ledger") or uuid.uuid4().hex
        book["run"] = _zero()
        book["by_source"] = {**book["by_source"], "run": {}}
        book["flags"] = {}
        return {"budget": book}

    async def abefore_agent(self, state: BudgetState, runtime: Any) -> dict[str, Any]:
        return self.before_agent(state, runtime)

    def _check(self, state: Mapping[str, Any], runtime: Any, tenant_total: Usage | None,
               tenant: str | None, ask: bool) -> dict[str, Any] | None:
        book = self._book(state)
        book.setdefault("ledger", uuid.uuid4().hex)
        if tenant is not None:
            assert tenant_total is not None
            book["tenant_total"] = _add(tenant_total, book["tenant"].get(tenant) or _zero())
        self._drain(runtime, book, tenant, "before_model")
        verdict = self._verdict(book, tenant)
        if verdict.scope is not None and verdict.ratio >= 1:
            return self._end(state, verdict, runtime, book, "before_model")
        if (ask and self.check_in_at is not None and verdict.ratio >= self.check_in_at
                and not book["flags"].get("checked_in")):
            # Asked first: a resume re-runs this hook, and nothing above it has a side effect.
            if not self._ask(verdict, runtime):
                emit(runtime, {"event": "budget_check_in_answered", "middleware": self.name, "continue": False})
                return self._end(state, verdict, runtime, book, "before_model", why="declined")
            emit(runtime, {"event": "budget_check_in_answered", "middleware": self.name, "continue": True})
            book["flags"] = {**book["flags"], "checked_in": True}
        self._warn(runtime, book, tenant)
        return {"budget": book}

    def _changed_tenant(
        self, state: Mapping[str, Any], update: Mapping[str, Any] | None, tenant: str | None
    ) -> tuple[tuple[str, ...], str, Usage] | None:
        """The store write a node hook owes when it folded charges into this thread's tenant usage."""
        if tenant is None or update is None or "budget" not in update:
            return None
        before = self._book(state)["tenant"].get(tenant)
        book = update["budget"]
        return self._tenant_put(tenant, book) if book["tenant"].get(tenant) != before else None

    def _node(self, state: Mapping[str, Any], runtime: Any, ask: bool) -> Steps[dict[str, Any] | None]:
        """``before_model`` (with ``ask``: the check-in variant), one body for both modes."""
        tenant = self._tenant_of(runtime)
        ledger = self._book(state).get("ledger")
        total = (yield from self._tenant_total(runtime, tenant, ledger)) if tenant is not None else None
        update = self._check(state, runtime, total, tenant, ask)
        yield from self._put_tenant(runtime, self._changed_tenant(state, update, tenant))
        return update

    def _ask(self, verdict: _Verdict, runtime: Any) -> bool:
        assert verdict.used is not None
        payload = {
            "type": "budget_check_in",
            "middleware": self.name,
            "scope": verdict.scope,
            "ratio": round(verdict.ratio, 4),
            "used": dict(verdict.used),
            "question": f"The {verdict.scope} budget is {verdict.ratio:.0%} spent. Continue? Resume with True "
                        f"(or {{'continue': True}}) to go on, False to end the run.",
        }
        ask = interrupt  # looked up now: tests may patch the module global
        try:
            if ask is not _REAL_INTERRUPT or not _HAS_RESPONSE_SCHEMA:
                return self._parse_answer(ask(payload))
            validator = Annotated[bool, PlainValidator(self._parse_answer)]
            try:
                return bool(ask(payload, response_schema=cast(Any, validator)))
            except ValidationError as exc:
                raise _unwrap(exc) from None
        except GraphInterrupt:
            emit(runtime, {"event": "budget_check_in", "middleware": self.name, **{
                k: v for k, v in payload.items() if k != "type"}})
            raise

    def _parse_answer(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, Mapping) and set(value) == {"continue"} and isinstance(value["continue"], bool):
            return bool(value["continue"])
        raise BudgetCheckInError(
            f"{self.name}: the budget check-in was resumed with {value!r:.80}; resume with True or "
            f"{{'continue': True}} to continue, False or {{'continue': False}} to end the run.",
            middleware=self.name,
            hook="before_model",
        )

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        return run_sync(self._node(state, runtime, ask=False))

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        return await run_async(self._node(state, runtime, ask=False))

    @hook_config(can_jump_to=["end"], may_interrupt=True)
    def _before_model_check_in(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        return run_sync(self._node(state, runtime, ask=True))

    @hook_config(can_jump_to=["end"], may_interrupt=True)
    async def _abefore_model_check_in(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        return await run_async(self._node(state, runtime, ask=True))

    def _after(self, state: Mapping[str, Any], runtime: Any, hook: str) -> Steps[dict[str, Any] | None]:
        """``after_model``/``after_agent``, one body for both modes: fold in the charges, write the tenant item."""
        book = self._book(state)
        tenant = self._tenant_of(runtime)
        drained = self._drain(runtime, book, tenant, hook)
        put = self._tenant_put(tenant, book)
        update = {"budget": book} if drained else None
        if hook == "after_model":
            verdict = self._verdict(book, tenant)
            messages = state.get("messages") or []
            last = messages[-1] if messages else None
            if verdict.scope is not None and verdict.ratio >= 1 and isinstance(last, AIMessage) and last.tool_calls:
                update = self._end(state, verdict, runtime, book, "after_model")
        yield from self._put_tenant(runtime, put)
        return update

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        """Writes this thread's tenant usage to the store (after the model call, in the same step, so a failed step
        writes nothing). If the answer took the budget over and asks for tools, ends the run now, closing its calls
        unrun: their results would only feed a model call the budget refuses."""
        return run_sync(self._after(state, runtime, "after_model"))

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        return await run_async(self._after(state, runtime, "after_model"))

    def after_agent(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        """Folds in late charges and writes the tenant item once more (an ``after_model`` skipped by another
        middleware's jump would otherwise leave it behind)."""
        return run_sync(self._after(state, runtime, "after_agent"))

    async def aafter_agent(self, state: BudgetState, runtime: Any) -> dict[str, Any] | None:
        return await run_async(self._after(state, runtime, "after_agent"))

    # -- the model call --------------------------------------------------------------------------------------
    def _prepare(self, request: ModelRequest[Any], book: Mapping[str, Any] | None = None) -> ModelRequest[Any]:
        book = self._book(request.state) if book is None else book
        ratio = self._verdict(book, self._tenant_of(request.runtime)).ratio
        cheaper = self.cheaper_model
        switch = self.switch_at is not None and cheaper is not None and ratio >= self.switch_at
        if switch and cheaper is not None and request.model is not cheaper:
            emit(request.runtime, {"event": "budget_model_switched", "middleware": self.name,
                                   "from": _model_name(request.model), "to": _model_name(cheaper),
                                   "ratio": ratio, "threshold": self.switch_at})
            request = request.override(model=cheaper)
        if self.prices is not None and self._needs_price(self._tenant_of(request.runtime)):
            name = _model_name(request.model)
            if self.prices.price_for(name) is None:
                raise UnknownModelPriceError(name, list(self.prices.prices), middleware=self.name,
                                             hook="wrap_model_call")
        return request

    def _account(
        self, request: ModelRequest[Any], sent: ModelRequest[Any], response: ModelResponse[Any]
    ) -> ExtendedModelResponse[Any]:
        answer = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        runtime = request.runtime
        book = self._book(request.state)
        book.setdefault("ledger", uuid.uuid4().hex)
        tenant = self._tenant_of(runtime)
        if answer is not None and not answer.response_metadata.get(NO_MODEL_CALL):
            system = [sent.system_message] if sent.system_message is not None else []
            item = _measure(MODEL_SOURCE, answer, None, [*system, *sent.messages], _model_name(sent.model),
                            sent.tools, self.encoding)
            usage = self._post(book, item, tenant, "wrap_model_call")
            emit(runtime, {"event": "budget_usage", "middleware": self.name, "source": MODEL_SOURCE,
                           "model": item.model, "counted_by": item.counted_by, "call": dict(usage),
                           "run": dict(book["run"]), "thread": dict(book["thread"]),
                           "tenant": dict(book["tenant_total"]) if book.get("tenant_total") else None})
        self._drain(runtime, book, tenant, "wrap_model_call")
        return ExtendedModelResponse(model_response=response, command=Command(update={"budget": book}))

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """A flow hook (one body for invoke and ainvoke): pick the model, call it, count what it used."""
        sent = self._prepare(request)
        response = yield sent
        return self._account(request, sent, response)

    # -- in sub-agents -----------------------------------------------------------------------------------------
    def subagent_layer(self) -> AgentMiddleware[Any, Any]:
        """What an agent run inside a run of this agent applies (``inherited``; docs/subagents.md): its model calls
        are checked against, and charged to, this agent's run, thread and tenant (:class:`_SubagentBudget`)."""
        return _SubagentBudget(self)

    def _spent(self, account: tuple[AccountKey, object | None] | None, tenant: str | None,
               hook: str) -> dict[str, Any]:
        """The caller's usage as its last hook worked it out, plus the charges not yet folded into its state (its
        sub-agents' model calls so far, parallel ones included)."""
        published, pending = _ACCOUNTS.read(account)
        book = self._book({"budget": {"run": published.get("run") or _zero(),
                                      "thread": published.get("thread") or _zero()}})
        if tenant is not None:
            book["tenant_total"] = published.get("tenant_total") or _zero()
        for item in pending:
            usage = self._usage_of(item, hook, tenant)
            for scope in ("run", "thread", "tenant_total"):
                if scope in book:
                    book[scope] = _add(book[scope], usage)
        return book

    def _stop_subagent(self, verdict: _Verdict, runtime: Any) -> ModelResponse[Any]:
        """The caller's budget is spent: the sub-agent's model is not called; the sub-agent ends with the final
        message (its caller ends at its own next check), or ``BudgetExceededError`` (``on_exceeded="error"``)."""
        assert verdict.used is not None and verdict.limit is not None and verdict.scope is not None
        emit(runtime, {"event": "budget_exceeded", "middleware": self.name, "scope": verdict.scope,
                       "ratio": verdict.ratio, "used": dict(verdict.used), "action": self.on_exceeded,
                       "hook": "wrap_model_call", "subagent": True})
        if self.on_exceeded == "error":
            error = BudgetExceededError(verdict.scope, verdict.used, verdict.limit, middleware=self.name)
            error.hook = "wrap_model_call"
            raise error
        return ModelResponse(result=[self._final(verdict, "exceeded")])

    def _charge_subagent(self, account: tuple[AccountKey, object | None] | None, sent: ModelRequest[Any],
                         response: ModelResponse[Any]) -> None:
        answer = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        if answer is None or answer.response_metadata.get(NO_MODEL_CALL):
            return
        system = [sent.system_message] if sent.system_message is not None else []
        item = _measure(_subagent_source(), answer, None, [*system, *sent.messages], _model_name(sent.model),
                        sent.tools, self.encoding)
        _ACCOUNTS.charge(account, item)
        emit(sent.runtime, {"event": "budget_usage", "middleware": self.name, "source": item.source,
                            "model": item.model, "counted_by": item.counted_by,
                            "call": dict(self._usage_of(item, "wrap_model_call", self._tenant_of(sent.runtime)))})


def _subagent_source() -> str:
    """The ``by_source`` key of a sub-agent's model calls: ``"subagent:<its name>"`` (``"subagent"`` unnamed)."""
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get() or {}
    name = (config.get("metadata") or {}).get("lc_agent_name")
    return f"subagent:{name}" if isinstance(name, str) and name else "subagent"


class _SubagentBudget(ModelCallFlowHooks, AgentMiddleware[AgentState[Any], Any]):
    """:class:`BudgetMiddleware` in an agent run inside a run of its agent: the sub-agent has no ``budget`` state, so
    each of its model calls is checked against the caller's usage (:meth:`BudgetMiddleware._spent`) and charged to
    the caller's account (:class:`_Accounts`), folded into the caller's state, under ``by_source["subagent:<name>"]``,
    at the caller's next budget hook. The cheaper model is switched to as in the caller; warnings and the check-in
    are the caller's (they need its state)."""

    def __init__(self, budget: BudgetMiddleware) -> None:
        self.budget = budget
        self.name = budget.name

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        budget = self.budget
        account = _ACCOUNTS.key(request.runtime, budget.name)
        tenant = budget._tenant_of(request.runtime)
        book = budget._spent(account, tenant, "wrap_model_call")
        verdict = budget._verdict(book, tenant)
        if verdict.scope is not None and verdict.ratio >= 1:
            return budget._stop_subagent(verdict, request.runtime)
        sent = budget._prepare(request, book)
        response = yield sent
        budget._charge_subagent(account, sent, response)
        return response


def _describe(used: Mapping[str, Any], limit: BudgetLimit) -> str:
    parts = []
    if limit.tokens is not None:
        parts.append(f"{int(used['total_tokens'])}/{limit.tokens} tokens")
    if limit.cost is not None:
        parts.append(f"{float(used['cost']):.4f}/{limit.cost:.4f} cost")
    return ", ".join(parts)


_REAL_INTERRUPT = interrupt
_HAS_RESPONSE_SCHEMA = "response_schema" in inspect.signature(interrupt).parameters


def _unwrap(exc: ValidationError) -> BaseException:
    for detail in exc.errors():
        error = (detail.get("ctx") or {}).get("error")
        if isinstance(error, BudgetCheckInError):
            mark_invalid_resume(error)
            return error
    return exc
