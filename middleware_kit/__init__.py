"""middleware_kit: a middleware-composition framework for LLM agents on langchain-core and LangGraph.

The first middleware in the list is the outermost layer of the onion. See ``docs/concepts/onion.md``.
"""

from langgraph.runtime import Runtime

from middleware_kit.agent import create_agent
from middleware_kit.decorators import (
    after_agent,
    after_model,
    after_tool,
    before_agent,
    before_model,
    before_tool,
    dynamic_prompt,
    hook_config,
    modify_model_request,
    wrap_model_call,
    wrap_tool_call,
)
from middleware_kit.errors import (
    AgentArgumentError,
    ConflictingUpdateError,
    HookReturnError,
    InvalidJumpError,
    MiddlewareConfigError,
    MiddlewareError,
    StateSchemaConflictError,
    UnknownStateKeyError,
    UnknownToolError,
)
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.phases import InterruptInFusedNodeWarning
from middleware_kit.plan import MiddlewarePlan, PlannedHook
from middleware_kit.types import (
    AgentState,
    ContextT,
    ExtendedModelResponse,
    InputAgentState,
    JumpTo,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
    OmitFromOutput,
    OmitFromSchema,
    OutputAgentState,
    PrivateStateAttr,
    ResponseT,
    ToolCallRequest,
)

__version__ = "0.1.0"

__all__ = [
    "AgentArgumentError",
    "AgentMiddleware",
    "AgentState",
    "ConflictingUpdateError",
    "ContextT",
    "ExtendedModelResponse",
    "HookReturnError",
    "InputAgentState",
    "InterruptInFusedNodeWarning",
    "InvalidJumpError",
    "JumpTo",
    "MiddlewareConfigError",
    "MiddlewareError",
    "MiddlewarePlan",
    "ModelCallResult",
    "ModelRequest",
    "ModelResponse",
    "OmitFromInput",
    "OmitFromOutput",
    "OmitFromSchema",
    "OutputAgentState",
    "PlannedHook",
    "PrivateStateAttr",
    "ResponseT",
    "Runtime",
    "StateSchemaConflictError",
    "ToolCallRequest",
    "UnknownStateKeyError",
    "UnknownToolError",
    "__version__",
    "after_agent",
    "after_model",
    "after_tool",
    "before_agent",
    "before_model",
    "before_tool",
    "create_agent",
    "dynamic_prompt",
    "hook_config",
    "modify_model_request",
    "wrap_model_call",
    "wrap_tool_call",
]
