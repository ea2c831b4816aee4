"""How users annotate middleware: must type-check under mypy --strict (checked by tests/test_typing.py)."""

from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, AgentState, ModelRequest


@dataclass
class Ctx:
    user: str

class Mine(AgentMiddleware):  # unparameterized: annotate the runtime as you like
    def before_model(self, state: Any, runtime: Runtime[Ctx]) -> dict[str, Any] | None:
        return None

class Typed(AgentMiddleware[AgentState, Ctx]):
    def before_model(self, state: AgentState, runtime: Runtime[Ctx]) -> dict[str, Any] | None:
        user: str = runtime.context.user  # typed through AgentMiddleware[AgentState, Ctx]
        del user
        return None
    def wrap_model_call(self, request: ModelRequest[Ctx], handler: Any) -> Any:
        return handler(request)
