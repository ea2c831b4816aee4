"""The model call: binding tools, settings and the structured-output strategy, and the base handler of the chain.

One frozen :class:`ModelCall` serves the agent (built by :func:`middleware_kit._engine.graph.build_graph`) and
:mod:`middleware_kit.testing` (``run_model_chain``), so both send the same request to the model: the regular tools,
then the structured tools, ``tool_choice`` (forced to ``"any"`` with a structured strategy unless chosen), and the
request's ``model_settings``. The base handler is one flow (:mod:`middleware_kit._engine.drive`) for invoke and ainvoke.
"""

from __future__ import annotations

import operator
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from middleware_kit._engine.chain import _note_bubble
from middleware_kit._engine.compat import update_pairs
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.holdback import Holdback
from middleware_kit._engine.holdback import current as current_holdback
from middleware_kit._engine.pairing import PairingFix, close_pending
from middleware_kit._engine.state import StateSemantics
from middleware_kit.errors import ConflictingUpdateError, MiddlewareConfigError, UnknownStateKeyError, UnknownToolError
from middleware_kit.events import emit_discarded, run_lifecycle
from middleware_kit.structured_output import (
    ProviderStrategy,
    ToolStrategy,
    effective_strategy,
    parse_model_output,
    setup_strategy,
    supports_provider_strategy,
)
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = ["ModelCall", "bind_model", "model_writes"]


