"""The public surface is explicit: sorted ``__all__``, pinned here, and no dependency on ``langchain``."""

from __future__ import annotations

import pathlib
import re

import middleware_kit
import middleware_kit.testing

PUBLIC = [
    "Action",
    "AgentArgumentError",
    "AgentDefaults",
    "AgentMiddleware",
    "AgentState",
    "AnthropicPromptCachingMiddleware",
    "AutoModeMiddleware",
    "AutoStrategy",
    "BudgetExceededError",
    "BudgetMiddleware",
    "ClearToolUsesEdit",
    "CodexSandboxExecutionPolicy",
    "CompiledAgent",
    "ConflictingUpdateError",
    "ContextEditingMiddleware",
    "ContextError",
    "ContextSize",
    "ContextT",
    "Decision",
    "DockerExecutionPolicy",
    "ExtendedModelResponse",
    "FilesystemFileSearchMiddleware",
    "GuardrailTripped",
    "GuardrailsMiddleware",
    "HookNameError",
    "HookReturnError",
    "HookSignatureError",
    "HookValueError",
    "HostExecutionPolicy",
    "HumanInTheLoopMiddleware",
    "InputAgentState",
    "InternalCallAbandoned",
    "InterruptAlreadyResolvedError",
    "InterruptInFusedNodeWarning",
    "InterruptOnConfig",
    "InvalidJumpError",
    "InvalidResumeError",
    "JumpTo",
    "LLMToolEmulator",
    "LLMToolSelectorMiddleware",
    "LoopGuardMiddleware",
    "MiddlewareConfigError",
    "MiddlewareError",
    "MiddlewarePlan",
    "ModelCallFlow",
    "ModelCallLimitExceededError",
    "ModelCallLimitMiddleware",
    "ModelCallLimitState",
    "ModelCallResult",
    "ModelChoice",
    "ModelFallbackMiddleware",
    "ModelRefusalMiddleware",
    "ModelRequest",
    "ModelResponse",
    "ModelRetryMiddleware",
    "ModelRouterMiddleware",
    "ModerationError",
    "ModerationMiddleware",
    "MultipleStructuredOutputsError",
    "NothingToResumeError",
    "OmitFromInput",
    "OmitFromOutput",
    "OmitFromSchema",
    "OpenAIModerationError",
    "OpenAIModerationMiddleware",
    "OutputAgentState",
    "PIIDetectionError",
    "PIIMatch",
    "PIIMiddleware",
    "PlannedHook",
    "PlanningState",
    "PrivateStateAttr",
    "PromptCachingMiddleware",
    "ProviderPackageError",
    "ProviderStrategy",
    "ProviderToolSearchMiddleware",
    "RedactionRule",
    "ResponseT",
    "RunCancelledError",
    "RunControl",
    "RunDeadlineExceededError",
    "Runtime",
    "ShellToolMiddleware",
    "Sleep",
    "StateSchemaConflictError",
    "StructuredOutputError",
    "StructuredOutputValidationError",
    "SummarizationMiddleware",
    "ThreadBusyError",
    "TodoListMiddleware",
    "ToolApprovalRequest",
    "ToolCallFlow",
    "ToolCallLimitExceededError",
    "ToolCallLimitMiddleware",
    "ToolCallLimitState",
    "ToolCallRequest",
    "ToolErrorMiddleware",
    "ToolRetryMiddleware",
    "ToolStrategy",
    "TracePolicy",
    "TriggerClause",
    "UnknownStateKeyError",
    "UnknownToolError",
    "VocabularyNotFoundError",
    "WRITE_TODOS_SYSTEM_PROMPT",
    "WRITE_TODOS_TOOL_DESCRIPTION",
    "__version__",
    "acancel_run",
    "after_agent",
    "after_model",
    "after_tool",
    "agent_scope",
    "ainvoke_internal",
    "before_agent",
    "before_model",
    "before_tool",
    "cancel_run",
    "configure_trace_policy",
    "create_agent",
    "current_agent",
    "detect_credit_card",
    "detect_email",
    "detect_ip",
    "detect_mac_address",
    "detect_url",
    "dynamic_prompt",
    "expire_pending_approvals",
    "hook_config",
    "invoke_internal",
    "modify_model_request",
    "omit_payload",
    "with_run_control",
    "wrap_model_call",
    "wrap_tool_call",
    "write_todos",
]


def test_all_is_sorted_and_pinned() -> None:
    assert middleware_kit.__all__ == sorted(middleware_kit.__all__)
    assert middleware_kit.__all__ == PUBLIC
    for name in middleware_kit.__all__:
        assert hasattr(middleware_kit, name), name


def test_bundled_middlewares_surface() -> None:
    import middleware_kit.middlewares as bundled

    assert bundled.__all__ == sorted(bundled.__all__)
    for name in bundled.__all__:
        assert hasattr(bundled, name), name
    top_level = [n for n in middleware_kit.__all__ if hasattr(bundled, n)]
    for name in top_level:
        assert getattr(middleware_kit, name) is getattr(bundled, name)


def test_testing_kit_surface() -> None:
    assert middleware_kit.testing.__all__ == sorted(middleware_kit.testing.__all__)
    for name in middleware_kit.testing.__all__:
        assert hasattr(middleware_kit.testing, name)


def test_every_error_names_middleware_and_hook() -> None:
    for name in middleware_kit.__all__:
        obj = getattr(middleware_kit, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and not issubclass(obj, Warning):
            assert issubclass(obj, middleware_kit.MiddlewareError), name


def test_never_imports_langchain() -> None:
    root = pathlib.Path(middleware_kit.__file__).parent
    pattern = re.compile(r"^\s*(import langchain\b|from langchain(\.| ))", re.M)
    offenders = [str(p) for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_py_typed_is_shipped() -> None:
    assert (pathlib.Path(middleware_kit.__file__).parent / "py.typed").exists()


def test_every_public_name_also_imports_from_middleware_kit_middleware() -> None:
    import middleware_kit.middleware as mw_module
    from middleware_kit.middleware import create_agent, hook_config, wrap_model_call  # noqa: F401

    for name in middleware_kit.__all__:
        assert getattr(mw_module, name) is getattr(middleware_kit, name), name
