"""Configuration is a value: a bundled middleware is read-only once an agent adopts it (DESIGN §8.5).

One agent's middleware instance is shared by every concurrent run, so changing a setting after ``create_agent`` would
change runs already in flight. :class:`FrozenConfig` makes that impossible and gives the supported way instead:
``changed = mw.replace(max_retries=5)`` returns a new instance (build a new agent with it).

- The constructor's arguments are recorded (``replace`` re-runs the constructor with them, so validation runs again)
  and its container arguments (lists, dicts, sets, nested) are copied before the constructor sees them, so the
  caller mutating a list afterwards changes nothing.
- Until an agent adopts the instance (``create_agent``, through :func:`middleware_kit._engine.pipeline.build_pipeline`),
  attributes may be set, as in LangChain (``summarization.token_counter = my_counter``). Setting one that is a
  constructor parameter (``x`` or ``_x`` for the parameter ``x``) runs the constructor again with the new value, so
  it is validated exactly as a constructor argument (the same :class:`~middleware_kit.errors.MiddlewareConfigError`)
  and what the constructor derives from it is derived again; ``replace`` keeps the change. Other attributes are set
  as they are.
- Once adopted, assigning or deleting an attribute raises :class:`FrozenMiddlewareError`, except ``name`` (the
  instance's identity in an agent, not configuration); ``replace(name=...)`` and ``replace(inherited=False)`` work
  too. Internal caches that are not configuration (bounded memos) use ``object.__setattr__``.
- A class may declare the rules of its parameters (``__config__``, a :class:`._config.Config`): they are checked,
  defaults included, before its constructor's body runs (see :mod:`middleware_kit.middlewares._config`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._config import Config

__all__ = ["ConstructorArgumentError", "FrozenConfig", "FrozenMiddlewareError", "copy_containers"]

_Self = TypeVar("_Self", bound="FrozenConfig")


class FrozenMiddlewareError(MiddlewareConfigError, AttributeError):
    """A bundled middleware's configuration was changed after an agent adopted it."""

    @classmethod
    def for_assignment(cls, middleware: str, attribute: str) -> FrozenMiddlewareError:
        return cls(
            f"{middleware} is read-only since an agent adopted it (create_agent): cannot set {attribute!r}. One "
            f"instance is shared by every run of the agents built with it. Fix: make a changed copy with "
            f"`mw.replace({attribute.lstrip('_')}=...)` (any constructor argument) and build a new agent with it "
            f"(attributes can be set only before an agent is built).",
            middleware=middleware,
            hook=attribute,
        )


