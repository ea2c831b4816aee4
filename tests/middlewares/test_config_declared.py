"""Declared configuration (issue 25 item 5): every bundled middleware's parameters are declared once, checked by one
small validator layer (``middlewares/_config.py``), and the public constructors stay exactly LangChain's.

The signatures below were recorded from the constructors before their validation moved into declarations; a change
to a name, order, default, keyword-only marker or type hint of any of them fails here.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

import middleware_kit.middlewares as bundled
from middleware_kit import AgentMiddleware, MiddlewareConfigError, create_agent
from middleware_kit.middlewares._config import (
    CALLABLE,
    INT_AT_LEAST_1,
    Config,
    config_error,
    one_of,
    rule,
)
from middleware_kit.middlewares._frozen import FrozenConfig, FrozenMiddlewareError
from middleware_kit.middlewares._shell_policies import BaseExecutionPolicy
from middleware_kit.middlewares.budget import BudgetLimit
from middleware_kit.middlewares.moderation import KeywordModerationChecker
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return ""
    if isinstance(value, str) and len(value) > 60:
        return f" = <str sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}>"
    if callable(value):
        return f" = <{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}>"
    return f" = {value!r}"


def _signature(cls: type) -> list[str]:
    sig = inspect.signature(cls)
    return [f"{p.kind.name} {p.name}: {p.annotation!r}{_default(p.default)}" for p in sig.parameters.values()] + [
        f"-> {sig.return_annotation!r}"
    ]


SIGNATURES: dict[str, list[str]] = {
    "AnthropicPromptCachingMiddleware": [
        "POSITIONAL_OR_KEYWORD type: \"Literal['ephemeral']\" = 'ephemeral'",
        "POSITIONAL_OR_KEYWORD ttl: \"Literal['5m', '1h']\" = '5m'",
        "POSITIONAL_OR_KEYWORD min_messages_to_cache: 'int' = 0",
        "POSITIONAL_OR_KEYWORD unsupported_model_behavior: 'UnsupportedBehavior' = 'warn'",
        "KEYWORD_ONLY check_prefix_stability: 'bool' = True",
        "-> 'None'",
    ],
    "AutoModeMiddleware": [
        "POSITIONAL_OR_KEYWORD tools: 'Sequence[str | BaseTool]'",
        "KEYWORD_ONLY classifier: 'BaseDecisionModel | BaseChatModel | str'",
        "KEYWORD_ONLY instructions: 'str' = <str sha256:a58dcf9684f68a54>",
        "KEYWORD_ONLY criteria: 'NoulCriteria | Mapping[str, Any] | None' = None",
        "KEYWORD_ONLY threshold: 'float' = 0.5",
        "KEYWORD_ONLY context_messages: 'int' = 30",
        "KEYWORD_ONLY on_error: \"Literal['raise', 'block']\" = 'raise'",
        "-> 'None'",
    ],
    "BaseExecutionPolicy": [
        "POSITIONAL_OR_KEYWORD command_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD startup_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD termination_timeout: 'float' = 10.0",
        "POSITIONAL_OR_KEYWORD max_output_lines: 'int' = 100",
        "POSITIONAL_OR_KEYWORD max_output_bytes: 'int | None' = None",
        "-> None",
    ],
    "BudgetLimit": ["KEYWORD_ONLY tokens: 'int | None' = None", "KEYWORD_ONLY cost: 'float | None' = None", "-> None"],
    "BudgetMiddleware": [
        "KEYWORD_ONLY run: 'BudgetLimit | None' = None",
        "KEYWORD_ONLY thread: 'BudgetLimit | None' = None",
        "KEYWORD_ONLY tenant: 'BudgetLimit | Callable[[str], BudgetLimit | None] | None' = None",
        "KEYWORD_ONLY tenant_id: 'str | Callable[[Any], str | None]' = 'tenant_id'",
        "KEYWORD_ONLY prices: 'PriceTable | Mapping[str, ModelPrice | tuple[float, float]] | None' = None",
        "KEYWORD_ONLY warn_at: 'float | None' = 0.8",
        "KEYWORD_ONLY cheaper_model: 'BaseChatModel | None' = None",
        "KEYWORD_ONLY switch_at: 'float | None' = None",
        "KEYWORD_ONLY check_in_at: 'float | None' = None",
        "KEYWORD_ONLY on_exceeded: \"Literal['end', 'error']\" = 'end'",
        "KEYWORD_ONLY namespace: 'tuple[str, ...]' = ('middleware_kit', 'budget')",
        "KEYWORD_ONLY encoding: 'str | None' = None",
        "-> 'None'",
    ],
    "ClearToolUsesEdit": [
        "POSITIONAL_OR_KEYWORD trigger: 'int' = 100000",
        "POSITIONAL_OR_KEYWORD clear_at_least: 'int' = 0",
        "POSITIONAL_OR_KEYWORD keep: 'int' = 3",
        "POSITIONAL_OR_KEYWORD clear_tool_inputs: 'bool' = False",
        "POSITIONAL_OR_KEYWORD exclude_tools: 'Sequence[str]' = ()",
        "POSITIONAL_OR_KEYWORD placeholder: 'str' = '[cleared]'",
        "-> None",
    ],
    "CodexSandboxExecutionPolicy": [
        "POSITIONAL_OR_KEYWORD command_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD startup_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD termination_timeout: 'float' = 10.0",
        "POSITIONAL_OR_KEYWORD max_output_lines: 'int' = 100",
        "POSITIONAL_OR_KEYWORD max_output_bytes: 'int | None' = None",
        "POSITIONAL_OR_KEYWORD binary: 'str' = 'codex'",
        "POSITIONAL_OR_KEYWORD platform: \"Literal['auto', 'linux', 'macos']\" = 'auto'",
        "POSITIONAL_OR_KEYWORD config_overrides: 'Mapping[str, Any]' = <factory>",
        "-> None",
    ],
    "CommandExecutionResult": [
        "POSITIONAL_OR_KEYWORD output: 'str'",
        "POSITIONAL_OR_KEYWORD exit_code: 'int | None'",
        "POSITIONAL_OR_KEYWORD timed_out: 'bool'",
        "POSITIONAL_OR_KEYWORD truncated_by_lines: 'bool'",
        "POSITIONAL_OR_KEYWORD truncated_by_bytes: 'bool'",
        "POSITIONAL_OR_KEYWORD total_lines: 'int'",
        "POSITIONAL_OR_KEYWORD total_bytes: 'int'",
        "POSITIONAL_OR_KEYWORD exited: 'bool' = False",
        "-> None",
    ],
    "ContextEdit": [
        "VAR_POSITIONAL args: <class 'inspect._empty'>",
        "VAR_KEYWORD kwargs: <class 'inspect._empty'>",
        "-> <class 'inspect._empty'>",
    ],
    "ContextEditingMiddleware": [
        "KEYWORD_ONLY edits: 'Sequence[ContextEdit] | None' = None",
        "KEYWORD_ONLY token_count_method: \"Literal['approximate', 'model']\" = 'approximate'",
        "KEYWORD_ONLY token_counter: 'TokenCounter | None' = None",
        "-> 'None'",
    ],
    "DockerExecutionPolicy": [
        "POSITIONAL_OR_KEYWORD command_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD startup_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD termination_timeout: 'float' = 10.0",
        "POSITIONAL_OR_KEYWORD max_output_lines: 'int' = 100",
        "POSITIONAL_OR_KEYWORD max_output_bytes: 'int | None' = None",
        "POSITIONAL_OR_KEYWORD binary: 'str' = 'docker'",
        "POSITIONAL_OR_KEYWORD image: 'str' = 'python:3.12-alpine3.19'",
        "POSITIONAL_OR_KEYWORD remove_container_on_exit: 'bool' = True",
        "POSITIONAL_OR_KEYWORD network_enabled: 'bool' = False",
        "POSITIONAL_OR_KEYWORD extra_run_args: 'Sequence[str] | None' = None",
        "POSITIONAL_OR_KEYWORD memory_bytes: 'int | None' = None",
        "POSITIONAL_OR_KEYWORD cpu_time_seconds: 'Any | None' = None",
        "POSITIONAL_OR_KEYWORD cpus: 'str | None' = None",
        "POSITIONAL_OR_KEYWORD read_only_rootfs: 'bool' = False",
        "POSITIONAL_OR_KEYWORD user: 'str | None' = None",
        "-> None",
    ],
    "FilesystemFileSearchMiddleware": [
        "KEYWORD_ONLY root_path: 'str | os.PathLike[str]'",
        "KEYWORD_ONLY use_ripgrep: 'bool' = True",
        "KEYWORD_ONLY max_file_size_mb: 'float' = 10",
        "KEYWORD_ONLY max_results: 'int' = 1000",
        "KEYWORD_ONLY search_timeout: 'float' = 10.0",
        "-> 'None'",
    ],
    "GuardVerdict": [
        "POSITIONAL_OR_KEYWORD tripped: 'bool'",
        "POSITIONAL_OR_KEYWORD reason: 'str' = ''",
        "POSITIONAL_OR_KEYWORD guard: 'str' = ''",
        "POSITIONAL_OR_KEYWORD stage: 'str' = ''",
        "POSITIONAL_OR_KEYWORD info: 'Mapping[str, Any]' = <factory>",
        "-> None",
    ],
    "GuardrailsMiddleware": [
        "KEYWORD_ONLY input_guards: 'Sequence[InputGuard | ModelGuard]' = ()",
        "KEYWORD_ONLY output_guards: 'Sequence[OutputGuard]' = ()",
        "KEYWORD_ONLY on_trip: \"Literal['end', 'error']\" = 'end'",
        "KEYWORD_ONLY tripped_message: 'str | Callable[[GuardVerdict], str]' = <str sha256:a5b90c060809b01b>",
        "KEYWORD_ONLY parallel: 'bool' = True",
        "-> 'None'",
    ],
    "HostExecutionPolicy": [
        "POSITIONAL_OR_KEYWORD command_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD startup_timeout: 'float' = 30.0",
        "POSITIONAL_OR_KEYWORD termination_timeout: 'float' = 10.0",
        "POSITIONAL_OR_KEYWORD max_output_lines: 'int' = 100",
        "POSITIONAL_OR_KEYWORD max_output_bytes: 'int | None' = None",
        "POSITIONAL_OR_KEYWORD cpu_time_seconds: 'int | None' = None",
        "POSITIONAL_OR_KEYWORD memory_bytes: 'int | None' = None",
        "POSITIONAL_OR_KEYWORD create_process_group: 'bool' = True",
        "-> None",
    ],
    "KeywordModerationChecker": [
        "POSITIONAL_OR_KEYWORD categories: 'Mapping[str, Sequence[str | re.Pattern[str]]] | Sequence[str | re.Pattern[str]]'",  # noqa: E501
        "KEYWORD_ONLY case_sensitive: 'bool' = False",
        "-> 'None'",
    ],
    "LLMToolEmulator": [
        "KEYWORD_ONLY tools: 'Sequence[str | BaseTool] | None' = None",
        "KEYWORD_ONLY model: 'str | BaseChatModel | None' = None",
        "-> 'None'",
    ],
    "LLMToolSelectorMiddleware": [
        "KEYWORD_ONLY model: 'str | BaseChatModel | None' = None",
        "KEYWORD_ONLY system_prompt: 'str' = <str sha256:416fa0ae1bb334a9>",
        "KEYWORD_ONLY max_tools: 'int | None' = None",
        "KEYWORD_ONLY always_include: 'Sequence[str | BaseTool] | None' = None",
        "KEYWORD_ONLY max_retries: 'int' = 1",
        "KEYWORD_ONLY on_parsing_failure: 'OnParsingFailure' = 'error'",
        "-> 'None'",
    ],
    "LoopGuardMiddleware": [
        "KEYWORD_ONLY max_identical_calls: 'int' = 2",
        "KEYWORD_ONLY oscillation_cycles: 'int | None' = 2",
        "KEYWORD_ONLY no_progress_turns: 'int | None' = 3",
        "KEYWORD_ONLY detect_unknown_tools: 'bool' = True",
        "KEYWORD_ONLY actions: 'Sequence[LoopAction]' = ('nudge', 'remove_tool', 'final_answer')",
        "KEYWORD_ONLY steps_to_spare: 'int | None' = 4",
        "KEYWORD_ONLY final_prompt: 'str' = <str sha256:135102352d1a48e2>",
        "-> 'None'",
    ],
    "ModelCallLimitMiddleware": [
        "KEYWORD_ONLY thread_limit: 'int | None' = None",
        "KEYWORD_ONLY run_limit: 'int | None' = None",
        "KEYWORD_ONLY exit_behavior: \"Literal['end', 'error']\" = 'end'",
        "-> 'None'",
    ],
    "ModelChoice": [
        "POSITIONAL_OR_KEYWORD model: 'str | BaseChatModel'",
        "POSITIONAL_OR_KEYWORD criteria: 'JsonValue'",
        "-> None",
    ],
    "ModelFallbackMiddleware": [
        "POSITIONAL_OR_KEYWORD first_model: 'BaseChatModel | str'",
        "VAR_POSITIONAL more: 'BaseChatModel | str'",
        "-> 'None'",
    ],
    "Grant": [
        "KEYWORD_ONLY grant_id: 'str'",
        "KEYWORD_ONLY tool: 'str'",
        "KEYWORD_ONLY args: 'Mapping[str, Any]'",
        "KEYWORD_ONLY scope: 'GrantScope'",
        "KEYWORD_ONLY scope_id: 'str'",
        "KEYWORD_ONLY granted_by: 'str | None'",
        "KEYWORD_ONLY granted_at: 'float'",
        "KEYWORD_ONLY expires_at: 'float'",
        "KEYWORD_ONLY origin: 'str | None' = None",
        "KEYWORD_ONLY revoked_at: 'float | None' = None",
        "-> None",
    ],
    "GrantStore": [
        "POSITIONAL_OR_KEYWORD saver: 'Any'",
        "-> 'None'",
    ],
    "GrantUse": [
        "POSITIONAL_OR_KEYWORD grant_id: 'str'",
        "POSITIONAL_OR_KEYWORD thread_id: 'str'",
        "POSITIONAL_OR_KEYWORD call_id: 'str'",
        "POSITIONAL_OR_KEYWORD tool: 'str'",
        "POSITIONAL_OR_KEYWORD used_at: 'float'",
        "-> None",
    ],
    "ModelGuard": [
        "POSITIONAL_OR_KEYWORD model: 'BaseChatModel'",
        "KEYWORD_ONLY instructions: 'str' = <str sha256:6128eb575eadf51b>",
        "KEYWORD_ONLY text: 'Callable[[ModelRequest[Any]], str]' = <middleware_kit.middlewares.guardrails.latest_user_text>",  # noqa: E501
        "KEYWORD_ONLY name: 'str' = 'model_guard'",
        "-> 'None'",
    ],
    "ModelPrice": [
        "POSITIONAL_OR_KEYWORD input: 'float'",
        "POSITIONAL_OR_KEYWORD output: 'float'",
        "POSITIONAL_OR_KEYWORD cached_input: 'float | None' = None",
        "-> None",
    ],
    "ModelRefusalMiddleware": ["-> 'None'"],
    "ModelRetryMiddleware": [
        "KEYWORD_ONLY max_retries: 'int' = 2",
        "KEYWORD_ONLY retry_on: 'RetryOn' = <middleware_kit.middlewares.retry.is_retryable>",
        "KEYWORD_ONLY on_failure: 'OnFailure' = 'continue'",
        "KEYWORD_ONLY backoff_factor: 'float' = 2.0",
        "KEYWORD_ONLY initial_delay: 'float' = 1.0",
        "KEYWORD_ONLY max_delay: 'float' = 60.0",
        "KEYWORD_ONLY jitter: 'bool' = True",
        "KEYWORD_ONLY max_elapsed: 'float | None' = None",
        "KEYWORD_ONLY budget: 'Budget' = None",
        "KEYWORD_ONLY respect_retry_after: 'bool' = True",
        "KEYWORD_ONLY sleep: 'Callable[[float], object] | None' = None",
        "-> 'None'",
    ],
    "ModelRouterMiddleware": [
        "POSITIONAL_OR_KEYWORD choices: 'Mapping[str, ModelChoice]'",
        "POSITIONAL_OR_KEYWORD instructions: 'Content'",
        "POSITIONAL_OR_KEYWORD classifier: 'BaseDecisionModel | BaseChatModel | str | RouteRule'",
        "KEYWORD_ONLY min_confidence: 'float | None' = None",
        "KEYWORD_ONLY on_error: \"Literal['raise', 'default']\" = 'raise'",
        "-> 'None'",
    ],
    "ModerationChecker": [
        "VAR_POSITIONAL args: <class 'inspect._empty'>",
        "VAR_KEYWORD kwargs: <class 'inspect._empty'>",
        "-> <class 'inspect._empty'>",
    ],
    "ModerationMiddleware": [
        "POSITIONAL_OR_KEYWORD checker: 'ModerationChecker'",
        "KEYWORD_ONLY check_input: 'bool' = True",
        "KEYWORD_ONLY check_output: 'bool' = True",
        "KEYWORD_ONLY check_tool_results: 'bool' = False",
        "KEYWORD_ONLY exit_behavior: 'ExitBehavior' = 'end'",
        "KEYWORD_ONLY violation_message: 'str | None' = None",
        "-> 'None'",
    ],
    "ModerationResult": [
        "POSITIONAL_OR_KEYWORD flagged: 'bool'",
        "POSITIONAL_OR_KEYWORD categories: 'tuple[str, ...]' = ()",
        "POSITIONAL_OR_KEYWORD category_scores: 'Mapping[str, float]' = <factory>",
        "-> None",
    ],
    "OpenAIModerationChecker": [
        "POSITIONAL_OR_KEYWORD model: 'str' = 'omni-moderation-latest'",
        "KEYWORD_ONLY client: 'Any' = None",
        "KEYWORD_ONLY async_client: 'Any' = None",
        "-> 'None'",
    ],
    "OpenAIModerationMiddleware": [
        "KEYWORD_ONLY model: 'str' = 'omni-moderation-latest'",
        "KEYWORD_ONLY check_input: 'bool' = True",
        "KEYWORD_ONLY check_output: 'bool' = True",
        "KEYWORD_ONLY check_tool_results: 'bool' = False",
        "KEYWORD_ONLY exit_behavior: 'ExitBehavior' = 'end'",
        "KEYWORD_ONLY violation_message: 'str | None' = None",
        "KEYWORD_ONLY client: 'Any' = None",
        "KEYWORD_ONLY async_client: 'Any' = None",
        "-> 'None'",
    ],
    "PIIMiddleware": [
        "POSITIONAL_OR_KEYWORD pii_type: 'str'",
        "KEYWORD_ONLY strategy: 'Strategy' = 'redact'",
        "KEYWORD_ONLY detector: 'DetectorSpec' = None",
        "KEYWORD_ONLY apply_to_input: 'bool' = True",
        "KEYWORD_ONLY apply_to_output: 'bool' = False",
        "KEYWORD_ONLY apply_to_tool_results: 'bool' = False",
        "KEYWORD_ONLY salt: 'Salt' = None",
        "KEYWORD_ONLY key: 'KeySpec | None' = None",
        "KEYWORD_ONLY memo_bytes: 'int' = 4000000",
        "KEYWORD_ONLY name: 'str | None' = None",
        "-> 'None'",
    ],
    "PriceTable": [
        "POSITIONAL_OR_KEYWORD prices: 'Mapping[str, ModelPrice | tuple[float, float]] | None' = None",
        "-> 'None'",
    ],
    "PromptCachingMiddleware": [
        "POSITIONAL_OR_KEYWORD type: \"Literal['ephemeral']\" = 'ephemeral'",
        "POSITIONAL_OR_KEYWORD ttl: \"Literal['5m', '1h']\" = '5m'",
        "POSITIONAL_OR_KEYWORD min_messages_to_cache: 'int' = 0",
        "POSITIONAL_OR_KEYWORD unsupported_model_behavior: 'UnsupportedBehavior | None' = None",
        "KEYWORD_ONLY check_prefix_stability: 'bool' = True",
        "-> 'None'",
    ],
    "ProviderToolSearchMiddleware": [
        "KEYWORD_ONLY searchable_tools: 'Sequence[ToolIdentifier] | None' = None",
        "KEYWORD_ONLY on_unsupported: \"Literal['error', 'send_all']\" = 'error'",
        "-> 'None'",
    ],
    "RedactionRule": [
        "POSITIONAL_OR_KEYWORD pii_type: 'str'",
        "POSITIONAL_OR_KEYWORD strategy: 'RedactionStrategy' = 'redact'",
        "POSITIONAL_OR_KEYWORD detector: 'Detector | str | re.Pattern[str] | None' = None",
        "-> None",
    ],
    "RetryAttempt": [
        "POSITIONAL_OR_KEYWORD middleware: 'str'",
        "POSITIONAL_OR_KEYWORD number: 'int'",
        "POSITIONAL_OR_KEYWORD max_attempts: 'int'",
        "POSITIONAL_OR_KEYWORD previous_error: 'BaseException | None'",
        "-> None",
    ],
    "ShellSession": [
        "POSITIONAL_OR_KEYWORD workspace: 'Path'",
        "POSITIONAL_OR_KEYWORD policy: 'BaseExecutionPolicy'",
        "POSITIONAL_OR_KEYWORD command: 'tuple[str, ...]'",
        "POSITIONAL_OR_KEYWORD environment: 'Mapping[str, str] | None' = None",
        "KEYWORD_ONLY session_id: 'str | None' = None",
        "-> 'None'",
    ],
    "ShellToolMiddleware": [
        "POSITIONAL_OR_KEYWORD workspace_root: 'str | os.PathLike[str] | None' = None",
        "KEYWORD_ONLY startup_commands: 'tuple[str, ...] | list[str] | str | None' = None",
        "KEYWORD_ONLY shutdown_commands: 'tuple[str, ...] | list[str] | str | None' = None",
        "KEYWORD_ONLY execution_policy: 'BaseExecutionPolicy | None' = None",
        "KEYWORD_ONLY redaction_rules: 'tuple[RedactionRule, ...] | list[RedactionRule] | None' = None",
        "KEYWORD_ONLY tool_description: 'str | None' = None",
        "KEYWORD_ONLY tool_name: 'str' = 'shell'",
        "KEYWORD_ONLY shell_command: 'Sequence[str] | str | None' = None",
        "KEYWORD_ONLY env: 'Mapping[str, Any] | None' = None",
        "-> 'None'",
    ],
    "SummarizationMiddleware": [
        "POSITIONAL_OR_KEYWORD model: 'Any'",
        "KEYWORD_ONLY trigger: 'TriggerSpec | Callable[[Any], TriggerSpec] | None' = None",
        "KEYWORD_ONLY keep: 'ContextSize | TriggerClause | Callable[[Any], ContextSize]' = ('messages', 20)",
        "KEYWORD_ONLY token_counter: \"Literal['tiktoken', 'approximate'] | Callable[[Sequence[BaseMessage]], int]\" = 'tiktoken'",  # noqa: E501
        "KEYWORD_ONLY encoding: 'str | None' = None",
        "KEYWORD_ONLY summary_prompt: 'str' = <str sha256:c9b362e258e5954c>",
        "KEYWORD_ONLY trim_tokens_to_summarize: 'int | None' = 4000",
        "KEYWORD_ONLY summarizer: 'Summarizer | None' = None",
        "KEYWORD_ONLY on_failure: \"Literal['error', 'skip']\" = 'error'",
        "VAR_KEYWORD deprecated_kwargs: 'Any'",
        "-> 'None'",
    ],
    "TiktokenCounter": ["POSITIONAL_OR_KEYWORD encoding: 'str | tiktoken.Encoding' = 'cl100k_base'", "-> 'None'"],
    "TodoListMiddleware": [
        "KEYWORD_ONLY system_prompt: 'str' = <str sha256:bfbc2424bc23a58b>",
        "KEYWORD_ONLY tool_description: 'str' = <str sha256:cb62548155d6a5ee>",
        "-> 'None'",
    ],
    "ToolCallLimitMiddleware": [
        "KEYWORD_ONLY tool_name: 'str | None' = None",
        "KEYWORD_ONLY thread_limit: 'int | None' = None",
        "KEYWORD_ONLY run_limit: 'int | None' = None",
        "KEYWORD_ONLY exit_behavior: 'ExitBehavior' = 'continue'",
        "-> 'None'",
    ],
    "ToolErrorMiddleware": [
        "POSITIONAL_OR_KEYWORD on_error: 'OnError' = None",
        "KEYWORD_ONLY aon_error: 'AOnError | None' = None",
        "KEYWORD_ONLY catch: 'Catch' = <builtins.Exception>",
        "KEYWORD_ONLY tools: 'Sequence[BaseTool | str] | None' = None",
        "-> 'None'",
    ],
    "ToolRetryMiddleware": [
        "KEYWORD_ONLY tools: 'Sequence[BaseTool | str] | None' = None",
        "VAR_KEYWORD policy: 'Unpack[_Policy]'",
        "-> 'None'",
    ],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_public_constructor_signatures_are_unchanged(name: str) -> None:
    assert _signature(getattr(bundled, name)) == SIGNATURES[name]


def test_every_bundled_class_with_a_signature_is_recorded() -> None:
    def has_signature(obj: Any) -> bool:
        try:
            inspect.signature(obj)
        except (TypeError, ValueError):
            return False
        return True

    classes = {
        name
        for name in bundled.__all__
        if isinstance(obj := getattr(bundled, name), type)
        and "human_in_the_loop" not in obj.__module__
        and not issubclass(obj, BaseException)
        and has_signature(obj)
    }
    assert classes == set(SIGNATURES)


# -- the errors are the ones the constructors raised before (recorded then) ----------------------------------------
def _kwargs(cls: type) -> dict[str, Any]:
    """Valid arguments of each class, to which one broken argument is added."""
    model = ScriptedChatModel(["ok"], profile={"max_input_tokens": 1000})
    required: dict[str, dict[str, Any]] = {
        "AutoModeMiddleware": {"tools": ["delete"], "classifier": model},
        "BudgetMiddleware": {"run": BudgetLimit(tokens=100)},
        "FilesystemFileSearchMiddleware": {"root_path": "."},
        "GuardrailsMiddleware": {"input_guards": [len]},
        "ModerationMiddleware": {"checker": KeywordModerationChecker(["bad"])},
        "PIIMiddleware": {"pii_type": "email"},
        "SummarizationMiddleware": {"model": model},
        "ToolCallLimitMiddleware": {"run_limit": 3},
        "ModelRouterMiddleware": {
            "choices": {"fast": bundled.ModelChoice(model, "simple")},
            "instructions": "Which?",
            "classifier": lambda message: None,
        },
    }
    return required.get(cls.__name__, {})


BROKEN: list[tuple[str, dict[str, Any], str, str, str]] = [
    (
        "LoopGuardMiddleware",
        {"final_prompt": ""},
        "LoopGuardMiddleware",
        "final_prompt",
        "LoopGuardMiddleware: final_prompt must be a non-empty string.",
    ),
    (
        "LoopGuardMiddleware",
        {"oscillation_cycles": 0},
        "LoopGuardMiddleware",
        "oscillation_cycles",
        "LoopGuardMiddleware: oscillation_cycles must be an int >= 1 or None, got 0.",
    ),
    (
        "FilesystemFileSearchMiddleware",
        {"max_results": 0},
        "FilesystemFileSearchMiddleware",
        "max_results",
        "FilesystemFileSearchMiddleware: max_results must be a positive int, got 0.",
    ),
    (
        "PromptCachingMiddleware",
        {"type": "x"},
        "PromptCachingMiddleware",
        "type",
        "PromptCachingMiddleware: type must be 'ephemeral' (the only cache type), got 'x'.",
    ),
    (
        "AnthropicPromptCachingMiddleware",
        {"unsupported_model_behavior": "x"},
        "AnthropicPromptCachingMiddleware",
        "unsupported_model_behavior",
        "AnthropicPromptCachingMiddleware: unsupported_model_behavior must be 'ignore', 'warn' or 'raise', got 'x'.",
    ),
    (
        "AutoModeMiddleware",
        {"threshold": 1.5},
        "AutoModeMiddleware",
        "threshold",
        "AutoModeMiddleware: threshold must be a number in (0, 1]; got 1.5.",
    ),
    (
        "AutoModeMiddleware",
        {"instructions": ""},
        "AutoModeMiddleware",
        "instructions",
        "AutoModeMiddleware: instructions must be a non-empty str (the risk question).",
    ),
    (
        "GuardrailsMiddleware",
        {"tripped_message": -1},
        "GuardrailsMiddleware",
        "tripped_message",
        "GuardrailsMiddleware: tripped_message must be a str or a function of the verdict.",
    ),
    (
        "ModerationMiddleware",
        {"violation_message": "{x}"},
        "ModerationMiddleware",
        "violation_message",
        "ModerationMiddleware: violation_message '{x}' cannot be formatted (KeyError: 'x'). Its placeholders are "
        "{categories}, {category_scores} and {original_content}; write {{ and }} for literal braces.",
    ),
    (
        "BudgetMiddleware",
        {"switch_at": 0.5},
        "BudgetMiddleware",
        "cheaper_model",
        "BudgetMiddleware: cheaper_model is missing: switch_at (a fraction) and cheaper_model (a chat model) go "
        "together; give both or neither.",
    ),
    (
        "BudgetMiddleware",
        {"warn_at": 1.5},
        "BudgetMiddleware",
        "warn_at",
        "BudgetMiddleware: warn_at must be a fraction of the limit in (0, 1] or None, got 1.5.",
    ),
    (
        "ModelRetryMiddleware",
        {"max_retries": -1},
        "ModelRetryMiddleware",
        "max_retries",
        "max_retries must be >= 0. ModelRetryMiddleware: got -1; pass an int (0: no retry).",
    ),
    (
        "ToolRetryMiddleware",
        {"budget": "x"},
        "ToolRetryMiddleware",
        "budget",
        "ToolRetryMiddleware: budget must be an int >= 0, a function of the runtime returning one, or None; got 'x'.",
    ),
    (
        "ShellToolMiddleware",
        {"tool_name": "bad name!"},
        "ShellToolMiddleware",
        "tool_name",
        "ShellToolMiddleware: tool_name must be 1-64 letters, digits, '_' or '-', got 'bad name!'.",
    ),
    (
        "ShellToolMiddleware",
        {"execution_policy": BaseExecutionPolicy()},
        "ShellToolMiddleware",
        "execution_policy",
        "ShellToolMiddleware: execution_policy BaseExecutionPolicy is the base class; use HostExecutionPolicy, "
        "DockerExecutionPolicy or CodexSandboxExecutionPolicy, or a subclass that implements spawn().",
    ),
    (
        "SummarizationMiddleware",
        {"trim_tokens_to_summarize": 0},
        "SummarizationMiddleware",
        "trim_tokens_to_summarize",
        "trim_tokens_to_summarize must be a positive int or None, got 0 "
        "(SummarizationMiddleware, trim_tokens_to_summarize.)",
    ),
    (
        "SummarizationMiddleware",
        {"summary_prompt": "x"},
        "SummarizationMiddleware",
        "summary_prompt",
        "summary_prompt must contain '{messages}' (where the messages to summarize go) (SummarizationMiddleware, "
        "summary_prompt.)",
    ),
    (
        "PIIMiddleware",
        {"strategy": "x"},
        "PIIMiddleware[email]",
        "strategy",
        "PIIMiddleware strategy must be one of 'redact', 'mask', 'hash', 'block', 'placeholder'; got 'x'.",
    ),
    (
        "PIIMiddleware",
        {"memo_bytes": -1},
        "PIIMiddleware[email]",
        "memo_bytes",
        "PIIMiddleware[email]: memo_bytes must be an int >= 0 (bytes; 0 disables the memo); got -1.",
    ),
    (
        "ToolCallLimitMiddleware",
        {"exit_behavior": "x"},
        "ToolCallLimitMiddleware",
        "exit_behavior",
        "Invalid exit_behavior: 'x'. Must be one of ('continue', 'error', 'end'). ToolCallLimitMiddleware: pass one of "
        "'continue', 'error', 'end'.",
    ),
    (
        "ModelCallLimitMiddleware",
        {"exit_behavior": "x", "run_limit": 1},
        "ModelCallLimitMiddleware",
        "exit_behavior",
        "Invalid exit_behavior: x. Must be 'end' or 'error'. ModelCallLimitMiddleware: pass one of 'end', 'error'.",
    ),
    (
        "ContextEditingMiddleware",
        {"token_count_method": "x"},
        "ContextEditingMiddleware",
        "token_count_method",
        "ContextEditingMiddleware(token_count_method='x'): use 'approximate' or 'model'.",
    ),
    (
        "TodoListMiddleware",
        {"tool_description": ""},
        "TodoListMiddleware",
        "tool_description",
        "TodoListMiddleware: tool_description must be a str (not empty), got ''. Pass the text the model reads "
        "(system_prompt='' adds nothing).",
    ),
    (
        "LLMToolSelectorMiddleware",
        {"max_tools": 0},
        "LLMToolSelectorMiddleware",
        "max_tools",
        "LLMToolSelectorMiddleware: max_tools must be a positive int or None; got 0. Use always_include for tools "
        "that must always be sent.",
    ),
    (
        "ToolErrorMiddleware",
        {"aon_error": "x"},
        "ToolErrorMiddleware",
        "aon_error",
        "ToolErrorMiddleware: aon_error must be an async function (exception, request) -> str | None, got 'x'.",
    ),
    (
        "ProviderToolSearchMiddleware",
        {"on_unsupported": "x"},
        "ProviderToolSearchMiddleware",
        "on_unsupported",
        "ProviderToolSearchMiddleware: on_unsupported must be 'error' or 'send_all'; got 'x'.",
    ),
    (
        "LLMToolEmulator",
        {"tools": "x"},
        "LLMToolEmulator",
        "tools",
        "LLMToolEmulator: tools must be None (emulate every tool) or a list of tool names and/or BaseTool instances; "
        "got 'x'. Wrap a single tool in a list: tools=['x'].",
    ),
    (
        "ModelRouterMiddleware",
        {"min_confidence": 1.5},
        "ModelRouterMiddleware",
        "min_confidence",
        "ModelRouterMiddleware: min_confidence must be a number from 0 to 1, or None; got 1.5.",
    ),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
@pytest.mark.parametrize(
    ("name", "broken", "middleware", "hook", "message"), BROKEN, ids=[f"{b[0]}-{b[3]}" for b in BROKEN]
)
def test_declared_rules_raise_the_constructors_errors_word_for_word(
    name: str, broken: dict[str, Any], middleware: str, hook: str, message: str
) -> None:
    cls = getattr(bundled, name)
    with pytest.raises(MiddlewareConfigError) as err:
        cls(**{**_kwargs(cls), **broken})
    assert (str(err.value), err.value.middleware, err.value.hook) == (message, middleware, hook)


# -- the layer -------------------------------------------------------------------------------------------------------
def test_shared_rules_word_their_expectations_once() -> None:
    assert one_of("a").expected == "'a'"
    assert one_of("a", "b").expected == "'a' or 'b'"
    assert one_of("a", "b", "c").expected == "'a', 'b' or 'c'"
    either = (INT_AT_LEAST_1 | CALLABLE).or_none()
    assert either.expected == "an int >= 1 or a function or None"
    assert [either.accepts(v) for v in (None, 3, len, 0, True, "x")] == [True, True, True, False, False, False]


def test_a_rule_names_the_middleware_and_the_parameter() -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        INT_AT_LEAST_1.check("Mine", "limit", 0)
    assert (str(err.value), err.value.middleware, err.value.hook) == (
        "Mine: limit must be an int >= 1, got 0.",
        "Mine",
        "limit",
    )
    with pytest.raises(MiddlewareConfigError, match=r"^limit must be >= 1 \(Mine\), got True$"):
        INT_AT_LEAST_1.saying(">= 1").check(
            "Mine", "limit", True, "{param} must be {expected} ({owner}), got {value!r}"
        )


def test_rules_are_checked_in_declared_order_then_relations() -> None:
    seen: list[str] = []

    def note(param: str) -> Any:
        return rule(lambda v: seen.append(param) or v > 0, "positive")

    def both(owner: str, args: Mapping[str, Any]) -> None:
        seen.append("relation")
        if args["a"] == args["b"]:
            raise config_error(owner, "b", f"{owner}: b must differ from a.")

    config = Config(b=note("b"), a=note("a"), relations=(both,))
    config.validate("Mine", {"a": 1, "b": 2})
    assert seen == ["b", "a", "relation"]
    with pytest.raises(MiddlewareConfigError, match=r"^Mine: b must differ from a\.$"):
        config.validate("Mine", {"a": 1, "b": 1})
    with pytest.raises(MiddlewareConfigError, match=r"^Mine: b must be positive, got 0\.$"):
        config.validate("Mine", {"a": 0, "b": 0})  # the first broken rule, in declared order


CHECKS: list[str] = []


def _counted(value: object) -> bool:
    CHECKS.append("limit")
    return isinstance(value, int) and value >= 1


class Counted(FrozenConfig, AgentMiddleware):
    """A middleware declaring its configuration, whose rule counts how often it runs."""

    __config__ = Config(limit=rule(_counted, "an int >= 1"), label=one_of("a", "b"))

    def __init__(self, limit: int = 2, *, label: str = "a") -> None:
        self.limit = limit
        self.label = label

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


def test_validation_runs_once_per_instance_never_per_build(run: Runner) -> None:
    CHECKS.clear()
    mw = Counted(3)
    assert CHECKS == ["limit"]
    for _ in range(3):
        agent = create_agent(ScriptedChatModel(["hi"]), middleware=[mw])
        assert run(agent, {"messages": [HumanMessage("x")]})["messages"][-1].content == "hi"
    assert CHECKS == ["limit"]


def test_defaults_are_checked_and_setting_before_adoption_goes_through_the_rules() -> None:
    mw = Counted()
    with pytest.raises(MiddlewareConfigError, match=r"^Counted: label must be 'a' or 'b', got 'c'\.$"):
        mw.label = "c"
    assert mw.label == "a"
    mw.label = "b"
    assert (mw.label, mw.replace(limit=5).label, mw.replace(limit=5).limit) == ("b", "b", 5)
    with pytest.raises(MiddlewareConfigError, match=r"^Counted: limit must be an int >= 1, got 0\.$"):
        mw.replace(limit=0)
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])
    with pytest.raises(FrozenMiddlewareError):
        mw.limit = 4


def test_a_bundled_middleware_stays_frozen_and_revalidates_its_declared_rules() -> None:
    mw = bundled.LoopGuardMiddleware()
    with pytest.raises(MiddlewareConfigError, match=r"^LoopGuardMiddleware: max_identical_calls must be an int >= 1"):
        mw.max_identical_calls = 0
    mw.max_identical_calls = 5
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])
    with pytest.raises(FrozenMiddlewareError):
        mw.max_identical_calls = 6
    assert mw.replace(max_identical_calls=7).max_identical_calls == 7


def test_a_rule_for_a_parameter_the_constructor_lacks_fails_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match=r"Typo.__config__ declares rules for \['limt'\]"):

        class Typo(FrozenConfig, AgentMiddleware):
            __config__ = Config(limt=INT_AT_LEAST_1)

            def __init__(self, limit: int = 1) -> None:
                self.limit = limit


def test_rules_declared_on_a_class_without_its_own_constructor_fail_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match=r"^Sub.__config__ declares rules for parameters, but Sub has no __init__"):

        class Sub(Counted):
            __config__ = Config(limit=INT_AT_LEAST_1)


# -- sizes -----------------------------------------------------------------------------------------------------------
def test_no_bundled_constructor_is_over_40_lines() -> None:
    """Constructors assign and derive; what each parameter must be is declared (``__config__``)."""
    package = Path(bundled.__file__).parent
    long = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        size = (item.end_lineno or item.lineno) - item.lineno + 1
                        if size > 40:
                            long.append(f"{path.name}:{node.name}.__init__ ({size} lines)")
    assert long == []
