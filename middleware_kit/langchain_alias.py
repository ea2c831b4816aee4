"""Serve ``langchain.agents`` (and the few ``langchain.*`` modules agent code imports with it) from middleware_kit.

Code written for LangChain v1, a library built on it (deepagents) or LangChain's own unit tests run unchanged::

    >>> import middleware_kit.langchain_alias
    >>> undo = middleware_kit.langchain_alias.install()
    >>> from langchain.agents import create_agent              # middleware_kit.create_agent
    >>> from langchain.agents.middleware import PIIMiddleware  # middleware_kit's PIIMiddleware
    >>> undo()                                                  # the import system as it was

The ``langchain`` package is never imported: while installed, this finder answers first for every name in
:data:`ALIASES`, and a name under ``langchain`` that is not there raises ``ModuleNotFoundError`` naming it (so a
half-served import never mixes two frameworks). Each served name is a small alias module that forwards attribute
reads, writes and deletes to its target, so ``unittest.mock.patch("langchain.agents.middleware.human_in_the_loop.
interrupt")`` patches the global the middleware looks up; LangChain's private names (``langchain.agents.factory.
_chain_model_call_handlers``) are not served.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ALIASES", "install", "installed"]

ALIASES: dict[str, str] = {
    # packages: alias modules forwarding to the target
    "langchain": "middleware_kit",
    "langchain.agents": "middleware_kit",
    "langchain.agents.middleware": "middleware_kit.middleware",
    # modules: the target module itself
    "langchain.agents.factory": "middleware_kit.agent",
    "langchain.agents.structured_output": "middleware_kit.structured_output",
    "langchain.agents._subagent_transformer": "middleware_kit._engine.subagent_stream",
    "langchain.agents.middleware.types": "middleware_kit.middleware",
    "langchain.agents.middleware.human_in_the_loop": "middleware_kit.middlewares.human_in_the_loop.middleware",
    "langchain.agents.middleware.summarization": "middleware_kit.middlewares.summarization",
    "langchain.agents.middleware.pii": "middleware_kit.middlewares.pii",
    "langchain.agents.middleware.model_retry": "middleware_kit.middlewares.retry",
    "langchain.agents.middleware.tool_retry": "middleware_kit.middlewares.retry",
    "langchain.agents.middleware.model_call_limit": "middleware_kit.middlewares.limits",
    "langchain.agents.middleware.tool_call_limit": "middleware_kit.middlewares.limits",
    "langchain.agents.middleware.model_fallback": "middleware_kit.middlewares.fallback",
    "langchain.agents.middleware.tool_selection": "middleware_kit.middlewares.llm_tool_selector",
    "langchain.agents.middleware.tool_emulator": "middleware_kit.middlewares.llm_tool_emulator",
    "langchain.agents.middleware.todo": "middleware_kit.middlewares.todo_list",
    "langchain.agents.middleware.context_editing": "middleware_kit.middlewares.context_editing",
    "langchain.agents.middleware.file_search": "middleware_kit.middlewares.file_search",
    "langchain.agents.middleware.shell_tool": "middleware_kit.middlewares.shell_tool",
    "langchain.agents.middleware.model_router": "middleware_kit.middlewares.model_router",
    "langchain.agents.middleware.auto_mode": "middleware_kit.middlewares.auto_mode",
    "langchain.agents.middleware.model_refusal": "middleware_kit.middlewares.model_refusal",
    "langchain.agents.middleware.provider_tool_search": "middleware_kit.middlewares.provider_tool_search",
    "langchain.agents.middleware.tool_error": "middleware_kit.middlewares.tool_error",
    "langchain.agents.middleware.prompt_caching": "middleware_kit.middlewares.prompt_caching",
    "langchain.agents.middleware.guardrails": "middleware_kit.middlewares.guardrails",
    "langchain.agents.middleware.moderation": "middleware_kit.middlewares.moderation",
    "langchain.agents.middleware.internal_call_transformer": "middleware_kit._engine.internal_calls",
    "langchain.chat_models": "middleware_kit.models",
    # not middleware: LangChain re-exports these from langchain-core and LangGraph
    "langchain.messages": "langchain_core.messages",
    "langchain.tools": "middleware_kit._langchain_tools",
    "langchain.tools.tool_node": "langgraph.prebuilt.tool_node",
    "langchain.embeddings": "langchain_core.embeddings",
}
"""Each served ``langchain`` module name and the module that serves it."""

_PACKAGES = frozenset(
    {"langchain", "langchain.agents", "langchain.agents.middleware", "langchain.chat_models", "langchain.tools"}
)

_missing: Callable[[str, str], Any] | None = None
"""What an alias gives for a name its target lacks (None: ``AttributeError``). Only the harness that runs LangChain's
own test suite sets it, to stand in for LangChain's private helpers."""


