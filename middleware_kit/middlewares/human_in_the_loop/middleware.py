"""``HumanInTheLoopMiddleware``: the hooks. Policy is in :mod:`.policy`, the reply format in :mod:`.resume`.

1. **Gating is decided once, when the model answers** (``wrap_model_call``, a flow hook): the policy's outcome for
   each call, the offered tools' argument schemas and the approval deadline are recorded in a private state key that
   the checkpointer saves with the message. A call the record does not cover (a wrapper outside this one added or
   changed it) is evaluated in ``after_model``, as LangChain does.
2. **The interrupt lives in ``after_model``** (``may_interrupt=True``: a graph node of its own, so resuming never
   re-runs the model). The resume value is validated *inside* LangGraph's ``interrupt()`` (``response_schema``),
   before LangGraph records it: a bad value raises :class:`InvalidResumeError` (per call, a single decision that is
   not one of the call's is pydantic's ``ValidationError``, as in LangChain 1.5, and an ``InvalidResumeError``),
   nothing is saved, the interrupt stays pending. Nothing is checked after ``interrupt()`` returns, so no bad value
   can poison the thread. The reject and respond answers carry LangChain 1.5's mark
   (``additional_kwargs["lc_source"] == "hitl_interrupt_decision"``).
3. **Expiry**: when the deadline has passed at the moment the last decision of the turn arrives (or when
   :func:`expire_pending_approvals` resumes with ``{"expired": True}``), every reviewed call of the turn gets its
   ``on_timeout`` decision and the model is told the approval expired.
4. **The history keeps what the model asked for** (as LangChain 1.5): the ``AIMessage`` is never changed. An edited
   call's reviewer version is kept in private state (``hitl_edits``) and run in its place by ``before_tool``; its
   ``ToolMessage`` (named after the tool that ran) starts with a note naming what ran (``edit_notice``). Every
   decision is recorded in private state (``human_review``), in the thread, never in a message, with who made it
   (:func:`.approvals.reviewer_record`). Rejected calls get an error ``ToolMessage``, so tool-call pairing holds.
5. **An approval is bound to its call**: approved and edited calls get a keyed digest (``hitl_approvals``);
   ``before_tool`` refuses a call whose digest differs (:mod:`.approvals`).
6. **Standing grants**: before asking, ``after_model`` looks up "always allow" grants in the checkpointer's database
   (:mod:`middleware_kit.ledger.grants`), judged as of the model's answer (the same on resume); covered calls are
   approved by the grant (a use is recorded), the others are asked about. A reviewer's approval may create one.
"""

from __future__ import annotations

import importlib
import inspect
import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage, add_notification_metadata
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Command, interrupt
from langgraph.types import interrupt as _langgraph_interrupt
from pydantic import PlainValidator, ValidationError
from typing_extensions import TypedDict

from middleware_kit._engine.compat import CONFIG_KEY_CHECKPOINTER, mark_invalid_resume
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.pairing import last_ai_index, pending_tool_calls
from middleware_kit.decorators import hook_config
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.hooks import ToolResult
from middleware_kit.ledger.grants import Grant, GrantStore, GrantUse, grant_store, literal_pattern, new_grant_id
from middleware_kit.middleware import AgentMiddleware, StateT
from middleware_kit.middlewares._frozen import FrozenConfig, copy_containers
from middleware_kit.middlewares._pii_vault import KeySpec
from middleware_kit.middlewares._stream import emit
from middleware_kit.middlewares.human_in_the_loop.approvals import (
    ApprovalMismatchError,
    ApprovalSeal,
    reviewer_record,
)
from middleware_kit.middlewares.human_in_the_loop.policy import (
    Policy,
    Review,
    check_options,
    is_template,
    schema_json,
    tool_names,
    tool_schema,
)
from middleware_kit.middlewares.human_in_the_loop.resume import (
    CarriedError,
    Gate,
    Outcome,
    ResumeFormat,
    expired_outcome,
    iso_utc,
)
from middleware_kit.middlewares.human_in_the_loop.types import (
    Action,
    ActionRequest,
    ApproveDecision,
    Decision,
    DecisionType,
    EditDecision,
    HITLRequest,
    HITLResponse,
    HumanInTheLoopState,
    InterruptMode,
    InterruptOnConfig,
    InterruptOnPolicy,
    InvalidResumeError,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
    ToolApprovalRequest,
)
from middleware_kit.types import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ResponseT,
    ToolCallRequest,
)

if TYPE_CHECKING:
    from middleware_kit._engine.pipeline import AgentTools

