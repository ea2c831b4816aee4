"""``HumanInTheLoopMiddleware``: a human approves, edits, rejects or answers tool calls before they run.

API-compatible with LangChain 1.5's middleware of the same name (``interrupt_on``, ``InterruptOnConfig``, batched and
per-call modes, the ``action_requests``/``review_configs`` and ``tool_approval`` payloads, the ``{"decisions": [...]}``
resume), built so that approvals survive restarts, bad input and absent reviewers. One module per concept:

- :mod:`.types`: the public types (payloads, decisions, ``InterruptOnConfig``, ``InvalidResumeError``, state);
- :mod:`.policy`: who must approve (``interrupt_on``, ``when``, descriptions, timeouts);
- :mod:`.resume`: the reviewer's reply, defined once (one pydantic ``TypeAdapter``: validation and JSON schema);
- :mod:`.approvals`: approvals bound to their exact call (a keyed digest), and who decided;
- :mod:`.middleware`: the hooks;
- :mod:`.expiry`: :func:`expire_pending_approvals`, for a background job.

"Always allow" grants are kept in the checkpointer's database by :mod:`middleware_kit.ledger.grants` (re-exported
here: :class:`Grant`, :func:`grant_store`).

``interrupt`` is a module global looked up at each call, both here and in :mod:`.middleware` (the module LangChain's
``langchain.agents.middleware.human_in_the_loop`` is served from, with ``get_config``): tests may patch
``middleware_kit.middlewares.human_in_the_loop.interrupt`` or ``...human_in_the_loop.middleware.interrupt`` (a
patched function is called with the payload only and its return value is validated like a resume value), or pass
``HumanInTheLoopMiddleware(..., interrupt=fake)``.
"""

from __future__ import annotations

from langgraph.types import interrupt  # noqa: F401 - a patch point, looked up at each call

from middleware_kit.ledger.grants import Grant, GrantStore, GrantUse, grant_store
from middleware_kit.middlewares.human_in_the_loop.approvals import ENV_KEY, ApprovalMismatchError
from middleware_kit.middlewares.human_in_the_loop.expiry import aexpire_pending_approvals, expire_pending_approvals
from middleware_kit.middlewares.human_in_the_loop.middleware import DEFAULT_EDIT_NOTICE, HumanInTheLoopMiddleware
from middleware_kit.middlewares.human_in_the_loop.types import (
    Action,
    ActionRequest,
    ApproveDecision,
    Decision,
    DecisionType,
    DescriptionFactory,
    EditDecision,
    EditedAction,
    ExpiredApproval,
    GrantRequest,
    HITLRequest,
    HITLResponse,
    HumanInTheLoopState,
    InterruptMode,
    InterruptOnConfig,
    InterruptOnPolicy,
    InvalidResumeError,
    OnTimeout,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
    ToolApprovalRequest,
    WhenPredicate,
)

__all__ = [
    "Action",
    "ActionRequest",
    "ApprovalMismatchError",
    "ApproveDecision",
    "DEFAULT_EDIT_NOTICE",
    "Decision",
    "DecisionType",
    "DescriptionFactory",
    "ENV_KEY",
    "EditDecision",
    "EditedAction",
    "ExpiredApproval",
    "Grant",
    "GrantRequest",
    "GrantStore",
    "GrantUse",
    "HITLRequest",
    "HITLResponse",
    "HumanInTheLoopMiddleware",
    "HumanInTheLoopState",
    "InterruptMode",
    "InterruptOnConfig",
    "InterruptOnPolicy",
    "InvalidResumeError",
    "OnTimeout",
    "RejectDecision",
    "RespondDecision",
    "ReviewConfig",
    "ToolApprovalRequest",
    "WhenPredicate",
    "aexpire_pending_approvals",
    "expire_pending_approvals",
    "grant_store",
]