class _Alias(types.ModuleType):
    """A ``langchain`` module served by middleware_kit: reads, writes and deletes of attributes go to the target
    module, so ``mock.patch("langchain.agents.middleware.summarization.init_chat_model")`` patches the global that
    middleware_kit's summarization looks up. Submodules imported through a package alias are set on the alias."""

    def __init__(self, name: str, target: types.ModuleType, package: bool) -> None:
        super().__init__(name, target.__doc__)
        vars(self)["_Alias__target"] = target
        if package:
            vars(self)["__path__"] = []
        if hasattr(target, "__all__"):
            vars(self)["__all__"] = list(target.__all__)

    def __getattr__(self, attr: str) -> Any:
        target = vars(self)["_Alias__target"]
        try:
            return getattr(target, attr)
        except AttributeError:
            if _missing is not None and not attr.startswith("__"):
                return _missing(self.__name__, attr)
            raise AttributeError(
                f"module {self.__name__!r} (served by middleware_kit from {target.__name__!r}) has no "
                f"attribute {attr!r}"
            ) from None

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr.startswith("__") or isinstance(value, _Alias):
            super().__setattr__(attr, value)  # module machinery, or a submodule alias set on its package
        else:
            setattr(vars(self)["_Alias__target"], attr, value)

    def __delattr__(self, attr: str) -> None:
        if attr in vars(self):
            super().__delattr__(attr)
        else:
            delattr(vars(self)["_Alias__target"], attr)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *dir(vars(self)["_Alias__target"])})


class _Loader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Alias(spec.name, importlib.import_module(self.target), spec.name in _PACKAGES)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "langchain" and not fullname.startswith("langchain."):
            return None
        served = ALIASES.get(fullname)
        if served is None:
            raise ModuleNotFoundError(
                f"{fullname!r} is not served by middleware_kit.langchain_alias; import what you need from "
                f"middleware_kit (the served modules are listed in middleware_kit.langchain_alias.ALIASES)",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(fullname, _Loader(served), is_package=fullname in _PACKAGES)


_finder: _Finder | None = None


def installed() -> bool:
    """Whether ``langchain`` imports are served by middleware_kit right now."""
    return _finder is not None and _finder in sys.meta_path


def install() -> Callable[[], None]:
    """Serve ``langchain.agents*`` imports from middleware_kit until the returned ``undo()`` is called.

    Installing twice is a no-op (the second ``undo`` does nothing). Modules a real ``langchain`` package already
    put in ``sys.modules`` are replaced while installed and restored by ``undo()``.
    """
    global _finder
    if installed():
        return lambda: None
    finder = _finder = _Finder()
    shadowed = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "langchain"}
    for name in shadowed:
        del sys.modules[name]
    sys.meta_path.insert(0, finder)

    def undo() -> None:
        global _finder
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if name.split(".")[0] == "langchain"]:
            del sys.modules[name]
        sys.modules.update(shadowed)
        if _finder is finder:
            _finder = None

    return undo
