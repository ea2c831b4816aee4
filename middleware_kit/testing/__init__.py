"""The public testing kit: a scripted chat model, a trace recorder, and helpers to run hooks without a graph.

Our own tests, recipes and docs use it; so can yours::

    from middleware_kit.testing import ScriptedChatModel, TraceRecorder, run_hook, run_model_chain
"""

from middleware_kit.testing.harness import (
    arun_hook,
    arun_model_chain,
    arun_tool_chain,
    make_request,
    make_runtime,
    run_hook,
    run_model_chain,
    run_tool_chain,
)
from middleware_kit.testing.model import ScriptedCall, ScriptedChatModel, ScriptExhaustedError, tool_call
from middleware_kit.testing.recorder import TraceRecorder

__all__ = [
    "ScriptExhaustedError",
    "ScriptedCall",
    "ScriptedChatModel",
    "TraceRecorder",
    "arun_hook",
    "arun_model_chain",
    "arun_tool_chain",
    "make_request",
    "make_runtime",
    "run_hook",
    "run_model_chain",
    "run_tool_chain",
    "tool_call",
]