@dataclass(frozen=True, slots=True)
class ModelCall:
    """How the agent calls its model. ``executable`` None (the testing kit) skips the unknown-tool check."""

    model: BaseChatModel | None = None
    default_tools: tuple[BaseTool | dict[str, Any], ...] = ()
    response_format: Any = None
    """The declared format: a ``ToolStrategy``, ``ProviderStrategy``, ``AutoStrategy`` or None."""
    system_message: SystemMessage | None = None
    executable: frozenset[str] | None = None
    """Names of the tools the agent can run (None: don't check)."""
    tools_wrapped: bool = False
    """A ``wrap_tool_call`` exists: it may execute tools the agent does not know."""
    nostream: bool = False
    """Tag the call ``nostream`` (message guards: raw tokens must not reach the messages stream)."""
    bound_default: list[Any] | None = field(default=None, compare=False)
    """A one-slot cache of the model bound for an unchanged request, filled by the first call (None: never cached:
    an ``AutoStrategy`` decides per call)."""
    guards: Any = field(default=None, compare=False)
    """The agent's message guards (:class:`middleware_kit._engine.guards.Guards`), applied to the model's message as
    soon
    as the model returns, before any wrap layer sees it (a wrapper saving the answer elsewhere than ``messages``
    then never holds a guarded value)."""
    agent_name: str | None = None
    """``create_agent(name=...)``: set as ``name`` on every ``AIMessage`` the model returns (as LangChain 1.5 does)."""
    holdback: Holdback | None = None
    """The agent's stream hold-back (:mod:`middleware_kit._engine.holdback`): a traced call's streaming handlers then
    get only what its gate lets through."""

    @classmethod
    def build(
        cls,
        model: BaseChatModel,
        default_tools: tuple[BaseTool | dict[str, Any], ...],
        response_format: Any,
        system_message: SystemMessage | None,
        *,
        executable: frozenset[str] | None,
        tools_wrapped: bool,
        nostream: bool,
        guards: Any = None,
        agent_name: str | None = None,
        holdback: Holdback | None = None,
    ) -> ModelCall:
        setup = setup_strategy(response_format)
        if setup is not None:
            taken = sorted(setup.tool_names & {getattr(t, "name", None) for t in default_tools})
            if taken:
                raise MiddlewareConfigError.structured_tool_name_taken(taken)
        cacheable = response_format is None or isinstance(response_format, (ToolStrategy, ProviderStrategy))
        return cls(
            model,
            default_tools,
            response_format,
            system_message,
            executable,
            tools_wrapped,
            nostream,
            [None] if cacheable else None,
            guards if guards else None,
            agent_name,
            holdback,
        )

    def request(self, messages: Sequence[AnyMessage], state: Any, runtime: Any) -> ModelRequest[Any]:
        """The request of one model call, before any middleware changes it."""
        assert self.model is not None
        return ModelRequest(
            model=self.model,
            messages=messages,
            system_message=self.system_message,
            tools=list(self.default_tools),
            response_format=self.response_format,
            state=state,
            runtime=runtime,
        )

    def bound(self, request: ModelRequest[Any]) -> tuple[Any, ToolStrategy[Any] | ProviderStrategy[Any] | None]:
        """The model to call (tools bound) and the structured-output strategy of this call, if any."""
        cache = self.bound_default
        if (
            cache is not None
            and request.model is self.model
            and _same(request.tools, self.default_tools)
            and request.response_format is self.response_format
            and request.tool_choice is None
            and not request.model_settings
        ):
            if cache[0] is None:
                cache[0] = bind_model(request.model, request.tools, self.response_format, None, {},
                                      nostream=self.nostream)
            return cache[0], self.response_format
        if self.executable is not None and not self.tools_wrapped and not _same(request.tools, self.default_tools):
            unknown = [t.name for t in request.tools if isinstance(t, BaseTool) and t.name not in self.executable]
            if unknown:
                raise UnknownToolError.for_tools(unknown)
        strategy = effective_strategy(request.response_format, request.model, request.tools, _provider_supported)
        chat = bind_model(
            request.model, request.tools, strategy, request.tool_choice, request.model_settings, nostream=self.nostream
        )
        return chat, strategy

    def flow(self, request: ModelRequest[Any], traced: bool = False) -> Steps[ModelResponse[Any]]:
        """The base handler: call the model, parse a structured answer.

        ``traced`` (runs with callback handlers, whose tokens may be streamed): the call gets its own run id, so its
        chunks carry the message id ``lc_run--{run id}``; when the call fails, a ``discarded`` event names that id
        (a retry or fallback may follow, and a UI should drop those chunks).
        """
        __tracebackhide__ = True
        chat, strategy = self.bound(request)
        messages = list(request.messages)
        if request.system_message is not None:
            messages.insert(0, request.system_message)
        life = run_lifecycle(request.runtime, var_child_runnable_config.get())
        started = time.perf_counter() if life is not None else 0.0
        try:
            if traced:
                run_id = uuid.uuid4()
                config = {"run_id": run_id}
                message = yield Step(self._invoke, self._ainvoke, chat, messages, config)
            else:
                message = yield Step(chat.invoke, chat.ainvoke, messages)
        except GraphBubbleUp as exc:
            _note_bubble(exc)
            raise
        except BaseException as exc:
            if life is not None:
                life.count_model_call(time.perf_counter() - started)
            if traced and not self.nostream:
                emit_discarded(request.runtime, message_id=f"lc_run--{run_id}", model_run_id=str(run_id), error=exc)
            raise
        if life is not None:
            life.count_model_call(time.perf_counter() - started)
        if self.agent_name and isinstance(message, AIMessage) and message.name != self.agent_name:
            message = message.model_copy(update={"name": self.agent_name})
        if self.guards is not None:
            guarded = self.guards.messages([message], request.runtime)
            message = guarded[0] if len(guarded) == 1 else message
        if strategy is None:
            return ModelResponse(result=[message])
        return parse_model_output(message, strategy)

    def _invoke(self, chat: Any, messages: list[Any], config: dict[str, Any]) -> Any:
        holdback = current_holdback()  # the node's: this agent's own, or its callers' when it runs inside one
        if holdback is None:
            return chat.invoke(messages, config)
        with holdback.calling(config["run_id"], is_async=False):
            return chat.invoke(messages, config)

    async def _ainvoke(self, chat: Any, messages: list[Any], config: dict[str, Any]) -> Any:
        holdback = current_holdback()
        if holdback is None:
            return await chat.ainvoke(messages, config)
        with holdback.calling(config["run_id"], is_async=True):
            return await chat.ainvoke(messages, config)

    def handlers(self, traced: bool = False) -> tuple[Any, Any]:
        """The base handlers of the model chain, for invoke and ainvoke (``traced``: see :meth:`flow`)."""

        def base(request: ModelRequest[Any]) -> ModelResponse[Any]:
            __tracebackhide__ = True
            return run_sync(self.flow(request, traced))

        async def abase(request: ModelRequest[Any]) -> ModelResponse[Any]:
            __tracebackhide__ = True
            return await run_async(self.flow(request, traced))

        return base, abase


