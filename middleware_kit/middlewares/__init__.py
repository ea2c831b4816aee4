"""Bundled middlewares, one module each (``middleware_kit.middlewares.<name>``).

Users' tests patch module-level names in those modules (``human_in_the_loop.interrupt``, ``retry.sleep``), so import
the modules, not copies of their globals, when you need to patch.
"""

from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.human_in_the_loop import (
    Action,
    ActionRequest,
    ApproveDecision,
    Decision,
    DecisionType,
    EditDecision,
    HITLRequest,
    HITLResponse,
    HumanInTheLoopMiddleware,
    HumanInTheLoopState,
    InterruptOnConfig,
    InvalidResumeError,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
)
from middleware_kit.middlewares.limits import (
    ModelCallLimitExceededError,
    ModelCallLimitMiddleware,
    ModelCallLimitState,
    ToolCallLimitExceededError,
    ToolCallLimitMiddleware,
    ToolCallLimitState,
)
from middleware_kit.middlewares.retry import (
    ModelRetryMiddleware,
    RetryAttempt,
    RetryState,
    ToolRetryMiddleware,
    current_attempt,
    current_retry,
    is_retryable,
)
from middleware_kit.middlewares.tool_error import ToolErrorMiddleware

__all__ = [
    "Action",
    "ActionRequest",
    "ApproveDecision",
    "Decision",
    "DecisionType",
    "EditDecision",
    "HITLRequest",
    "HITLResponse",
    "HumanInTheLoopMiddleware",
    "HumanInTheLoopState",
    "InterruptOnConfig",
    "InvalidResumeError",
    "ModelCallLimitExceededError",
    "ModelCallLimitMiddleware",
    "ModelCallLimitState",
    "ModelFallbackMiddleware",
    "ModelRetryMiddleware",
    "RejectDecision",
    "RespondDecision",
    "RetryAttempt",
    "RetryState",
    "ReviewConfig",
    "ToolCallLimitExceededError",
    "ToolCallLimitMiddleware",
    "ToolCallLimitState",
    "ToolErrorMiddleware",
    "ToolRetryMiddleware",
    "current_attempt",
    "current_retry",
    "is_retryable",
]
