"""The public types of human-in-the-loop review: LangChain 1.5's names and shapes, plus approval expiry.

These are the shapes a reviewer's UI reads (:class:`HITLRequest`, :class:`ToolApprovalRequest`) and answers with
(:class:`HITLResponse`, :data:`Decision`), and the per-tool configuration (:class:`InterruptOnConfig`). The resume
value is *validated* by :mod:`.resume`, which builds its pydantic validator and JSON schema from the decision types
defined here: they are the one definition of the reply format.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, NotRequired, Required, TypeAlias

from langchain_core.messages import ToolCall
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from middleware_kit.errors import MiddlewareError
from middleware_kit.types import AgentState, PrivateStateAttr

__all__ = [
    "Action",
    "ActionRequest",
    "ApproveDecision",
    "Decision",
    "DecisionType",
    "EditDecision",
    "EditedAction",
    "ExpiredApproval",
    "GrantRequest",
    "HITLRequest",
    "HITLResponse",
    "DescriptionFactory",
    "HumanInTheLoopState",
    "InterruptOnConfig",
    "InterruptMode",
    "InterruptOnPolicy",
    "InvalidResumeError",
    "OnTimeout",
    "RejectDecision",
    "RespondDecision",
    "ReviewConfig",
    "ToolApprovalRequest",
    "WhenPredicate",
]

DecisionType: TypeAlias = Literal["approve", "edit", "reject", "respond"]
"""What a reviewer may decide for one call."""
InterruptMode: TypeAlias = Literal["batched", "per_call"]
"""How the middleware pauses: one interrupt per model turn (``"batched"``) or one per reviewed call."""
DECISION_TYPES: tuple[DecisionType, ...] = ("approve", "edit", "reject", "respond")
_CLOSED = ConfigDict(extra="forbid", strict=True)  # JSON values only: no bytes-to-str coercion


class Action(TypedDict):
    """A tool call as a reviewer sees it."""

    name: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments."""


class ActionRequest(TypedDict):
    """One call under review."""

    name: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments the model asked for."""
    description: NotRequired[str]
    """What the reviewer is asked (``InterruptOnConfig["description"]`` or ``description_prefix`` + tool + args)."""
    id: NotRequired[str]
    """The tool call's id (ours): the key to resume by id, ``{"decisions": {id: decision}}``."""


class ReviewConfig(TypedDict):
    """How one call may be decided (same order as ``action_requests``)."""

    action_name: str
    """The tool's name."""
    allowed_decisions: list[DecisionType]
    """The decision types the reviewer may choose."""
    args_schema: NotRequired[dict[str, Any]]
    """JSON schema of the arguments, when ``InterruptOnConfig`` gives one and edits are allowed (for edit forms)."""


class HITLRequest(TypedDict):
    """The interrupt value in ``"batched"`` mode: every reviewed call of one model turn."""

    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]
    expires_at: NotRequired[str]
    """When the approval expires (ISO 8601, UTC), if a reviewed tool has a ``timeout`` (ours)."""
    expires_at_epoch: NotRequired[float]
    """The same deadline as seconds since the epoch (ours)."""


class ToolApprovalRequest(TypedDict):
    """The interrupt value in ``"per_call"`` mode (LangChain 1.5): one reviewed call. Answer it with a single
    :data:`Decision`, keyed by the interrupt's id when several interrupts are pending."""

    type: Literal["tool_approval"]
    """Always ``"tool_approval"``: how a client tells this interrupt from a batched :class:`HITLRequest`."""
    tool_call_id: str
    """The id of the model's tool call under review."""
    name: str
    """The tool's name, as the model requested it."""
    args: dict[str, Any]
    """The tool's arguments, as the model requested them."""
    description: str
    """The text shown to the reviewer. The decisions allowed (and, for an edit, the arguments' schema) are in the
    interrupt's ``response_schema``."""
    expires_at: NotRequired[str]
    """When the approval expires (ISO 8601, UTC), if the tool has a ``timeout`` (ours)."""
    expires_at_epoch: NotRequired[float]
    """The same deadline as seconds since the epoch (ours)."""