class ConstructorArgumentError(MiddlewareConfigError, TypeError):
    """A bundled middleware was constructed with a missing, unknown or doubled argument (also a ``TypeError``, as
    Python raises for a bad call)."""

    @classmethod
    def for_call(cls, middleware: str, signature: inspect.Signature, problem: TypeError) -> ConstructorArgumentError:
        required = [
            n
            for n, p in signature.parameters.items()
            if n != "self" and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        accepted = [n for n, p in signature.parameters.items() if n != "self"]
        return cls(
            f"{middleware}(...): {problem}. Fix: pass its parameters (required: {', '.join(required) or 'none'}; "
            f"accepted: {', '.join(accepted)}); see help({middleware}).",
            middleware=middleware,
            hook="__init__",
        )


def copy_containers(value: Any) -> Any:
    """``value`` with every list, dict, set and tuple copied (recursively); other objects are shared as they are
    (models, tools, callables and compiled patterns are immutable or not ours to copy)."""
    if isinstance(value, list):
        return [copy_containers(v) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(copy_containers(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: copy_containers(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)) and type(value) in (set, frozenset):
        return type(value)(value)
    return value


class FrozenConfig:
    """Mixin for middlewares whose configuration must not change after construction (see the module docstring)."""

    _frozen_init_args: Mapping[str, Any]
    __frozen_classes__: ClassVar[set[type]] = set()
    __config__: ClassVar[Config | None] = None
    """The rules of this class's constructor parameters (see :mod:`middleware_kit.middlewares._config`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "__frozen_wrapped__", False):
            if "__config__" in cls.__dict__:
                raise TypeError(f"{cls.__name__}.__config__ declares rules for parameters, but {cls.__name__} has no "
                                f"__init__ of its own: declare them on the class whose __init__ takes them.")
            return
        signature = inspect.signature(init)
        config = _declared_config(cls, signature)
        defaults = {n: p.default for n, p in signature.parameters.items() if p.default is not p.empty}

        @functools.wraps(init)
        def __init__(self: FrozenConfig, *args: Any, **kw: Any) -> None:
            outermost = "_frozen_init_args" not in self.__dict__ and not getattr(self, "_frozen_initializing", False)
            if outermost:
                object.__setattr__(self, "_frozen_initializing", True)
            try:
                bound = signature.bind(self, *args, **kw)
            except TypeError as problem:
                raise ConstructorArgumentError.for_call(type(self).__name__, signature, problem) from None
            copied = {name: copy_containers(v) for name, v in bound.arguments.items() if name != "self"}
            if config is not None:
                config.validate(type(self).__name__, {**defaults, **copied})
            if outermost:
                object.__setattr__(self, "_frozen_recorded", (signature, copied))
            call_args, call_kwargs = _rebind(signature, self, copied)
            try:
                init(*call_args, **call_kwargs)
            finally:
                if outermost:
                    object.__setattr__(self, "_frozen_initializing", False)
            if outermost:
                object.__setattr__(self, "_frozen_init_args", copied)

        __init__.__frozen_wrapped__ = True  # type: ignore[attr-defined]
        cls.__init__ = __init__  # type: ignore[method-assign,assignment]

    def __setattr__(self, name: str, value: Any) -> None:
        # ``name`` is the instance's identity in an agent (node and event names), not configuration: setting it is how
        # two instances of one class are told apart (the engine's duplicate-name error says so).
        if name == "name" or "_frozen_init_args" not in self.__dict__:  # identity, or inside the constructor
            object.__setattr__(self, name, value)
        elif self.__dict__.get("_frozen_adopted", False):
            raise FrozenMiddlewareError.for_assignment(_name_of(self), name)
        else:
            self._reconfigure(name, value)

    def __delattr__(self, name: str) -> None:
        if self.__dict__.get("_frozen_adopted", False):
            raise FrozenMiddlewareError.for_assignment(_name_of(self), name)
        object.__delattr__(self, name)

    def _adopt(self) -> None:
        """Make the configuration read-only: an agent was built with this instance (called by ``build_pipeline``)."""
        object.__setattr__(self, "_frozen_adopted", True)

    def _reconfigure(self, attribute: str, value: Any) -> None:
        """Before adoption: set ``attribute``; a constructor parameter's new value goes through the constructor."""
        signature, arguments = self.__dict__["_frozen_recorded"]
        parameter = _parameter_for(attribute, _parameter_names(signature))
        if parameter is None:
            object.__setattr__(self, attribute, value)
            direct = self.__dict__.get("_frozen_direct", frozenset())
            object.__setattr__(self, "_frozen_direct", direct | {attribute})
            return
        merged = {**arguments, parameter: value}
        args, kwargs = _rebind(signature, None, merged)
        fresh = type(self)(*args, **kwargs)  # validates exactly as the constructor does, or raises its error
        keep = self.__dict__.get("_frozen_direct", frozenset()) | _BOOKKEEPING
        for key, derived in fresh.__dict__.items():
            if key not in keep:
                object.__setattr__(self, key, derived)
        if attribute not in fresh.__dict__:
            object.__setattr__(self, attribute, value)
        recorded = fresh.__dict__["_frozen_recorded"]
        object.__setattr__(self, "_frozen_recorded", (signature, recorded[1]))
        object.__setattr__(self, "_frozen_init_args", recorded[1])

    def replace(self: _Self, **changes: Any) -> _Self:
        """A new instance with the same constructor arguments except ``changes`` (validated again by the
        constructor). Build a new agent with it; agents already built keep the old instance."""
        recorded: tuple[inspect.Signature, dict[str, Any]] | None = self.__dict__.get("_frozen_recorded")
        if recorded is None:  # pragma: no cover - every FrozenConfig instance records its arguments
            raise TypeError(f"{type(self).__name__} was not constructed through its __init__")
        signature, arguments = recorded
        named = _parameter_names(signature)
        new_name = changes.pop("name", None) if "name" not in named else None
        new_inherited = changes.pop("inherited", None) if "inherited" not in named else None
        var_kw = next((n for n, p in signature.parameters.items() if p.kind is p.VAR_KEYWORD), None)
        unknown = sorted(set(changes) - named)
        if unknown and var_kw is None:
            raise MiddlewareConfigError(
                f"{_name_of(self)}.replace() got unknown argument(s) {unknown}. Pass constructor arguments: "
                f"{sorted(named)}.",
                middleware=_name_of(self),
                hook="replace",
            )
        merged = {**arguments, **{k: v for k, v in changes.items() if k in named}}
        if unknown and var_kw is not None:
            merged[var_kw] = {**merged.get(var_kw, {}), **{k: changes[k] for k in unknown}}
        args, kwargs = _rebind(signature, None, merged)
        copy = type(self)(*args, **kwargs)
        explicit = new_name if new_name is not None else self.__dict__.get("_middleware_name")
        if explicit is not None:
            copy.name = explicit
        inherited = new_inherited if new_inherited is not None else self.__dict__.get("inherited")
        if inherited is not None:  # an instance's own choice (``mw.inherited = False``) is kept
            copy.inherited = inherited
        return copy


def _declared_config(cls: type, signature: inspect.Signature) -> Config | None:
    """``cls``'s own ``__config__``, checked against its constructor (a rule naming no parameter is a mistake)."""
    config: Config | None = cls.__dict__.get("__config__")
    if config is not None and (unknown := config.unknown(_parameter_names(signature))):
        raise TypeError(f"{cls.__name__}.__config__ declares rules for {unknown}, which its __init__ does not take.")
    return config


_BOOKKEEPING = frozenset(
    {"_frozen_recorded", "_frozen_init_args", "_frozen_initializing", "_frozen_adopted", "_frozen_direct",
     "_middleware_name"}
)
"""Instance attributes that are not configuration: never copied from the instance a reconfiguration builds."""


def _parameter_for(attribute: str, parameters: set[str]) -> str | None:
    """The constructor parameter an attribute holds (``x`` or ``_x`` for the parameter ``x``), if any."""
    if attribute in parameters:
        return attribute
    bare = attribute.lstrip("_")
    return bare if attribute.startswith("_") and bare in parameters else None


def _parameter_names(signature: inspect.Signature) -> set[str]:
    return {
        name
        for name, p in signature.parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _rebind(signature: inspect.Signature, self: Any, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments that call a function of ``signature`` with ``arguments`` (as bound)."""
    args: list[Any] = [self] if self is not None else []
    kwargs: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if name == "self":
            continue
        if name not in arguments:
            continue
        value = arguments[name]
        if param.kind is param.VAR_POSITIONAL:
            args.extend(value)
        elif param.kind is param.VAR_KEYWORD:
            kwargs.update(value)
        elif param.kind is param.POSITIONAL_ONLY or (
            param.kind is param.POSITIONAL_OR_KEYWORD and _has_varargs(signature)
        ):
            args.append(value)
        else:
            kwargs[name] = value
    return args, kwargs


def _has_varargs(signature: inspect.Signature) -> bool:
    return any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())


def _name_of(obj: Any) -> str:
    name: Callable[[], str] | str | None = getattr(obj, "name", None)
    return name if isinstance(name, str) else type(obj).__name__
