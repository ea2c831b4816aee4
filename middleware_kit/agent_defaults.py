"""The agent's model-call defaults, readable from node hooks: :func:`current_agent`.

A ``before_model`` hook sees state and the runtime, not what the model call will send. Some hooks need it: a
summarizer counts the system prompt and the bound tools' schemas against its token budget, a guard checks which
tools are offered. While an agent runs a node (its hooks, and in the ``model`` node the model call with its wrap
layers), :func:`current_agent` returns that agent's :class:`AgentDefaults`: its model, system message, tools
(the agent's plus every middleware's), structured-output format and model settings, as ``create_agent`` built them.
They are the defaults: a ``wrap_model_call`` layer may still change the request of one call.

The value is frozen and built once per agent. It lives in a ``ContextVar`` that the engine sets for the duration of
one node run and resets afterwards, so it is per run: two agents sharing one middleware instance, run in parallel
threads or tasks, each see their own, and an agent running inside another agent's node (a subgraph, an agent called
by a hook) sees its own defaults and leaves the outer agent's in place when it returns. Outside a node run (a hook
called directly, a tool) it is ``None``; :func:`agent_scope` sets it by hand, e.g. around
:func:`middleware_kit.testing.run_hook` in a test.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.tools import BaseTool

from middleware_kit.types import ModelRequest

__all__ = ["AgentDefaults", "agent_scope", "current_agent"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AgentDefaults:
    """What the agent's model call starts from before any ``wrap_model_call`` layer changes it (read-only)."""

    model: BaseChatModel | None = None
    """The agent's chat model."""
    system_message: SystemMessage | None = None
    """The agent's system message (``create_agent(system_prompt=...)``), sent before the messages."""
    tools: tuple[BaseTool | dict[str, Any], ...] = ()
    """The tools bound to the model: the agent's tools, every middleware's ``tools``, then provider tools."""
    response_format: Any = None
    """The structured-output strategy, if any (its tools are bound too, see ``create_agent``)."""
    model_settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Extra keyword arguments bound on the model (read-only; empty unless a layer adds some per call)."""

    def __post_init__(self) -> None:
        if type(self.tools) is not tuple:
            object.__setattr__(self, "tools", tuple(self.tools))
        if not isinstance(self.model_settings, MappingProxyType):
            object.__setattr__(self, "model_settings", MappingProxyType(dict(self.model_settings)))

    @property
    def system_prompt(self) -> str | None:
        """The text of ``system_message`` (``None`` without one)."""
        return None if self.system_message is None else self.system_message.text

    def request(
        self,
        messages: Sequence[AnyMessage],
        *,
        state: Any = None,
        runtime: Any = None,
        model: BaseChatModel | None = None,
    ) -> ModelRequest[Any]:
        """The :class:`~middleware_kit.types.ModelRequest` the model call would start from with ``messages``
        (``model`` stands in when the defaults have none, e.g. outside an agent)."""
        chosen = self.model if self.model is not None else model
        if chosen is None:
            raise ValueError("AgentDefaults.request: no model (the defaults have none; pass model=...).")
        return ModelRequest(
            model=chosen,
            messages=messages,
            system_message=self.system_message,
            tools=self.tools,
            response_format=self.response_format,
            model_settings=self.model_settings,
            state=state,
            runtime=runtime,
        )


_CURRENT: ContextVar[AgentDefaults | None] = ContextVar("middleware_kit.agent_defaults", default=None)


def current_agent() -> AgentDefaults | None:
    """The defaults of the agent whose node is running in this thread or task; ``None`` outside a node run."""
    return _CURRENT.get()


def enter(defaults: AgentDefaults | None) -> Token[AgentDefaults | None]:
    """Engine: make ``defaults`` current for one node run (pair with :func:`leave` in a ``finally``)."""
    return _CURRENT.set(defaults)


def leave(token: Token[AgentDefaults | None]) -> None:
    """Engine: restore what was current before the matching :func:`enter`."""
    _CURRENT.reset(token)


@contextmanager
def agent_scope(defaults: AgentDefaults | None) -> Iterator[AgentDefaults | None]:
    """Make ``defaults`` current inside the ``with`` block.

    As the engine does around a node run::

        with agent_scope(AgentDefaults(system_message=SystemMessage("Be brief."), tools=(search,))):
            update = run_hook(SummarizationMiddleware(model), "before_model", state)
    """
    token = _CURRENT.set(defaults)
    try:
        yield defaults
    finally:
        _CURRENT.reset(token)
