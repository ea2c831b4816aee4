"""The model call: binding tools, settings and the structured-output strategy, and the base handler of the chain.

One frozen :class:`ModelCall` serves the agent (built by :func:`middleware_kit.graph.build_graph`) and
:mod:`middleware_kit.testing` (``run_model_chain``), so both send the same request to the model: the regular tools,
then the structured tools, ``tool_choice`` (forced to ``"any"`` with a structured strategy unless chosen), and the
request's ``model_settings``. The base handler is one flow (:mod:`middleware_kit.drive`) for invoke and ainvoke.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from middleware_kit._compat import update_pairs
from middleware_kit.chain import _note_bubble
from middleware_kit.drive import Flow, Step, run_async, run_sync
from middleware_kit.errors import ConflictingUpdateError, MiddlewareConfigError, UnknownStateKeyError, UnknownToolError
from middleware_kit.events import emit_discarded, run_lifecycle
from middleware_kit.pairing import PairingFix, close_pending
from middleware_kit.phases import StateSemantics
from middleware_kit.structured_output import ToolStrategy, parse_model_output, to_strategy
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = ["ModelCall", "bind_model", "model_writes"]


@dataclass(frozen=True, slots=True)
class ModelCall:
    """How the agent calls its model. ``executable`` None (the testing kit) skips the unknown-tool check."""

    model: BaseChatModel | None = None
    default_tools: tuple[BaseTool | dict[str, Any], ...] = ()
    response_format: ToolStrategy[Any] | None = None
    system_message: SystemMessage | None = None
    executable: frozenset[str] | None = None
    """Names of the tools the agent can run (None: don't check)."""
    tools_wrapped: bool = False
    """A ``wrap_tool_call`` exists: it may execute tools the agent does not know."""
    nostream: bool = False
    """Tag the call ``nostream`` (message guards: raw tokens must not reach the messages stream)."""
    bound_default: Any = field(default=None, compare=False)
    guards: Any = field(default=None, compare=False)
    """The agent's message guards (:class:`middleware_kit.guards.Guards`), applied to the model's message as soon
    as the model returns, before any wrap layer sees it (a wrapper saving the answer elsewhere than ``messages``
    then never holds a guarded value)."""

    @classmethod
    def build(
        cls,
        model: BaseChatModel,
        default_tools: tuple[BaseTool | dict[str, Any], ...],
        response_format: ToolStrategy[Any] | None,
        system_message: SystemMessage | None,
        *,
        executable: frozenset[str] | None,
        tools_wrapped: bool,
        nostream: bool,
        guards: Any = None,
    ) -> ModelCall:
        if response_format is not None:
            taken = sorted(response_format.tool_names & {getattr(t, "name", None) for t in default_tools})
            if taken:
                raise MiddlewareConfigError.structured_tool_name_taken(taken)
        bound = bind_model(model, default_tools, response_format, None, {}, nostream=nostream)
        return cls(
            model,
            default_tools,
            response_format,
            system_message,
            executable,
            tools_wrapped,
            nostream,
            bound,
            guards if guards else None,
        )

    def request(self, messages: Sequence[AnyMessage], state: Any, runtime: Any) -> ModelRequest[Any]:
        """The request of one model call, before any middleware changes it."""
        assert self.model is not None
        return ModelRequest(
            model=self.model,
            messages=messages,
            system_message=self.system_message,
            tools=self.default_tools,
            response_format=self.response_format,
            state=state,
            runtime=runtime,
        )

    def bound(self, request: ModelRequest[Any]) -> tuple[Any, ToolStrategy[Any] | None]:
        """The model to call (tools bound) and the structured-output strategy of this call, if any."""
        if (
            self.bound_default is not None
            and request.model is self.model
            and request.tools is self.default_tools
            and request.response_format is self.response_format
            and request.tool_choice is None
            and not request.model_settings
        ):
            return self.bound_default, self.response_format
        if self.executable is not None and request.tools is not self.default_tools and not self.tools_wrapped:
            unknown = [t.name for t in request.tools if isinstance(t, BaseTool) and t.name not in self.executable]
            if unknown:
                raise UnknownToolError.for_tools(unknown)
        strategy = to_strategy(request.response_format)
        chat = bind_model(
            request.model, request.tools, strategy, request.tool_choice, request.model_settings, nostream=self.nostream
        )
        return chat, strategy

    def flow(self, request: ModelRequest[Any], traced: bool = False) -> Flow[ModelResponse[Any]]:
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
                message = yield Step(chat.invoke, chat.ainvoke, messages, config)
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
        if self.guards is not None:
            guarded = self.guards.messages([message], request.runtime)
            message = guarded[0] if len(guarded) == 1 else message
        if strategy is None:
            return ModelResponse(result=[message])
        return parse_model_output(message, strategy)

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
    strategy: ToolStrategy[Any] | None,
    tool_choice: Any,
    settings: Any,
    *,
    nostream: bool = False,
) -> Any:
    """``chat`` with the regular tools and the structured tools bound (never ``bind_tools([])``).

    With a strategy and no explicit ``tool_choice``, tool use is forced (``"any"``), as in LangChain v1: the model
    answers by calling the structured tool rather than in free text.
    """
    all_tools = [*tools, *strategy.tools] if strategy is not None else list(tools)
    bound: Any = chat
    if all_tools:
        kwargs: dict[str, Any] = dict(settings)
        if tool_choice is None and strategy is not None:
            tool_choice = "any"
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        bound = chat.bind_tools(all_tools, **kwargs)
    elif settings:
        bound = chat.bind(**settings)
    return bound.with_config(tags=[TAG_NOSTREAM]) if nostream else bound


def prepared(call: ModelCall, view: Any, runtime: Any) -> tuple[ModelRequest[Any], PairingFix | None]:
    """The request for the state ``view``, closing tool calls that will never be answered (and the fix applied)."""
    messages = view["messages"]
    fix = close_pending(messages, "the run moved on before it ran (it was interrupted or skipped).")
    return call.request(fix.history if fix is not None else messages, view, runtime), fix


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