@with_config(_CLOSED)
class GrantRequest(TypedDict):
    """An "always allow" grant a reviewer creates with an approval (ours): later calls of the same tool whose
    arguments match ``args`` run without review, in this thread or for this tenant, for ``expires_in`` seconds."""

    expires_in: Annotated[float, Field(gt=0)]
    """How long the grant lasts (seconds, from the decision)."""
    scope: NotRequired[Literal["thread", "tenant"]]
    """``"thread"`` (default): this thread only; ``"tenant"``: every thread of the run's tenant (the middleware's
    ``tenant=`` option says where the tenant comes from)."""
    args: NotRequired[dict[str, Any]]
    """The argument pattern (default: exactly this call's arguments). A string is a shell-style glob (``"*@acme.com"``),
    another value must be equal; keys left out may hold anything; ``{}``: every call of the tool."""


@with_config(_CLOSED)
class ApproveDecision(TypedDict):
    """Run the call as the model asked."""

    type: Literal["approve"]
    reviewer: NotRequired[str]
    """Who decided (ours; recorded in the thread and the events). On LangGraph Server the authenticated user is
    recorded as well, and wins."""
    grant: NotRequired[GrantRequest]
    """Also allow matching calls from now on, without review (ours)."""


@with_config(_CLOSED)
class EditedAction(TypedDict):
    """The call a reviewer wants run instead: ``args`` (and ``name``, to switch to another offered tool)."""

    name: NotRequired[str]
    """The tool to run (default: the reviewed call's tool)."""
    args: dict[str, Any]
    """The arguments (checked against the tool's argument schema before anything runs)."""


@with_config(_CLOSED)
class EditDecision(TypedDict):
    """Run the reviewer's version of the call instead."""

    type: Literal["edit"]
    edited_action: EditedAction
    reviewer: NotRequired[str]
    """Who decided (ours)."""


@with_config(_CLOSED)
class RejectDecision(TypedDict):
    """Do not run the call; the model gets an error ``ToolMessage`` telling it not to retry."""

    type: Literal["reject"]
    message: NotRequired[str]
    """Why, for the model."""
    reviewer: NotRequired[str]
    """Who decided (ours)."""


@with_config(_CLOSED)
class RespondDecision(TypedDict):
    """Do not run the call; the reviewer's message is the tool's result."""

    type: Literal["respond"]
    message: str
    reviewer: NotRequired[str]
    """Who decided (ours)."""


Decision: TypeAlias = ApproveDecision | EditDecision | RejectDecision | RespondDecision
"""One reviewer decision."""
DECISION_TYPEDDICTS: dict[DecisionType, type[Any]] = {
    "approve": ApproveDecision,
    "edit": EditDecision,
    "reject": RejectDecision,
    "respond": RespondDecision,
}


class HITLResponse(TypedDict):
    """The resume value in ``"batched"`` mode: one decision per reviewed call, in ``action_requests`` order, or
    keyed by tool-call id."""

    decisions: list[Decision] | dict[str, Decision]
    reviewer: NotRequired[str]
    """Who decided (ours): recorded for every decision that does not name its own ``reviewer``."""


DescriptionFactory: TypeAlias = Callable[[ToolCall, Any, Any], str]
"""``description(tool_call, state, runtime) -> str``."""
WhenPredicate: TypeAlias = Callable[..., bool]
"""``when(request: ToolCallRequest) -> bool`` (LangChain) or ``when(tool_call, state, runtime) -> bool``."""
InterruptOnPolicy: TypeAlias = Callable[[ToolCall, Any, Any], "bool | InterruptOnConfig | None"]
"""``interrupt_on(tool_call, state, runtime)``: True/config = review, False/None = run without review."""
OnTimeout: TypeAlias = Literal["reject", "approve"] | RejectDecision | RespondDecision | ApproveDecision
"""What an expired approval becomes: ``"reject"`` (default), ``"approve"``, or a reject/respond decision."""


