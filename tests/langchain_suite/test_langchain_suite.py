"""LangChain 1.5.2's agent and middleware unit tests, unchanged, on middleware_kit (see ``suite.py``).

The files run in six subprocesses, one pytest item each (xdist spreads them). Each fails if a test not listed in
``deviations.toml`` fails, if a listed test now passes (the list must stay true), or if a file ran another number of
tests than ``[counts]`` records. ``test_pass_rate`` holds the rate of the tests
that are not private or snapshot tests at 97% or more.
"""

from __future__ import annotations

import pytest

from tests.langchain_suite import suite

FILES = [
    "middleware/core/test_composition.py",
    "middleware/core/test_decorators.py",
    "middleware/core/test_diagram.py",
    "middleware/core/test_dynamic_tools.py",
    "middleware/core/test_framework.py",
    "middleware/core/test_internal_call_transformer.py",
    "middleware/core/test_overrides.py",
    "middleware/core/test_sync_async_wrappers.py",
    "middleware/core/test_tools.py",
    "middleware/core/test_tracing.py",
    "middleware/core/test_transformers.py",
    "middleware/core/test_wrap_model_call.py",
    "middleware/core/test_wrap_model_call_state_update.py",
    "middleware/core/test_wrap_tool_call.py",
    "middleware/implementations/test_auto_mode.py",
    "middleware/implementations/test_context_editing.py",
    "middleware/implementations/test_file_search.py",
    "middleware/implementations/test_human_in_the_loop.py",
    "middleware/implementations/test_model_call_limit.py",
    "middleware/implementations/test_model_fallback.py",
    "middleware/implementations/test_model_refusal.py",
    "middleware/implementations/test_model_retry.py",
    "middleware/implementations/test_model_router.py",
    "middleware/implementations/test_pii.py",
    "middleware/implementations/test_provider_tool_search.py",
    "middleware/implementations/test_shell_execution_policies.py",
    "middleware/implementations/test_shell_tool.py",
    "middleware/implementations/test_structured_output_retry.py",
    "middleware/implementations/test_summarization.py",
    "middleware/implementations/test_todo.py",
    "middleware/implementations/test_tool_call_limit.py",
    "middleware/implementations/test_tool_emulator.py",
    "middleware/implementations/test_tool_error.py",
    "middleware/implementations/test_tool_retry.py",
    "middleware/implementations/test_tool_selection.py",
    "middleware_typing/test_middleware_backwards_compat.py",
    "middleware_typing/test_middleware_type_errors.py",
    "middleware_typing/test_middleware_typing.py",
    "test_agent_name.py",
    "test_agent_streaming.py",
    "test_create_agent_tool_validation.py",
    "test_fetch_last_ai_and_tool_messages.py",
    "test_injected_runtime_create_agent.py",
    "test_invalid_tool_calls.py",
    "test_kwargs_tool_runtime_injection.py",
    "test_react_agent.py",
    "test_response_format.py",
    "test_response_format_integration.py",
    "test_responses.py",
    "test_responses_spec.py",
    "test_return_direct_graph.py",
    "test_return_direct_spec.py",
    "test_state_schema.py",
    "test_subagent_streaming.py",
    "test_subagent_transformer.py",
    "test_system_message.py",
]


def test_the_file_list_is_the_suite() -> None:
    assert suite.test_files(suite.suite_root()) == FILES


def test_every_deviation_has_a_category_and_a_reason() -> None:
    for node, entry in suite.deviations().items():
        assert node.split("::")[0] in FILES, node
        assert entry.get("category") in suite.CATEGORIES, node
        assert entry.get("why"), node
        if entry["category"] == "difference":
            assert entry.get("doc", "").startswith("docs/migration.md#"), node


SHARDS = 6
"""The files run in this many subprocesses (one pytest item each, spread by xdist): fewer interpreter starts."""


@pytest.mark.parametrize("shard", range(SHARDS))
def test_langchain_files(shard: int) -> None:
    files = FILES[shard::SHARDS]
    known = {node: e for node, e in suite.deviations().items() if node.split("::")[0] in files}
    result = suite.run_files(files)
    unexpected = {node: text for node, text in result.failed.items() if node not in known}
    stale = sorted(node for node in known if node in result.passed)
    missing = sorted(node for node in known if node not in result.failed and node not in result.passed)
    report = [f"{node}\n{text[:1500]}" for node, text in unexpected.items()]
    assert not unexpected, f"{len(unexpected)} LangChain test(s) fail and are not in deviations.toml:\n" + "\n\n".join(
        report
    )
    assert not stale, f"these tests pass now: remove them from deviations.toml: {stale}"
    assert not missing, f"these deviations.toml entries name tests that no longer exist: {missing}"
    counts = suite.counts()
    for relpath in files:
        ran = sum(1 for node in [*result.passed, *result.failed] if node.split("::")[0] == relpath)
        expected = counts.get(relpath)
        assert ran == expected, f"{relpath} ran {ran} tests; deviations.toml [counts] says {expected}"


def test_pass_rate() -> None:
    """Counts come from ``deviations.toml`` and ``counts`` in it (the number of tests per file, checked by
    :func:`test_langchain_file` through ``missing``/``stale``)."""
    counted = suite.counts()
    entries = suite.deviations()
    excluded = sum(1 for e in entries.values() if e["category"] in ("private", "snapshot"))
    failing = sum(1 for e in entries.values() if e["category"] == "difference")
    total = sum(counted.values()) - excluded
    rate = (total - failing) / total
    floor = suite.MIN_PASS_RATE
    assert rate >= floor, f"{rate:.1%} of LangChain's non-private tests pass (floor {floor:.0%})"