__all__ = [  # LangChain 1.5's names (served as ``langchain.agents.middleware.human_in_the_loop``), and ours
    "DEFAULT_EDIT_NOTICE",
    "Action",
    "ActionRequest",
    "ApproveDecision",
    "Decision",
    "DecisionType",
    "EditDecision",
    "HITLRequest",
    "HITLResponse",
    "HumanInTheLoopMiddleware",
    "InterruptMode",
    "InterruptOnConfig",
    "RejectDecision",
    "RespondDecision",
    "ReviewConfig",
    "ToolApprovalRequest",
]
_PATCH_POINTS = (interrupt, get_config)
"""Looked up in this module's globals at each call (``_interrupt_function``, ``_run_config``), so that
``patch("langchain.agents.middleware.human_in_the_loop.interrupt")`` (or ``.get_config``) takes effect."""
_REEXPORTED = (AgentState, PrivateStateAttr, ResponseT, StateT, get_runtime, ToolRuntime)
"""Names LangChain's module imports, which code written for it may import from there."""

PENDING = "human_in_the_loop_pending"
EDITS = "hitl_edits"
APPROVALS = "hitl_approvals"
DEFAULT_EDIT_NOTICE = (
    "Note: a human reviewer replaced this tool call before it ran. The call recorded in your message is the one you "
    "produced, not the one that executed. This was intentional and authorized. Do not re-issue your original call."
)
"""The default ``edit_notice`` text (followed by "Executed instead: <name> with arguments <json>."), LangChain 1.5's:
the ``AIMessage`` keeps the model's call, the reviewer's runs in its place."""


class _FrozenCall(TypedDict):
    name: str
    args: dict[str, Any]
    review: Review | None
    """None: runs without review."""


class _Record(TypedDict):
    calls: dict[str, _FrozenCall]
    """By tool-call id."""
    tools: dict[str, dict[str, Any]] | None
    """Argument JSON schema of every tool the model was offered (only when some call may be edited)."""
    deadline: float | None
    """When the approval of this turn expires (seconds since the epoch), if a reviewed tool has a timeout."""
    at: NotRequired[float]
    """When the model answered (the middleware's clock): standing grants are judged as of then."""
    tenant: NotRequired[str | None]
    """The run's tenant (``tenant=``, read from ``runtime.context`` when the model answered)."""


def _jsonable(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)


class HumanInTheLoopMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware[HumanInTheLoopState, Any]):
    """Pause before gated tool calls run, until a human approves, edits, rejects or answers each of them.

    Args:
        interrupt_on: Per tool name: ``True`` (review; every decision type allowed), ``False`` (never review), or an
            :class:`InterruptOnConfig` (``allowed_decisions``, ``description``, ``when``, ``args_schema``,
            ``timeout``, ``on_timeout``). Tools not listed run without review. Or a callable
            ``interrupt_on(tool_call, state, runtime) -> bool | InterruptOnConfig | None`` deciding per call.
        description_prefix: Starts the default description of a reviewed call (followed by the tool and its args).
        interrupt_mode: ``"batched"`` (one :class:`HITLRequest` interrupt per model turn, resumed with
            ``{"decisions": [...]}``) or ``"per_call"`` (one :class:`ToolApprovalRequest` interrupt per reviewed
            call, resumed with one decision, keyed by the interrupt's id when several are pending).
        edit_notice: What the model reads before the result of an edited call, as in LangChain 1.5: a text (default
            :data:`DEFAULT_EDIT_NOTICE`), followed by ``" Executed instead: <name> with arguments <json>."`` and,
            when the tool answered, ``"\\n\\nTool response:\\n"`` and its answer; ``None`` (or ``False``) adds
            nothing; ``True`` is the default. Ours: a text using ``{name}``, ``{args}``, ``{requested_name}`` or
            ``{requested_args}`` is a template, formatted and put before the answer as it is.
        interrupt: The function that pauses the run (default: ``human_in_the_loop.interrupt``, looked up at each
            call, i.e. LangGraph's ``interrupt``). Another function is called with the payload only; its return value
            is validated exactly as a resume value.
        clock: Seconds since the epoch, for approval expiry (default: ``time.time``, looked up at each call).
        dynamic_tools: Names of tools the agent gets per call (a middleware's ``wrap_model_call`` adds them to
            ``request.tools`` and a ``wrap_tool_call`` runs them), which ``interrupt_on`` may name. Every other name
            ``interrupt_on`` reviews is checked against the agent's tools (``create_agent``'s, a middleware's
            ``tools``, the structured-output tool) when the agent is built: within a typo of one of them, it is a
            :class:`MiddlewareConfigError` with a "did you mean" (a policy for a misspelled name never applies, the
            real tool would run unreviewed); like none of them, an ``UnknownToolWarning`` (a policy shared with an
            agent that has the tool, as deepagents' subagents inherit their parent's ``interrupt_on``).
        name: The middleware's name (needed to list two instances in one agent).
        key: The deployment secret approvals are bound with (ours): a ``str``/``bytes`` of at least 32 bytes, a
            list of them (the first signs, all verify) or PIIMiddleware's ``Keyring``. Default: the environment
            variable ``MIDDLEWARE_KIT_APPROVAL_KEY``, else an unkeyed digest (see :mod:`.approvals`).
        tenant: Where a run's tenant comes from, for tenant-wide "always allow" grants (ours): the key (or attribute)
            of ``runtime.context`` holding it, or ``tenant(context) -> str | None``. Read when the model answers.

    Needs a checkpointer (``create_agent(checkpointer=...)``; LangGraph Server supplies one). See
    ``docs/middlewares/human_in_the_loop.md``.
    """

    inherited = True  # applied by agents run inside this agent's runs too (AgentMiddleware.inherited)

    state_schema = HumanInTheLoopState

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | InterruptOnConfig] | InterruptOnPolicy,
        *,
        description_prefix: str = "Tool execution requires approval",
        interrupt_mode: Literal["batched", "per_call"] = "batched",
        edit_notice: str | bool | None = DEFAULT_EDIT_NOTICE,
        interrupt: Callable[..., Any] | None = None,
        clock: Callable[[], float] | None = None,
        dynamic_tools: Collection[str] = (),
        name: str | None = None,
        key: KeySpec | None = None,
        tenant: str | Callable[[Any], str | None] | None = None,
    ) -> None:
        if name is not None:
            self.name = name
        check_options(self.name, interrupt_mode=interrupt_mode, description_prefix=description_prefix,
                      edit_notice=edit_notice, interrupt=interrupt, clock=clock)
        if tenant is not None and not (isinstance(tenant, str) and tenant) and not callable(tenant):
            raise MiddlewareConfigError(
                f"{self.name}: tenant must be the key of runtime.context naming the tenant (a str) or a callable "
                f"tenant(context) -> str | None; got a {type(tenant).__name__}.", middleware=self.name, hook="tenant",
            )
        self._seal = ApprovalSeal.of(self.name, key)
        self.tenant = tenant
        """Where a run's tenant comes from, for tenant-wide grants: a key of ``runtime.context`` or a callable."""
        self.description_prefix = description_prefix
        self.interrupt_mode: Literal["batched", "per_call"] = interrupt_mode
        self.edit_notice = edit_notice
        self._interrupt = interrupt
        self._clock = clock
        self.dynamic_tools: tuple[str, ...] = tool_names(self.name, dynamic_tools, "dynamic_tools")
        """Tools the agent gets per call, which ``interrupt_on`` may name although ``create_agent`` cannot see them."""
        self._policy = Policy(self.name, interrupt_on, description_prefix, _run_config)
        self.interrupt_on: Mapping[str, InterruptOnConfig] = copy_containers(self._policy.static)
        """The resolved configuration per tool name (tools listed as False or absent are never reviewed). A copy:
        changing it changes nothing (use ``replace(interrupt_on=...)``)."""

    def check_agent_tools(self, tools: AgentTools) -> None:
        """When the agent is built: every tool ``interrupt_on`` reviews is one the agent has or is listed in
        ``dynamic_tools`` (:meth:`Policy.check_tools` states the rule;
        :class:`middleware_kit._engine.pipeline.AgentTools`
        the hook)."""
        self._policy.check_tools(tools.names, self.dynamic_tools, type(self).__name__)

    def _now(self) -> float:
        return (self._clock or time.time)()

    def _tenant_of(self, runtime: Any) -> str | None:
        """The run's tenant (``tenant=``), from ``runtime.context``."""
        context = getattr(runtime, "context", None)
        if self.tenant is None or context is None:
            return None
        if callable(self.tenant):
            found = self.tenant(context)
        elif isinstance(context, Mapping):
            found = context.get(self.tenant)
        else:
            found = getattr(context, self.tenant, None)
        return None if found is None else str(found)

    # -- wrap_model_call: decide the reviews while the context is at hand -------------------------------------------
    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Decide, for each call of the model's answer, whether it is reviewed (recorded in state)."""
        response = yield request
        recorded: ModelResponse[Any] | ExtendedModelResponse[Any] = self._record(request, response)
        return recorded

    def _record(
        self, request: ModelRequest[Any], response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        index = last_ai_index(response.result)
        if index < 0:
            return response
        message = response.result[index]
        tool_calls = message.tool_calls if isinstance(message, AIMessage) else []
        calls = [c for c in tool_calls if c.get("id") and self._policy.may_review(c)]
        if not calls:
            return response
        state = dict(request.state) if isinstance(request.state, Mapping) else {}
        state["messages"] = [*state.get("messages", ()), *response.result]
        frozen: dict[str, _FrozenCall] = {}
        for call in calls:
            review = self._policy.review_of(call, state, request.runtime)
            frozen[str(call["id"])] = _FrozenCall(name=call["name"], args=dict(call["args"]), review=review)
        reviews = [f["review"] for f in frozen.values() if f["review"] is not None]
        editable = any("edit" in r["allowed_decisions"] for r in reviews)
        tools = {t.name: tool_schema(t) for t in request.tools if isinstance(t, BaseTool)} if editable else None
        timeouts = [r["timeout"] for r in reviews if "timeout" in r]
        at = self._now()
        deadline = at + min(timeouts) if timeouts else None
        record = _Record(calls=frozen, tools=tools, deadline=deadline, at=at,
                         tenant=self._tenant_of(request.runtime))
        return ExtendedModelResponse(model_response=response, command=Command(update={PENDING: {self.name: record}}))

    # -- after_model: ask, validate, apply ---------------------------------------------------------------------------
    def _gates(self, state: Any, runtime: Any) -> tuple[list[Gate], _Record | None]:
        """The calls under review and the record made when the model answered."""
        messages: Sequence[AnyMessage] = state.get("messages") or ()
        index = last_ai_index(messages)
        record: _Record | None = (state.get(PENDING) or {}).get(self.name)
        if index < 0 or not getattr(messages[index], "tool_calls", None):
            return [], record
        frozen: Mapping[str, _FrozenCall] = record["calls"] if record else {}
        gates = []
        for call in pending_tool_calls(messages):
            known = frozen.get(str(call.get("id")))
            late = known is None or known["name"] != call["name"] or known["args"] != call["args"]
            if not late:
                review = cast(_FrozenCall, known)["review"]
            else:  # added or changed after this middleware's wrap_model_call saw the answer: decide now
                review = self._policy.review_of(call, state, runtime) if self._policy.may_review(call) else None
            if review is None:
                continue
            static = self._policy.static_args_schema(call["name"])
            gates.append(
                Gate(
                    call=call,
                    allowed=tuple(review["allowed_decisions"]),
                    description=review["description"],
                    args_schema=static if static is not None else review["args_schema"],
                    on_timeout=review.get("on_timeout") or {"type": "reject"},
                    late_timeout=review.get("timeout") if late else None,
                )
            )
        return gates, record

    def _deadline(self, gates: Sequence[Gate], record: _Record | None) -> float | None:
        deadline = record.get("deadline") if record else None
        for gate in gates:  # calls decided in after_model: their deadline counts from now
            if gate.late_timeout is not None:
                late = self._now() + gate.late_timeout
                deadline = late if deadline is None else min(deadline, late)
        return deadline

    def _reviewing(self, state: Any, runtime: Any) -> Steps[dict[str, Any] | None]:
        """The body of ``after_model`` (one body, two drivers): ask about the gated calls a standing grant does not
        cover, then apply every decision."""
        gates, record = self._gates(state, runtime)
        cleared: dict[str, Any] = {PENDING: {self.name: None}} if record is not None else {}
        stale = {}
        for key in (EDITS, APPROVALS):  # an earlier turn's (its calls all ran): a reused call id must not replay one
            mine = {k: None for k, v in (state.get(key) or {}).items() if v.get("middleware") == self.name}
            if mine:
                cleared[key] = stale[key] = mine
        if not gates:
            return cleared or None
        if self.interrupt_mode == "per_call":
            self._require_ids(gates)
        where = _thread_and_store()
        at = float(record["at"]) if record and "at" in record else self._now()
        tenant = record.get("tenant") if record else self._tenant_of(runtime)
        granted = (yield from self._granted(gates, where, tenant, at)) if where is not None else {}
        deadline = self._deadline(gates, record)
        outcomes = self._decide([g for g in gates if str(g.call["id"]) not in granted], record, deadline, runtime,
                                tenant)
        decided = {str(o.gate.call["id"]): o for o in outcomes}
        expired = bool(outcomes) and outcomes[0].expired
        outcomes = [granted.get(str(g.call["id"])) or decided[str(g.call["id"])] for g in gates]
        applied, grants, uses = self._apply(state, outcomes, deadline, runtime, where, tenant)
        if where is not None:
            yield from self._store_grants(grants, uses, where[1])
        if expired:
            self._emit(runtime, "approval_expired", gates, outcomes, deadline=deadline, entries=applied["human_review"])
        else:
            self._emit(runtime, "decisions_received", gates, outcomes, entries=applied["human_review"])
        for key, mine in stale.items():
            applied[key] = {**mine, **applied.get(key, {})}
        return {**cleared, **applied}

    def _granted(
        self, gates: Sequence[Gate], where: tuple[str, GrantStore], tenant: str | None, at: float
    ) -> Steps[dict[str, Outcome]]:
        """The gates a standing grant covers (judged as of ``at``, when the model answered: the same on resume)."""
        thread, store = where
        scopes = [("thread", thread), *([("tenant", tenant)] if tenant is not None else [])]
        found: dict[str, list[Grant]] = {}
        covered: dict[str, Outcome] = {}
        for gate in gates:
            name = gate.call["name"]
            if name not in found:
                found[name] = yield Step(store.find, store.afind, name, scopes)
            grant = next((g for g in found[name] if g.covers(name, gate.call["args"], at)), None)
            if grant is not None and "approve" in gate.allowed:
                covered[str(gate.call["id"])] = Outcome(gate, "approve", gate.call, None, granted_by=grant)
        return covered

    def _decide(
        self, gates: Sequence[Gate], record: _Record | None, deadline: float | None, runtime: Any,
        tenant: str | None,
    ) -> list[Outcome]:
        """Ask the reviewer about ``gates``; the validated decisions (expired ones as their ``on_timeout``)."""
        if not gates:
            return []
        tools = record["tools"] if record else None
        if self.interrupt_mode == "batched":
            outcomes = self._ask(gates, tools, deadline, runtime, tenant)
        else:
            outcomes = []
            for gate in gates:
                if outcomes and outcomes[-1].expired:  # recorded {"expired": True}: the whole turn expires, at once
                    outcomes.append(expired_outcome(gate))
                else:
                    outcomes += self._ask([gate], tools, deadline, runtime, tenant)
        if deadline is not None and not all(o.expired for o in outcomes) and self._now() >= deadline:
            outcomes = [expired_outcome(o.gate) for o in outcomes]  # the reviewer answered too late
        return outcomes

    def _store_grants(self, grants: Sequence[Grant], uses: Sequence[GrantUse], store: GrantStore) -> Steps[None]:
        """Write the grants reviewers created and the uses of standing grants (idempotent: a replay adds nothing)."""
        for grant in grants:
            yield Step(store.grant, store.agrant, grant)
        for use in uses:
            yield Step(store.use, store.ause, use)

    def _require_ids(self, gates: Sequence[Gate]) -> None:
        """Per call, a reviewed call is answered by its id: one without (None) cannot be reviewed, nor run."""
        for gate in gates:
            if gate.call.get("id") is None:
                raise MiddlewareConfigError(  # LangChain 1.5's sentence first
                    f"Tool call `{gate.call['name']}` has no ID, so its result can't be matched to it. Make sure the "
                    f"chat model returns tool call IDs. ({self.name}: interrupt_mode='per_call' answers each reviewed "
                    f"call by its id; nothing was run.)",
                    middleware=self.name,
                    hook="after_model",
                )

    @hook_config(may_interrupt=True)
    def after_model(self, state: HumanInTheLoopState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Interrupt for the gated calls of the newest ``AIMessage``; apply the decisions once they are valid."""
        return run_sync(self._reviewing(state, runtime))

    @hook_config(may_interrupt=True)
    async def aafter_model(self, state: HumanInTheLoopState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Async entry point of :meth:`after_model` (the same body; the grant store's async methods)."""
        return await run_async(self._reviewing(state, runtime))

    def _payload(self, gates: Sequence[Gate], deadline: float | None) -> HITLRequest | ToolApprovalRequest:
        payload: dict[str, Any]
        if self.interrupt_mode == "per_call":
            call = gates[0].call
            payload = {"type": "tool_approval", "tool_call_id": str(call["id"]), "name": call["name"],
                       "args": dict(call["args"]), "description": gates[0].description}
        else:
            actions, configs = _requests(gates)
            payload = {"action_requests": actions, "review_configs": configs}
        if deadline is not None:
            payload["expires_at"] = iso_utc(deadline)
            payload["expires_at_epoch"] = deadline
        return cast(HITLRequest | ToolApprovalRequest, payload)

    def _ask(
        self, gates: Sequence[Gate], tools: Mapping[str, dict[str, Any]] | None, deadline: float | None, runtime: Any,
        tenant: str | None = None,
    ) -> list[Outcome]:
        """Interrupt for ``gates``; return the validated decisions. With LangGraph's ``interrupt`` the validation
        runs inside it, before the value is recorded, so a bad value leaves the interrupt pending."""
        ask = self._interrupt or _interrupt_function()
        fmt = ResumeFormat(owner=self.name, gates=gates, tools=tools, per_call=self.interrupt_mode == "per_call",
                           deadline=deadline, clock=self._now, tenant=tenant)
        payload = self._payload(gates, deadline)
        try:
            if ask is _langgraph_interrupt:
                _require_checkpointer(self.name)
            if not _takes_response_schema(ask):
                return fmt.outcomes(fmt.validate(ask(payload)))
            schema = Annotated[Any, PlainValidator(fmt.validate_in_pydantic, json_schema_input_type=fmt.shown)]
            try:
                validated = ask(payload, response_schema=cast(Any, schema))
            except ValidationError as exc:
                raise _unwrap(exc) from None
            return fmt.outcomes(validated)
        except GraphInterrupt:
            self._emit(runtime, "awaiting_approval", gates, None, payload=payload, deadline=deadline)
            raise

    def _emit(
        self,
        runtime: Any,
        event: str,
        gates: Sequence[Gate],
        outcomes: Sequence[Outcome] | None,
        *,
        payload: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        entries: Mapping[str, Any] | None = None,
    ) -> None:
        body: dict[str, Any] = {"middleware": self.name, "event": event, "interrupt_mode": self.interrupt_mode}
        if payload is not None:
            body["action_requests"], body["review_configs"] = _requests(gates)
        if deadline is not None:
            body["expires_at"] = iso_utc(deadline)
        if outcomes is not None:
            body["decisions"] = [_event_decision(o, (entries or {}).get(str(o.gate.call["id"])) or {})
                                 for o in outcomes]
        emit(runtime, body)

    # -- applying the decisions ---------------------------------------------------------------------------------
    def _apply(
        self, state: Any, outcomes: Sequence[Outcome], deadline: float | None, runtime: Any,
        where: tuple[str, GrantStore] | None, tenant: str | None,
    ) -> tuple[dict[str, Any], list[Grant], list[GrantUse]]:
        """The ``AIMessage`` (unchanged: it keeps the model's calls) and the answers of rejected calls; in private
        state the audit trail (who decided what), the edits and the approved calls' digests. Also the grants the
        reviewers created and the uses of standing grants, for the store."""
        record: dict[str, Any] = {}
        edits: dict[str, Any] = {}
        approvals: dict[str, Any] = {}
        answers: list[ToolMessage] = []
        grants: list[Grant] = []
        uses: list[GrantUse] = []
        now = self._now()
        for outcome in outcomes:
            call = outcome.gate.call
            call_id = str(call["id"])
            entry = self._entry(outcome, runtime)
            if outcome.kind in ("approve", "edit"):
                ran = outcome.call
                approvals[call_id] = {"digest": self._seal.digest(ran["name"], ran["args"], call_id),
                                      "middleware": self.name}
            if outcome.kind == "edit":
                executed = {"name": outcome.call["name"], "args": dict(outcome.call["args"])}
                entry["requested"] = {"name": call["name"], "args": dict(call["args"])}
                entry["executed"] = executed
                edits[call_id] = {**executed, "middleware": self.name}
            elif outcome.kind in ("reject", "respond"):
                answers.append(_answer(call, outcome, deadline))
            if outcome.granted_by is not None and where is not None:
                uses.append(GrantUse(outcome.granted_by.grant_id, where[0], call_id, call["name"], now))
            if outcome.grant is not None and where is not None:
                grant = _new_grant(outcome, where[0], tenant, entry.get("reviewer"), now)
                grants.append(grant)
                entry["grant"] = grant.audit()
            record[call_id] = entry  # approvals too: the thread keeps an audit trail of every review
        messages = state["messages"]
        ai = messages[last_ai_index(messages)]  # unchanged, as LangChain 1.5 returns it
        update: dict[str, Any] = {"messages": [ai, *answers], "human_review": record}
        if edits:
            update[EDITS] = edits
        if approvals:
            update[APPROVALS] = approvals
        return update, grants, uses

    def _entry(self, outcome: Outcome, runtime: Any) -> dict[str, Any]:
        """The audit record of one decision: what, by whom (or by which standing grant), when."""
        entry: dict[str, Any] = {"decision": outcome.kind, "middleware": self.name}
        if outcome.expired:
            entry["expired"] = True
        grant = outcome.granted_by
        if grant is not None:
            entry["by_grant"] = grant.grant_id
            entry["reviewer"] = {"id": grant.granted_by, "source": "grant"}
        else:
            reviewer = reviewer_record(runtime, outcome.reviewer)
            if reviewer is not None:
                entry["reviewer"] = reviewer
        return entry

    # -- before_tool: run the reviewer's call ----------------------------------------------------------------------
    def _swap(self, request: ToolCallRequest) -> ToolCallRequest | None:
        edit = _edit_of(request.state, request.tool_call.get("id"))
        if edit is None or edit.get("middleware") != self.name:
            return None
        call = ToolCall(name=edit["name"], args=dict(edit["args"]), id=request.tool_call.get("id"), type="tool_call")
        tool = request.tool
        if edit["name"] != request.tool_call["name"]:
            offered = getattr(request.runtime, "tools", None) or ()
            tool = next((t for t in offered if getattr(t, "name", None) == edit["name"]), None)
        return request.override(tool_call=call, tool=tool)

    def _verify(self, request: ToolCallRequest) -> None:
        """The call about to run is the one approved (its digest, recorded with the approval): else it does not run."""
        call = request.tool_call
        approved = _private(request.state, APPROVALS, call.get("id"))
        if approved is None or approved.get("middleware") != self.name:
            return
        problem = self._seal.problem(approved.get("digest"), call["name"], call.get("args") or {}, str(call["id"]))
        if problem is None:
            return
        why = {
            "changed": "its tool name or arguments are not those the reviewer approved: the checkpoint was changed "
                       "between the approval and the execution (tampered with, or migrated with other arguments)",
            "unkeyed": "the approval was recorded without a key and this middleware now has one: an unkeyed digest "
                       "could have been recomputed by whoever changed the checkpoint",
            "no key": "the approval was recorded with a key and this middleware has none (key= or "
                      "$MIDDLEWARE_KIT_APPROVAL_KEY is missing in this process)",
        }[problem]
        raise ApprovalMismatchError(
            f"{self.name}.before_tool: refused to run the approved call {call['name']!r} (tool call id "
            f"{call['id']!r}): {why}. Nothing ran. Fix: check who changed the thread's checkpoint; to run the "
            f"call, restore the checkpoint as approved (or give this process the same key= as the one that "
            f"recorded the approval), or have it reviewed again in a new turn. If a middleware listed before "
            f"{self.name} rewrites tool arguments in before_tool, list it after {self.name}.",
            middleware=self.name, tool_call_id=str(call["id"]), tool_name=call["name"],
        )

    def _before_tool(self, request: ToolCallRequest) -> ToolCallRequest | None:
        swapped = self._swap(request)
        self._verify(swapped or request)
        return swapped

    def before_tool(self, request: ToolCallRequest) -> ToolCallRequest | None:
        """Run the reviewer's call in place of an edited one (the ``AIMessage`` keeps the model's); refuse a call
        that is not the one approved (:class:`ApprovalMismatchError`)."""
        return self._before_tool(request)

    async def abefore_tool(self, request: ToolCallRequest) -> ToolCallRequest | None:
        """Async entry point of :meth:`before_tool` (the same code, without a thread hop)."""
        return self._before_tool(request)

    # -- after_tool: tell the model what ran --------------------------------------------------------------------
    def _annotate(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        if self.edit_notice is False or self.edit_notice is None or self.edit_notice == "":
            return None
        call_id = request.tool_call.get("id")
        edit, entry = _edit_of(request.state, call_id), _review_entry(request.state, call_id)
        if edit is None or entry is None or edit.get("middleware") != self.name or entry.get("decision") != "edit":
            return None
        requested = entry.get("requested") or {}
        text = DEFAULT_EDIT_NOTICE if self.edit_notice is True else self.edit_notice
        if is_template(text):
            note: Callable[[bool], str] = lambda _has_content: text.format(  # noqa: E731
                name=request.tool_call["name"], args=_jsonable(request.tool_call["args"]),
                requested_name=requested.get("name"), requested_args=_jsonable(requested.get("args")),
            )
        else:  # LangChain 1.5's form: the text, what ran, then the tool's answer
            ran = (f"{text} Executed instead: {request.tool_call['name']} with arguments "
                   f"{json.dumps(request.tool_call['args'], default=str)}.")
            note = lambda has_content: f"{ran}\n\nTool response:\n" if has_content else ran  # noqa: E731
        if isinstance(result, ToolMessage):
            return _with_note(result, note)
        if isinstance(result, Command) and isinstance(result.update, dict):
            written = result.update.get("messages")
            if isinstance(written, list):
                patched = [
                    _with_note(m, note) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
                    for m in written
                ]
                return Command(graph=result.graph, update={**result.update, "messages": patched},
                               resume=result.resume, goto=result.goto)
        return None

    def after_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """Prefix the result of an edited call with what ran and what was requested (``edit_notice``)."""
        return self._annotate(request, result)

    async def aafter_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """Async entry point of :meth:`after_tool` (the same code, without a thread hop)."""
        return self._annotate(request, result)


# -- module helpers --------------------------------------------------------------------------------------------------
def _run_config() -> Any:
    """The run's config, through this module's ``get_config`` (looked up now: a patch point, like ``interrupt``)."""
    return globals()["get_config"]()


def _interrupt_function() -> Callable[..., Any]:
    """The ``interrupt`` to call, looked up now: this module's global (the patch point LangChain's tests use, via
    ``langchain.agents.middleware.human_in_the_loop``) or the package's (``human_in_the_loop.interrupt``)."""
    patched = globals()["interrupt"]
    if patched is not _langgraph_interrupt:
        return cast(Callable[..., Any], patched)
    return cast(Callable[..., Any], importlib.import_module(__package__ or "").interrupt)


def _takes_response_schema(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` declares a ``response_schema`` parameter (LangGraph's ``interrupt`` does; a mock does not)."""
    if fn is _langgraph_interrupt:
        return True
    try:
        return "response_schema" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _require_checkpointer(name: str) -> None:
    try:
        configurable = _run_config().get("configurable") or {}
    except RuntimeError:  # outside a graph: interrupt() itself says so
        return
    if configurable.get(CONFIG_KEY_CHECKPOINTER) is None:
        raise MiddlewareConfigError(
            f"{name} needs a checkpointer to pause for approval: the run must be saved while it waits for a human. "
            f"Pass one to create_agent(..., checkpointer=InMemorySaver()) (or a SqliteSaver/PostgresSaver to survive "
            f"restarts) and invoke with config={{'configurable': {{'thread_id': ...}}}}. LangGraph Server supplies its "
            f"own checkpointer at deploy time.",
            middleware=name,
            hook="after_model",
        )


def _unwrap(exc: ValidationError) -> BaseException:
    """Our error from inside pydantic's wrapper, still marked as an invalid resume value."""
    for detail in exc.errors():
        error = (detail.get("ctx") or {}).get("error")
        if isinstance(error, CarriedError):
            error = error.error
        if isinstance(error, InvalidResumeError):
            mark_invalid_resume(error)
            return error
    return exc


def _answer(call: ToolCall, outcome: Outcome, deadline: float | None) -> ToolMessage:
    """The ``ToolMessage`` a reject or respond decision puts in place of the tool's result, marked as LangChain 1.5
    marks it (``lc_source="hitl_interrupt_decision"``, ``lc_data={"decision": ...}``)."""
    if outcome.kind == "respond":
        message = ToolMessage(content=outcome.message or "", name=call["name"], tool_call_id=call["id"] or "",
                              status="success")
    else:
        message = _rejection(call, outcome.message, deadline if outcome.expired else None)
    marked = add_notification_metadata(cast(Any, message), source="hitl_interrupt_decision",
                                       data={"decision": outcome.kind})  # typed for HumanMessage; takes any message
    return cast(ToolMessage, marked)


def _rejection(call: ToolCall, message: str | None, expired_at: float | None) -> ToolMessage:
    """LangChain 1.5's rejection texts; an expired approval (ours) says so."""
    if expired_at is not None:
        content = (
            f"The approval of the tool call for `{call['name']}` with id {call['id']} expired at "
            f"{iso_utc(expired_at)} before a human reviewer decided. It was not executed. Do not retry it (nor a "
            f"variant of it) unless the user asks: continue without it, or ask the user how to proceed."
        )
        if message:
            content = f"{message}\n\n({content})"
    elif message:
        content = f"User rejected the tool call for `{call['name']}` with reason: {message}"
    else:
        content = (
            f"User rejected the tool call for `{call['name']}` with id {call['id']}. The tool was not executed. Do "
            f"not retry this tool call unless the user explicitly requests it."
        )
    return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"] or "", status="error")


def _requests(gates: Sequence[Gate]) -> tuple[list[ActionRequest], list[ReviewConfig]]:
    """The batched payload's ``action_requests`` and ``review_configs`` for ``gates``."""
    actions: list[ActionRequest] = []
    configs: list[ReviewConfig] = []
    for gate in gates:
        actions.append(ActionRequest(name=gate.call["name"], args=dict(gate.call["args"]),
                                     description=gate.description, id=str(gate.call["id"])))
        config = ReviewConfig(action_name=gate.call["name"], allowed_decisions=list(gate.allowed))
        if gate.args_schema is not None and "edit" in gate.allowed:
            config["args_schema"] = schema_json(gate.args_schema) or {}
        configs.append(config)
    return actions, configs


def _with_note(message: ToolMessage, note: Callable[[bool], str]) -> ToolMessage:
    """``message`` with ``note(has_content)`` before its content (once: a note already there is not repeated)."""
    content = message.content
    text = note(bool(content))
    if isinstance(content, str):
        return message if text and content.startswith(text) else message.model_copy(update={"content": text + content})
    if content and isinstance(content[0], dict) and content[0].get("text") == text:
        return message
    if content and all(isinstance(block, str) for block in content):
        return message.model_copy(update={"content": [text, *content]})
    return message.model_copy(update={"content": [{"type": "text", "text": text}, *content]})


def _private(state: Any, key: str, call_id: Any) -> dict[str, Any] | None:
    entries = state.get(key) if isinstance(state, Mapping) else None
    entry = (entries or {}).get(call_id) if call_id is not None else None
    return entry if isinstance(entry, dict) else None


def _review_entry(state: Any, call_id: Any) -> dict[str, Any] | None:
    """The review record of ``call_id`` (private state ``human_review``)."""
    return _private(state, "human_review", call_id)


def _edit_of(state: Any, call_id: Any) -> dict[str, Any] | None:
    """The reviewer's call for ``call_id``, if it was edited (private state ``hitl_edits``)."""
    return _private(state, EDITS, call_id)


def _thread_and_store() -> tuple[str, GrantStore] | None:
    """The run's thread and its checkpointer's grant store (None outside a graph, or without a checkpointer)."""
    try:
        configurable = _run_config().get("configurable") or {}
    except RuntimeError:
        return None
    saver, thread = configurable.get(CONFIG_KEY_CHECKPOINTER), configurable.get("thread_id")
    return None if saver is None or thread is None else (str(thread), grant_store(saver))


def _new_grant(outcome: Outcome, thread: str, tenant: str | None, reviewer: Any, now: float) -> Grant:
    """The grant a reviewer asked for with an approval (its id derived from the thread and the call)."""
    asked = cast(Mapping[str, Any], outcome.grant)
    call = outcome.gate.call
    scope = asked.get("scope", "thread")
    origin = f"{thread}/{call['id']}"
    return Grant(
        grant_id=new_grant_id(origin), tool=call["name"],
        args=dict(asked["args"]) if "args" in asked else literal_pattern(call["args"]),
        scope=scope, scope_id=thread if scope == "thread" else cast(str, tenant),
        granted_by=reviewer.get("id") if isinstance(reviewer, Mapping) else None,
        granted_at=now, expires_at=now + float(asked["expires_in"]), origin=origin,
    )


def _event_decision(outcome: Outcome, entry: Mapping[str, Any]) -> dict[str, Any]:
    """One decision as the ``decisions_received``/``approval_expired`` events carry it."""
    item: dict[str, Any] = {"id": outcome.gate.call["id"], "name": outcome.gate.call["name"], "type": outcome.kind}
    for key in ("reviewer", "by_grant"):
        if key in entry:
            item[key] = entry[key]
    if "grant" in entry:
        item["grant"] = entry["grant"]["grant_id"]
    return item