class InterruptOnConfig(TypedDict, total=False):
    """How the calls of one tool are reviewed."""

    allowed_decisions: Required[list[DecisionType]]
    """The decision types a reviewer may choose: any of ``approve``, ``edit``, ``reject``, ``respond``."""
    description: str | DescriptionFactory
    """What the reviewer is asked: a string, or ``description(tool_call, state, runtime) -> str``."""
    when: WhenPredicate
    """Review only when this returns True: ``when(request)`` with a ``ToolCallRequest`` whose ``runtime`` is a
    ``ToolRuntime`` (as LangChain), or ``when(tool_call, state, runtime)``. Evaluated once, when the model answers:
    the decision survives restarts."""
    args_schema: dict[str, Any] | type[Any]
    """The arguments' schema for edits: a JSON schema (shown to the reviewer in ``review_configs``) or a pydantic
    model, TypedDict or dataclass. Without it, edits are checked against the tool's own argument schema."""
    timeout: timedelta | float
    """How long a reviewer has (a ``timedelta`` or seconds), counted from the model's answer (ours)."""
    on_timeout: OnTimeout
    """The decision an expired approval becomes (default ``"reject"``; ours)."""


class InvalidResumeError(MiddlewareError, ValueError):
    """The value a run was resumed with is not a valid answer to the pending review. Nothing was recorded: the
    interrupt is still pending, and the thread can be resumed again with a corrected value. In per-call mode, a
    single decision that is not one of the call's is also a ``pydantic.ValidationError`` (what LangChain 1.5 raises),
    located in the decision (``edit.edited_action``) and titled with the middleware, the call and the fix.

    Attributes:
        tool_name: The tool of the decision at fault (None when the problem is the value as a whole).
        tool_call_id: Its call id (None likewise).
        allowed_decisions: The decision types allowed for that call (empty when the value as a whole is at fault).
    """

    def __init__(
        self,
        message: str,
        *,
        middleware: str,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        allowed_decisions: Sequence[str] = (),
        langchain_sentence: str | None = None,
    ) -> None:
        head = f"{langchain_sentence} " if langchain_sentence else ""
        super().__init__(
            f"{head}{middleware}: {message} The interrupt is still pending: resume the thread again with a "
            f"corrected value.",
            middleware=middleware,
            hook="after_model",
        )
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.allowed_decisions = tuple(allowed_decisions)


@dataclass(frozen=True, slots=True)
class ExpiredApproval:
    """One pending approval that :func:`expire_pending_approvals` resolved."""

    thread_id: str
    """The thread it belonged to."""
    interrupt_id: str
    """The interrupt it answered."""
    expires_at: datetime
    """Its deadline (UTC)."""
    tool_call_ids: tuple[str, ...]
    """The reviewed calls it resolved (each with its ``on_timeout`` decision)."""


def merge_pending(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Per middleware name: a value replaces that middleware's entry, None removes it."""
    merged = dict(left) if left else {}
    for name, value in (right or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


class HumanInTheLoopState(AgentState):
    """State of :class:`HumanInTheLoopMiddleware`: one private key, checkpointed, never in input or output."""

    human_in_the_loop_pending: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, merge_pending]]
    """Per middleware name, how the calls of the newest ``AIMessage`` are reviewed (cleared once decided)."""
    human_review: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, merge_pending]]
    """The audit trail, by tool-call id: every decision (``decision``, ``middleware``, ``reviewer``,
    ``expired``; an edit's ``requested`` and ``executed`` calls; ``by_grant`` for a call a standing grant approved,
    ``grant`` for one the reviewer created). In the thread, never in a message."""
    hitl_approvals: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, merge_pending]]
    """By tool-call id: the digest of the call a reviewer (or a standing grant) approved (``digest``,
    ``middleware``), checked right before the tool runs."""
    hitl_edits: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, merge_pending]]
    """By tool-call id: the call the reviewer put in place of the model's (``name``, ``args``, ``middleware``)."""
