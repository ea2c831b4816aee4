"""The error tree of middleware_kit.

Every error a user can cause is a :class:`MiddlewareError` subclass that carries the culprit (``.middleware``) and the
hook involved (``.hook``), and whose message ends with how to fix it. The classes own their messages, so tests can
assert them and the engine stays free of string formatting.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from langgraph.errors import InvalidUpdateError

__all__ = [
    "AgentArgumentError",
    "ConflictingUpdateError",
    "ContextError",
    "HookNameError",
    "HookReturnError",
    "HookSignatureError",
    "HookValueError",
    "InvalidJumpError",
    "MiddlewareConfigError",
    "MiddlewareError",
    "ProviderPackageError",
    "StateSchemaConflictError",
    "UnknownStateKeyError",
    "UnknownToolError",
    "UnknownToolWarning",
]


class MiddlewareError(Exception):
    """Base of every error middleware_kit raises because of how a middleware or an agent was written or called.

    Attributes:
        middleware: The name of the middleware at fault (``"create_agent"`` when the agent's own arguments are).
        hook: The hook involved (``"before_model"``, ``"wrap_tool_call"``, ...), or the setting (``"name"``,
            ``"state_schema"``) when the problem is found while the agent is built.
    """

    def __init__(self, message: str, *, middleware: str, hook: str) -> None:
        super().__init__(message)
        self.middleware = middleware
        self.hook = hook

    def __reduce__(self) -> tuple[object, tuple[str], dict[str, object]]:
        # Keep pickling (multiprocessing, LangGraph Server) working despite the keyword-only constructor.
        return (type(self)._rebuild, (str(self),), dict(self.__dict__))

    @classmethod
    def _rebuild(cls, message: str) -> MiddlewareError:
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        return err


class MiddlewareConfigError(MiddlewareError, ValueError):
    """The agent cannot work as configured: found by ``create_agent`` before anything runs wherever possible, else at
    first use (e.g. a human-in-the-loop review in an agent built without a checkpointer)."""


    # -- pipeline ----------------------------------------------------------------------------------------------
    @classmethod
    def not_a_middleware(cls, index: int, item: object, fix: str) -> MiddlewareConfigError:
        return cls(
            f"middleware[{index}] is {item!r}, not an AgentMiddleware instance: {fix}.",
            middleware=getattr(item, "__name__", type(item).__name__),
            hook="middleware",
        )

    @classmethod
    def bad_name(cls, index: int, name: object, reserved: tuple[str, ...]) -> MiddlewareConfigError:
        return cls(
            f"middleware[{index}] has the name {name!r}; a name must be a non-empty string without "
            f"{', '.join(repr(c) for c in reserved)}. Set a valid name with name=... .",
            middleware=str(name),
            hook="name",
        )

    @classmethod
    def duplicate_name(cls, name: str, first: int, index: int) -> MiddlewareConfigError:
        return cls(
            f"Two middlewares are named {name!r} (middleware[{first}] and middleware[{index}]). Names must be "
            f"unique within an agent: pass name='...' to the decorator, or set `name` on one of the instances.",
            middleware=name,
            hook="name",
        )

    @classmethod
    def unknown_jump_target(cls, middleware: str, hook: str, declared: list[str]) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.{hook} declares can_jump_to={declared}; the targets are 'model', 'tools' and 'end'.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def jump_not_allowed(
        cls, middleware: str, hook: str, target: str, allowed: list[str]
    ) -> MiddlewareConfigError:
        if not allowed:
            why = f"{hook} cannot jump: only before_agent, before_model and after_model route the run"
        elif target == "model":
            why = f"jumping to 'model' from before_model would run before_model again forever; allowed here: {allowed}"
        else:
            why = f"allowed here: {allowed}"
        return cls(
            f"{middleware}.{hook} declares can_jump_to={target!r}, but {why}. Remove it from can_jump_to.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def jump_to_tools_without_tools(cls, middleware: str, hook: str) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.{hook} declares can_jump_to='tools', but the agent has no tools to run. Give "
            f"create_agent tools (or a middleware `tools`), or remove 'tools' from can_jump_to.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def may_interrupt_outside_node(cls, middleware: str, hook: str) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.{hook} declares may_interrupt=True, which only node hooks use (they get a node of "
            f"their own). interrupt() works in wrappers too; remove may_interrupt here.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def async_def_sync_name(cls, middleware: str, hook: str) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.{hook} is an 'async def'; an async hook must be named a{hook} "
            f"(or defined with a decorator, which picks the right name).",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def middleware_not_a_list(cls, given: object) -> MiddlewareConfigError:
        return cls(
            f"middleware must be a list of AgentMiddleware instances; got {type(given).__name__}. "
            f"Wrap it in a list: middleware=[...].",
            middleware="create_agent",
            hook="middleware",
        )

    @classmethod
    def tool_not_a_basetool(cls, middleware: str, tool: object) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.tools holds {tool!r}, not a BaseTool. Wrap functions with "
            f"langchain_core.tools.tool(...) before listing them.",
            middleware=middleware,
            hook="tools",
        )

    @classmethod
    def unknown_tool_named(
        cls, middleware: str, option: str, tool: str, suggestion: str, tools: Sequence[str], declare: str
    ) -> MiddlewareConfigError:
        return cls(
            f"{middleware}: {option} names the tool {tool!r}, which this agent does not have: did you mean "
            f"{suggestion!r}? As written, {suggestion!r} would run without this policy. {_agent_tools(tools)} Fix the "
            f"name (the tool's `name`); if {tool!r} is a tool a middleware adds per call (a wrap_model_call extending "
            f"request.tools, run by a wrap_tool_call), declare it: {declare}.",
            middleware=middleware,
            hook=option,
        )

    # -- create_agent, decorators, schemas, testing kit --------------------------------------------------------
    @classmethod
    def context_schema_not_a_class(cls, given: object) -> MiddlewareConfigError:
        return cls(
            f"context_schema must be a class (dataclass, pydantic model or TypedDict); got {given!r}.",
            middleware="create_agent",
            hook="context_schema",
        )

    @classmethod
    def unknown_nodes(cls, option: str, unknown: list[str], nodes: list[str]) -> MiddlewareConfigError:
        return cls(
            f"create_agent({option}={unknown!r}): no such node. The nodes are: {', '.join(nodes)}. "
            f"before_model and after_model hooks run inside the 'model' node (unless they may interrupt): "
            f"use {option}=['model'] to pause around a model call, ['tools'] around tool calls.",
            middleware="create_agent",
            hook=option,
        )

    @classmethod
    def routing_option_on_wrap_hook(cls, hook: str, middleware: str) -> MiddlewareConfigError:
        return cls(
            f"@{hook}(can_jump_to=..., may_interrupt=...) is not supported: only node hooks "
            f"(before_agent, before_model, after_model, after_agent) route the run. Drop the argument, or "
            f"move the routing into a node hook.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def decorated_not_callable(cls, hook: str, given: object, middleware: str) -> MiddlewareConfigError:
        return cls(f"@{hook} must decorate a function; got {type(given).__name__}.", middleware=middleware, hook=hook)

    @classmethod
    def schema_not_a_typeddict(cls, owner: str, schema: object) -> MiddlewareConfigError:
        return cls(
            f"{owner}.state_schema is {schema!r}; it must be a TypedDict class extending AgentState.",
            middleware=owner,
            hook="state_schema",
        )

    @classmethod
    def schema_unresolvable(cls, owner: str, schema: type, exc: Exception) -> MiddlewareConfigError:
        return cls(
            f"{owner}.state_schema {schema.__qualname__} has an annotation that cannot be resolved ({exc}). "
            f"Import every type the schema names at module level (not under TYPE_CHECKING).",
            middleware=owner,
            hook="state_schema",
        )

    @classmethod
    def schema_without_messages(cls, owner: str, schema: type) -> MiddlewareConfigError:
        return cls(
            f"{owner}.state_schema {schema.__qualname__} has no 'messages' key; state schemas must extend "
            f"AgentState (class MyState(AgentState): ...).",
            middleware=owner,
            hook="state_schema",
        )

    @classmethod
    def run_hook_not_a_node_hook(cls, middleware: str, hook: str) -> MiddlewareConfigError:
        return cls(
            f"run_hook runs node hooks (before_agent, before_model, after_model, after_agent); got {hook!r}. Use "
            f"run_model_chain or run_tool_chain for the others.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def flow_signature(cls, middleware: str, hook: str, signature: str) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.{hook} is a generator function with the signature {signature}; a flow hook takes only "
            f"the request: def {hook}(self, request) as a method, def {hook}(request) with @{hook}. It calls the "
            f"next handler with 'response = yield request' (there is no handler argument).",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def flow_with_async_twin(cls, middleware: str, hook: str) -> MiddlewareConfigError:
        return cls(
            f"{middleware}.{hook} is a flow hook (a generator), which runs under invoke and ainvoke alike, and "
            f"{middleware} also defines a{hook}. Remove a{hook}: the flow is the one body for both.",
            middleware=middleware,
            hook=hook,
        )


    @classmethod
    def structured_tool_name_taken(cls, taken: list[str]) -> MiddlewareConfigError:
        return cls(
            f"response_format's structured tool(s) {taken} have the name of a tool of the agent. Rename the "
            f"schema (its class name, or the JSON schema's 'title') or the tool.",
            middleware="create_agent",
            hook="response_format",
        )


class HookReturnError(MiddlewareError, TypeError):
    """A hook returned a value of a type its contract does not allow."""

    @classmethod
    def for_node_hook(cls, middleware: str, hook: str, value: object) -> HookReturnError:
        return cls(
            f"{middleware}.{hook} returned {_describe(value)}; {hook} hooks must return None or a dict of state "
            f"updates. Return a dict such as {{'messages': [...]}} or None to change nothing."
            + _coroutine_hint(value, hook),
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def for_wrap_hook(cls, middleware: str, hook: str, value: object, expected: str) -> HookReturnError:
        hint = ' Did you forget "return handler(request)"?' if value is None else ""
        return cls(
            f"{middleware}.{hook} returned {_describe(value)}; it must return {expected}.{hint}"
            + _coroutine_hint(value, hook),
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def for_dynamic_prompt(cls, middleware: str, value: object) -> HookReturnError:
        return cls(
            f"The @dynamic_prompt function of {middleware} returned {_describe(value)}; it must return the system "
            f"prompt as a str or a SystemMessage (it runs as {middleware}.wrap_model_call)."
            + _coroutine_hint(value, "wrap_model_call"),
            middleware=middleware,
            hook="wrap_model_call",
        )

    @classmethod
    def for_flow_yield(cls, middleware: str, hook: str, value: object, expected: str) -> HookReturnError:
        return cls(
            f"{middleware}.{hook} is a flow hook (a generator) and yielded {_describe(value)}; a flow yields the "
            f"{expected} to call the next handler with (response = yield request) or a Sleep(seconds) to wait. "
            f"Return the result with 'return', not 'yield'.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def for_guard(cls, middleware: str, value: object) -> HookReturnError:
        return cls(
            f"{middleware}.guard_messages returned {_describe(value)}; it must return None (messages unchanged) or "
            f"a list of messages (the guarded messages, e.g. copies made with message.model_copy(update=...)).",
            middleware=middleware,
            hook="guard_messages",
        )

    @classmethod
    def for_request_hook(cls, middleware: str, hook: str, value: object) -> HookReturnError:
        return cls(
            f"{middleware}.{hook} returned {_describe(value)}; it must return a ModelRequest. Build one with "
            f"request.override(...) and return it (return the request unchanged to change nothing)."
            + _coroutine_hint(value, hook),
            middleware=middleware,
            hook=hook,
        )


class InvalidJumpError(MiddlewareError, ValueError):
    """A hook asked to jump somewhere it did not declare, or somewhere that does not exist."""

    @classmethod
    def unknown_target(cls, middleware: str, hook: str, target: object) -> InvalidJumpError:
        return cls(
            f"{middleware}.{hook} returned jump_to={target!r}; the targets are 'model', 'tools' and 'end'.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def undeclared(cls, middleware: str, hook: str, target: str, declared: object) -> InvalidJumpError:
        return cls(
            f"{middleware}.{hook} returned jump_to={target!r} but declared can_jump_to={declared}. "
            f"Declare it: @{hook}(can_jump_to=[{target!r}]) on a decorated hook, or "
            f"@hook_config(can_jump_to=[{target!r}]) on the method.",
            middleware=middleware,
            hook=hook,
        )


class UnknownStateKeyError(MiddlewareError, KeyError):
    """A hook returned a state key that no state schema of the agent declares."""

    def __init__(self, middleware: str, hook: str, keys: Iterable[str], declared: Iterable[str]) -> None:
        bad = sorted(keys)
        known = ", ".join(sorted(k for k in declared if k != "jump_to"))
        super().__init__(
            f"{middleware}.{hook} returned the state key(s) {bad} that no state schema declares (declared: {known}). "
            f"Declare them on a TypedDict extending AgentState and set it as the middleware's state_schema "
            f"(or pass state_schema= to the decorator or to create_agent).",
            middleware=middleware,
            hook=hook,
        )
        self.keys = tuple(bad)

    def __str__(self) -> str:  # KeyError would otherwise print the message with quotes around it
        return str(self.args[0])


class HookNameError(MiddlewareConfigError):
    """A middleware defines a method whose name is close to a hook's (``before_modle``, ``awrap_tool_cal``): the
    engine only calls hooks by their exact names, so its logic would never run. Found by ``create_agent``.

    Attributes:
        method: The method's name (also ``.hook``).
        suggestion: The hook it resembles.
    """

    def __init__(self, message: str, *, middleware: str, method: str, suggestion: str) -> None:
        super().__init__(message, middleware=middleware, hook=method)
        self.method = method
        self.suggestion = suggestion

    @classmethod
    def near_miss(cls, middleware: str, owner: str, method: str, suggestion: str) -> HookNameError:
        return cls(
            f"{middleware}: {owner}.{method} is not a hook, so the agent would never call it; did you mean "
            f"{suggestion!r}? Rename it to {suggestion}, or, if the name is deliberate, list it on the class: "
            f"not_hooks = ({method!r},).",
            middleware=middleware,
            method=method,
            suggestion=suggestion,
        )


class ProviderPackageError(MiddlewareConfigError, ImportError):
    """A model string names a provider whose package is not installed (``"anthropic:..."`` without
    ``langchain-anthropic``). An ``ImportError`` too, as LangChain's ``init_chat_model`` raises: code that catches
    ``ImportError`` for an optional provider keeps working."""


class StateSchemaConflictError(MiddlewareConfigError):
    """Two state schemas declare the same field with different types or reducers."""


class ConflictingUpdateError(MiddlewareError, InvalidUpdateError):
    """One model call wrote a state key without a reducer twice (LangGraph's ``InvalidUpdateError``)."""

    @classmethod
    def written_twice(cls, middleware: str, key: str) -> ConflictingUpdateError:
        return cls(
            f"{middleware}.wrap_model_call: state key {key!r} is written twice by one model call (by "
            f"the response and an ExtendedModelResponse, or by two of them), and it has no reducer "
            f"to combine the values. Write it once, or give it a reducer in the state schema.",
            middleware=middleware,
            hook="wrap_model_call",
        )


class UnknownToolError(MiddlewareError, ValueError):
    """A middleware offered the model a tool that the agent cannot execute."""

    @classmethod
    def for_tools(cls, unknown: list[str]) -> UnknownToolError:
        return cls(
            f"Middleware added tools the agent cannot execute. Unknown tools: {unknown}. Register them "
            f"with create_agent(tools=[...]) or a middleware's `tools`, or implement wrap_tool_call to "
            f"execute them (request.tool is None there; call handler(request.override(tool=...))).",
            middleware="create_agent",
            hook="wrap_model_call",
        )


class AgentArgumentError(MiddlewareError, TypeError):
    """``create_agent`` was given an argument of the wrong kind (``.hook`` names the argument)."""

    def __init__(self, message: str, *, argument: str) -> None:
        super().__init__(message, middleware="create_agent", hook=argument)

    @classmethod
    def tool_node_given(cls, *, listed: bool = False) -> AgentArgumentError:
        if listed:
            return cls(
                "'ToolNode' object is not iterable: create_agent(tools=...) does not take a ToolNode: pass the list "
                "of tools itself.",
                argument="tools",
            )
        return cls(
            "'ToolNode' object is not iterable: create_agent(tools=...) does not take a ToolNode: pass the list of "
            "tools itself "
            "(create_agent builds its own tool node so middleware can wrap every call).",
            argument="tools",
        )

    @classmethod
    def not_a_transformer(cls, owner: str, given: object) -> AgentArgumentError:
        where = "create_agent(transformers=...)" if owner == "create_agent" else f"{owner}.transformers"
        return cls(
            f"{where} holds {given!r}; a stream transformer is a factory LangGraph calls with the stream's scope "
            f"(a StreamTransformer subclass, e.g. transformers=[MyTransformer]), not an instance or a string.",
            argument="transformers",
        )

    @classmethod
    def tools_not_a_list(cls, given: object) -> AgentArgumentError:
        return cls(
            f"create_agent(tools=...) takes a list of tools; got {type(given).__name__}. Use tools=[...].",
            argument="tools",
        )

    @classmethod
    def not_a_tool(cls, item: object) -> AgentArgumentError:
        return cls(
            f"create_agent(tools=...) holds {item!r}; a tool is a BaseTool, a function, or a dict "
            f"(a provider's built-in tool).",
            argument="tools",
        )

    @classmethod
    def bad_system_prompt(cls, given: object) -> AgentArgumentError:
        return cls(
            f"create_agent(system_prompt=...) must be a str or a SystemMessage; got {type(given).__name__}.",
            argument="system_prompt",
        )

    @classmethod
    def not_a_chat_model(cls, model: object) -> AgentArgumentError:
        return cls(
            f"create_agent(model=...) takes a chat model instance (a BaseChatModel, e.g. ChatOpenAI(model=...)) or a "
            f"model string such as 'openai:gpt-4o'; got {type(model).__name__}.",
            argument="model",
        )


def _describe(value: object) -> str:
    if value is None:
        return "None"
    return f"a {type(value).__module__}.{type(value).__qualname__} ({value!r:.80})"


def _coroutine_hint(value: object, hook: str) -> str:
    import inspect

    if inspect.iscoroutine(value):
        value.close()
        return (
            f" It returned an un-awaited coroutine: define the coroutine as the async twin 'a{hook}' "
            f"(or use 'async def' with the decorator), or await what you call inside it."
        )
    return ""


# -- the fail-fast checks: hook signatures at build, the run's context, hook values to the element -------------
def _brief(value: object) -> str:
    return "None" if value is None else f"a {type(value).__qualname__} ({value!r:.80})"


def _agent_tools(tools: Sequence[str]) -> str:
    listed = ", ".join(repr(t) for t in tools) or "none"
    return (
        f"The agent's tools: {listed} (create_agent's tools, every middleware's `tools`, the structured-output tool)."
    )


class UnknownToolWarning(UserWarning):
    """A middleware's configuration names a tool the agent being built does not have, and no tool of the agent has a
    name within a typo of it (that case is a :class:`MiddlewareConfigError`): the setting never applies in this agent,
    as for a policy shared with agents that have the tool (deepagents' subagents inherit their parent's
    ``interrupt_on``)."""

    @classmethod
    def for_tool(
        cls, middleware: str, option: str, tool: str, tools: Sequence[str], declare: str
    ) -> UnknownToolWarning:
        return cls(
            f"{middleware}: {option} names the tool {tool!r}, which this agent does not have, so it never applies "
            f"here. {_agent_tools(tools)} If {tool!r} is misspelled, fix it; if a middleware adds it per call (a "
            f"wrap_model_call extending request.tools, run by a wrap_tool_call), declare it: {declare}; if the setting "
            f"is shared with another agent that has the tool, this warning can be ignored."
        )


class HookSignatureError(MiddlewareConfigError, TypeError):
    """A hook's parameters do not fit its contract (:mod:`middleware_kit.hooks`): found by ``create_agent``,
    before
    anything runs (as pluggy validates a plugin at register).

    Attributes:
        expected: The signature the engine calls the hook with.
        found: The hook's own signature.
    """

    def __init__(self, message: str, *, middleware: str, hook: str, expected: str, found: str) -> None:
        super().__init__(message, middleware=middleware, hook=hook)
        self.expected = expected
        self.found = found

    @classmethod
    def wrong_parameters(
        cls, middleware: str, hook: str, expected: str, found: str, problem: str
    ) -> HookSignatureError:
        return cls(
            f"{middleware}.{hook} has the signature {found}, but the engine calls it as {expected} ({problem}). "
            f"Change it to {expected}; extra parameters need defaults.",
            middleware=middleware,
            hook=hook,
            expected=expected,
            found=found,
        )

    @classmethod
    def generator_hook(cls, middleware: str, hook: str, expected: str, found: str) -> HookSignatureError:
        return cls(
            f"{middleware}.{hook} is a generator function ({found}); only wrap_model_call and wrap_tool_call may be "
            f"written as flows (generators). Write it as {expected} and return the result instead of yielding it.",
            middleware=middleware,
            hook=hook,
            expected=expected,
            found=found,
        )

    @classmethod
    def async_generator_hook(cls, middleware: str, hook: str, expected: str, found: str) -> HookSignatureError:
        return cls(
            f"{middleware}.{hook} is an async generator ({found}); hooks are never async generators. Write it as "
            f"{expected} (a flow wrap hook is a plain generator: 'def', 'response = yield request').",
            middleware=middleware,
            hook=hook,
            expected=expected,
            found=found,
        )


class ContextError(MiddlewareError, TypeError):
    """The ``context=`` of a run does not match the agent's ``context_schema``: checked once when the run starts,
    before any hook runs and before anything is written to the thread.

    Attributes:
        schema: The name of the context schema.
        field: The field at fault (None when the whole context is: missing or of the wrong type).
    """

    def __init__(self, message: str, *, schema: str, field: str | None) -> None:
        super().__init__(message, middleware="create_agent", hook="context")
        self.schema = schema
        self.field = field

    @classmethod
    def missing(cls, schema: str, required: Sequence[str]) -> ContextError:
        return cls(
            f"The agent's context_schema is {schema}, which requires the field(s) {list(required)}, but the run got "
            f"no context. Pass it: agent.invoke(..., context={schema}({required[0]}=...)) (a dict of its fields "
            f"works too).",
            schema=schema,
            field=required[0],
        )

    @classmethod
    def missing_on_resume(cls, schema: str, required: Sequence[str]) -> ContextError:
        return cls(
            f"This run resumes the thread (Command(resume=...)) without context, but the agent's context_schema is "
            f"{schema}, which requires the field(s) {list(required)}. LangGraph does not keep the context in the "
            f"checkpoint: pass it again on every invoke, resumes included: agent.invoke(Command(resume=...), config, "
            f"context={schema}({required[0]}=...)).",
            schema=schema,
            field=required[0],
        )

    @classmethod
    def from_parent(cls, schema: str, parent: object, field: str | None, problem: str) -> ContextError:
        return cls(
            f"This agent runs inside a parent graph whose context is a {type(parent).__qualname__}, and it gets that "
            f"context (it was invoked without context=), but the context does not fit {schema}, the agent's "
            f"context_schema: {problem}. Give the parent's context schema the field(s) the agent needs (the agent "
            f"reads the parent's fields of the same names), or invoke the agent inside a node with its own context: "
            f"agent.invoke(..., context={schema}(...)).",
            schema=schema,
            field=field,
        )

    @classmethod
    def wrong_type(cls, schema: str, value: object) -> ContextError:
        return cls(
            f"context= is {_brief(value)}, not a {schema} (the agent's context_schema). Pass {schema}(...) or a "
            f"dict of its fields.",
            schema=schema,
            field=None,
        )

    @classmethod
    def unknown_field(cls, schema: str, field: str, declared: Sequence[str]) -> ContextError:
        close = difflib.get_close_matches(field, list(declared), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return cls(
            f"context= has the field {field!r}, which {schema} does not declare (its fields: "
            f"{', '.join(declared) or 'none'}).{hint} Remove it, or declare it on {schema}.",
            schema=schema,
            field=field,
        )

    @classmethod
    def missing_field(cls, schema: str, field: str) -> ContextError:
        return cls(
            f"context= lacks {field!r}, a required field of {schema} (the agent's context_schema). Add it: "
            f"context={{..., {field!r}: ...}} or {schema}({field}=...).",
            schema=schema,
            field=field,
        )

    @classmethod
    def invalid_field(cls, schema: str, field: str | None, detail: str) -> ContextError:
        where = f"the field {field!r}" if field else "a field"
        return cls(
            f"context= does not fit {schema} (the agent's context_schema): {where}: {detail}. Fix the value.",
            schema=schema,
            field=field,
        )


class HookValueError(HookReturnError):
    """A hook returned a container of the right type holding something its contract does not allow (a message
    that is not one, a ``ModelResponse`` whose ``result`` is a str, a ``Command`` whose ``update`` is not a dict, a
    ``ToolMessage`` answering another call). Nothing of it reaches state: the thread keeps its last good checkpoint.
    """

    @classmethod
    def not_a_message(cls, middleware: str, hook: str, where: str, value: object) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned {where} = {_brief(value)}, which is not a message. Use message "
            f"objects (AIMessage, HumanMessage, ToolMessage, ... from langchain_core.messages), a ('role', 'content') "
            f"tuple or a {{'role': ..., 'content': ...}} dict.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def result_not_a_list(cls, middleware: str, hook: str, value: object) -> HookValueError:
        hint = " (a str would be read as one message per character)" if isinstance(value, str) else ""
        return cls(
            f"{middleware}.{hook} returned ModelResponse(result={_brief(value)}){hint}; result must be a list of "
            f"messages. Return ModelResponse(result=[AIMessage(...)]) or the AIMessage itself.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def not_a_command(cls, middleware: str, hook: str, value: object) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned ExtendedModelResponse(command={_brief(value)}); command must be None "
            f"or a langgraph.types.Command(update={{...}}).",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def bad_update(cls, middleware: str, hook: str, value: object) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned Command(update={_brief(value)}); update must be a dict of state "
            f"updates (or a list of (key, value) pairs), e.g. Command(update={{'messages': [ToolMessage(...)]}}).",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def foreign_tool_message(
        cls, middleware: str, hook: str, found: object, expected: str, tool: str
    ) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned a ToolMessage with tool_call_id={found!r} for the call {expected!r} of "
            f"tool {tool!r}: the model would see an answer to a call it never made and no answer to its own. Build "
            f"the message with tool_call_id=request.tool_call['id'].",
            middleware=middleware,
            hook=hook,
        )