def bind_model(
    chat: BaseChatModel,
    tools: Sequence[BaseTool | dict[str, Any]],
    strategy: ToolStrategy[Any] | ProviderStrategy[Any] | None,
    tool_choice: Any,
    settings: Any,
    *,
    nostream: bool = False,
) -> Any:
    """``chat`` with the regular tools and the structured tools bound (never ``bind_tools([])``).

    With a tool strategy and no explicit ``tool_choice``, tool use is forced (``"any"``), as in LangChain v1: the
    model answers by calling the structured tool rather than in free text. A provider strategy binds its
    ``response_format`` (and, with tools, ``bind_tools(strict=True)`` for OpenAI-compatible chat-completions models,
    as LangChain does; without tools the schema's own ``strict`` says it: a ``strict`` keyword bound on the model
    would reach the OpenAI client, which rejects it).
    """
    kwargs: dict[str, Any] = {}
    all_tools: list[Any] = list(tools)
    if isinstance(strategy, ProviderStrategy):
        kwargs.update(strategy.to_model_kwargs())
        if tools and _openai_chat_completions(chat):
            kwargs["strict"] = True
    elif strategy is not None:
        all_tools.extend(strategy.tools)
        if tool_choice is None:
            tool_choice = "any"
    kwargs.update(settings)
    bound: Any = chat
    if all_tools:
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        bound = chat.bind_tools(all_tools, **kwargs)
    elif kwargs:
        bound = chat.bind(**kwargs)
    return bound.with_config(tags=[TAG_NOSTREAM]) if nostream else bound


def _openai_chat_completions(chat: BaseChatModel) -> bool:
    """An OpenAI-compatible model (``langchain_openai``'s ``BaseChatOpenAI``) on the chat completions API."""
    module = sys.modules.get("langchain_openai.chat_models.base")
    base = getattr(module, "BaseChatOpenAI", None)
    return base is not None and isinstance(chat, base) and not getattr(chat, "use_responses_api", False)


def _provider_supported(model: Any, *, tools: Sequence[Any]) -> bool:
    """:func:`~middleware_kit.structured_output.supports_provider_strategy`, looked up at call time where LangChain's
    users patch it (``langchain.agents.factory._supports_provider_strategy``, served by ``middleware_kit.agent``)."""
    agent_module = sys.modules.get("middleware_kit.agent")
    check = getattr(agent_module, "_supports_provider_strategy", supports_provider_strategy)
    return bool(check(model, tools=list(tools)))


def prepared(call: ModelCall, view: Any, runtime: Any) -> tuple[ModelRequest[Any], PairingFix | None]:
    """The request for the state ``view``, closing tool calls that will never be answered (and the fix applied).
    Its ``messages`` is a list of its own: an in-place edit by a wrapper never reaches the state's list."""
    messages = view["messages"]
    fix = close_pending(messages, "the run moved on before it ran (it was interrupted or skipped).", malformed=True)
    return call.request(list(fix.history if fix is not None else messages), view, runtime), fix


def _same(tools: Sequence[Any], defaults: Sequence[Any]) -> bool:
    """Whether a request still offers exactly the agent's default tools (the same objects, in order): then the
    model bound once for them is reused."""
    return len(tools) == len(defaults) and all(map(operator.is_, tools, defaults))


def model_writes(
    response: ModelResponse[Any],
    commands: dict[int, Command[Any]],
    fix: PairingFix | None,
    owners: Sequence[str],
    semantics: StateSemantics,
) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """The model's messages (after the answers that close dangling calls, if any), then ExtendedModelResponse
    updates, inner commands first; and, when the model added exactly one message and nothing else, that message
    (routing needs no more, and the node then skips re-applying the writes to its view of state)."""
    new_messages = list(response.result)
    base: dict[str, Any] = {"messages": [*fix.update, *new_messages] if fix is not None else new_messages}
    if response.structured_response is not None:
        base["structured_response"] = response.structured_response
    writes = [base]
    if not commands:
        return writes, new_messages if len(new_messages) == 1 else None
    written = {key for key in base if semantics.is_last_value(key)}
    for depth in sorted(commands, reverse=True):
        owner = owners[depth]
        for key, value in update_pairs(commands[depth]):
            if key not in semantics.keys:
                raise UnknownStateKeyError(owner, "wrap_model_call", [key], semantics.keys)
            if semantics.is_last_value(key):
                if key in written:
                    raise ConflictingUpdateError.written_twice(owner, key)
                written.add(key)
            writes.append({key: value})
    return writes, None
