"""Bundled middlewares, one module each (``middleware_kit.middlewares.<name>``).

Users' tests patch module-level names in those modules (``human_in_the_loop.interrupt``, ``retry.sleep``), so import
the modules, not copies of their globals, when you need to patch.
"""

from middleware_kit.middlewares._tokens import TiktokenCounter, VocabularyNotFoundError
from middleware_kit.middlewares.auto_mode import (
    AutoModeMiddleware,
    ClassificationError,
)
from middleware_kit.middlewares.budget import (
    BudgetCheckInError,
    BudgetExceededError,
    BudgetLimit,
    BudgetMiddleware,
    BudgetState,
    ModelPrice,
    PriceTable,
    UnknownModelPriceError,
    charge,
)
from middleware_kit.middlewares.context_editing import (
    DEFAULT_TOOL_PLACEHOLDER,
    ClearToolUsesEdit,
    ContextEdit,
    ContextEditingMiddleware,
)
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.file_search import (
    FilesystemFileSearchMiddleware,
)
from middleware_kit.middlewares.guardrails import (
    GuardrailsMiddleware,
    GuardrailTripped,
    GuardVerdict,
    ModelGuard,
)
from middleware_kit.middlewares.human_in_the_loop import (
    Action,
    ActionRequest,
    ApproveDecision,
    Decision,
    DecisionType,
    EditDecision,
    EditedAction,
    ExpiredApproval,
    HITLRequest,
    HITLResponse,
    HumanInTheLoopMiddleware,
    HumanInTheLoopState,
    InterruptOnConfig,
    InvalidResumeError,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
    ToolApprovalRequest,
    aexpire_pending_approvals,
    expire_pending_approvals,
)
from middleware_kit.middlewares.limits import (
    ModelCallLimitExceededError,
    ModelCallLimitMiddleware,
    ModelCallLimitState,
    ToolCallLimitExceededError,
    ToolCallLimitMiddleware,
    ToolCallLimitState,
)
from middleware_kit.middlewares.llm_tool_emulator import (
    LLMToolEmulator,
)
from middleware_kit.middlewares.llm_tool_selector import (
    LLMToolSelectorMiddleware,
)
from middleware_kit.middlewares.loop_guard import (
    LoopGuardMiddleware,
    LoopGuardState,
)
from middleware_kit.middlewares.model_refusal import (
    ModelRefusalMiddleware,
)
from middleware_kit.middlewares.model_router import (
    ModelChoice,
    ModelRouterMiddleware,
    RoutingError,
)
from middleware_kit.middlewares.moderation import (
    KeywordModerationChecker,
    ModerationChecker,
    ModerationError,
    ModerationMiddleware,
    ModerationResult,
    OpenAIModerationChecker,
    OpenAIModerationError,
    OpenAIModerationMiddleware,
)
from middleware_kit.middlewares.pii import (
    PIIDetectionError,
    PIIMatch,
    PIIMiddleware,
    PIIState,
    RedactedMatch,
    detect_credit_card,
    detect_email,
    detect_ip,
    detect_mac_address,
    detect_url,
)
from middleware_kit.middlewares.prompt_caching import (
    AnthropicPromptCachingMiddleware,
    PromptCachingMiddleware,
)
from middleware_kit.middlewares.provider_tool_search import (
    ProviderToolSearchMiddleware,
    ToolSearchUnsupportedError,
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
from middleware_kit.middlewares.shell_tool import (
    BaseExecutionPolicy,
    CodexSandboxExecutionPolicy,
    CommandExecutionResult,
    DockerExecutionPolicy,
    HostExecutionPolicy,
    RedactionRule,
    ShellEnvironmentError,
    ShellSession,
    ShellSessionError,
    ShellToolMiddleware,
    ShellToolState,
    UnsupportedPolicyOptionError,
)
from middleware_kit.middlewares.summarization import ContextSize, SummarizationMiddleware, TriggerClause, is_summary
from middleware_kit.middlewares.todo_list import (
    PARALLEL_WRITE_TODOS_ERROR,
    WRITE_TODOS_SYSTEM_PROMPT,
    WRITE_TODOS_TOOL_DESCRIPTION,
    PlanningState,
    Todo,
    TodoListMiddleware,
    write_todos,
)
from middleware_kit.middlewares.tool_error import ToolErrorMiddleware

__all__ = [
    "Action",
    "ActionRequest",
    "AnthropicPromptCachingMiddleware",
    "ApproveDecision",
    "AutoModeMiddleware",
    "BaseExecutionPolicy",
    "BudgetCheckInError",
    "BudgetExceededError",
    "BudgetLimit",
    "BudgetMiddleware",
    "BudgetState",
    "ClassificationError",
    "ClearToolUsesEdit",
    "CodexSandboxExecutionPolicy",
    "ContextEdit",
    "ContextEditingMiddleware",
    "ContextSize",
    "DEFAULT_TOOL_PLACEHOLDER",
    "Decision",
    "DecisionType",
    "DockerExecutionPolicy",
    "EditDecision",
    "EditedAction",
    "ExpiredApproval",
    "FilesystemFileSearchMiddleware",
    "GuardVerdict",
    "GuardrailTripped",
    "GuardrailsMiddleware",
    "HITLRequest",
    "HITLResponse",
    "HostExecutionPolicy",
    "HumanInTheLoopMiddleware",
    "HumanInTheLoopState",
    "InterruptOnConfig",
    "InvalidResumeError",
    "KeywordModerationChecker",
    "LLMToolEmulator",
    "LLMToolSelectorMiddleware",
    "LoopGuardMiddleware",
    "LoopGuardState",
    "ModelCallLimitExceededError",
    "ModelCallLimitMiddleware",
    "ModelCallLimitState",
    "ModelChoice",
    "ModelFallbackMiddleware",
    "ModelGuard",
    "ModelPrice",
    "ModelRefusalMiddleware",
    "ModelRetryMiddleware",
    "ModelRouterMiddleware",
    "ModerationChecker",
    "ModerationError",
    "ModerationMiddleware",
    "ModerationResult",
    "OpenAIModerationChecker",
    "OpenAIModerationError",
    "OpenAIModerationMiddleware",
    "PARALLEL_WRITE_TODOS_ERROR",
    "PIIDetectionError",
    "PIIMatch",
    "PIIMiddleware",
    "PIIState",
    "PlanningState",
    "PriceTable",
    "PromptCachingMiddleware",
    "ProviderToolSearchMiddleware",
    "RedactedMatch",
    "RedactionRule",
    "RejectDecision",
    "RespondDecision",
    "RetryAttempt",
    "RetryState",
    "ReviewConfig",
    "RoutingError",
    "ShellSessionError",
    "ShellToolMiddleware",
    "ShellToolState",
    "SummarizationMiddleware",
    "TiktokenCounter",
    "Todo",
    "TodoListMiddleware",
    "ToolApprovalRequest",
    "ToolCallLimitExceededError",
    "ToolCallLimitMiddleware",
    "ToolCallLimitState",
    "ToolErrorMiddleware",
    "ToolRetryMiddleware",
    "ToolSearchUnsupportedError",
    "TriggerClause",
    "UnknownModelPriceError",
    "VocabularyNotFoundError",
    "WRITE_TODOS_SYSTEM_PROMPT",
    "WRITE_TODOS_TOOL_DESCRIPTION",
    "aexpire_pending_approvals",
    "charge",
    "current_attempt",
    "current_retry",
    "detect_credit_card",
    "detect_email",
    "detect_ip",
    "detect_mac_address",
    "detect_url",
    "expire_pending_approvals",
    "is_retryable",
    "is_summary",
    "write_todos",
]
