"""``CompiledAgent``: the one class of every graph ``create_agent`` returns.

A subclass of LangGraph's ``CompiledStateGraph`` with the few things an agent adds at its entry points, each stated
in the module that owns the rule and called from here:

- ``stream``/``astream`` (and so ``invoke``/``ainvoke``, ``stream_events``): the run's ``context=`` checked against
  ``context_schema`` (:mod:`middleware_kit._engine.context`), an input ``Command`` passed through the message guards
  (:mod:`middleware_kit._engine.guards`, via the input channel's transform);
- ``bulk_update_state``/``abulk_update_state`` (and so ``update_state``): the values through the same guards;
- state snapshots (``get_state``, ``get_state_history``) read every state key, though streams carry the public ones
  only (:func:`middleware_kit._engine.compat.hide_from_streams`);
- ``middleware_plan``: a real attribute, kept by ``copy()`` and ``with_config()``;
- the config of each run: this agent's inherited policies added for the agents run inside it
  (:func:`middleware_kit._engine.inheritance.enter`).

Run control (:mod:`middleware_kit.run_control`) subclasses it once, as ``ControlledAgent``. No class is made or
swapped at run time: an agent's MRO is ``CompiledAgent``, then LangGraph's own classes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateUpdate
from typing_extensions import TypeVar

from middleware_kit._engine.compat import StateLike, transform_of
from middleware_kit._engine.context import checked_context
from middleware_kit._engine.inheritance import enter
from middleware_kit._engine.private_state import snapshot_channels, snapshot_scope

if TYPE_CHECKING:
    from middleware_kit._engine.inheritance import Frame
    from middleware_kit.plan import MiddlewarePlan

__all__ = ["CompiledAgent"]

ContextT = TypeVar("ContextT", bound="StateLike | None", default=Any)


class CompiledAgent(CompiledStateGraph[Any, ContextT, Any, Any]):
    """The compiled agent: LangGraph's compiled graph, plus ``middleware_plan`` (print it to see the order of every
    hook) and the checks at its entry points (see the module doc)."""

    middleware_plan: MiddlewarePlan
    """The agent's pipeline in run order (:class:`~middleware_kit.plan.MiddlewarePlan`)."""
    inherited_frame: Frame | None = None
    """The policies this agent's runs hand to the agents run inside them (None: none;
    :mod:`middleware_kit._engine.inheritance`)."""

    @classmethod
    def of(
        cls, compiled: CompiledStateGraph[Any, Any, Any, Any], plan: MiddlewarePlan, frame: Frame | None = None
    ) -> Self:
        """An agent holding everything ``compiled`` holds (no copy of its nodes or channels), with ``plan`` and the
        ``frame`` of its inherited policies."""
        agent = object.__new__(cls)
        agent.__dict__.update(compiled.__dict__)
        agent.middleware_plan = plan
        agent.inherited_frame = frame
        return agent

    def copy(self, update: dict[str, Any] | None = None) -> Self:
        """A shallow copy (``with_config`` makes one), this class and every attribute kept."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(update or {})
        return new

    def _entry(
        self, input: Any, config: RunnableConfig | None, context: Any
    ) -> tuple[Any, RunnableConfig | None, Any]:
        """The input, config and context a run starts with: the context checked, an input ``Command`` guarded; run
        inside another agent's run, the input through the callers' guards; this agent's inherited policies added to
        the config for the runs started inside it."""
        __tracebackhide__ = True
        if self.context_schema is not None:
            context = checked_context(self.context_schema, input, context, config)
        if isinstance(input, Command):
            input = transform_of(self)(input)
        input, config = enter(self.inherited_frame, input, config)
        return input, config, context

    def _run_args(self, input: Any, config: RunnableConfig | None, context: Any, kwargs: dict[str, Any]) -> Any:
        """The keyword arguments of LangGraph's ``stream``/``astream`` for a run: :meth:`_entry`'s, then ``kwargs``."""
        __tracebackhide__ = True
        input, config, context = self._entry(input, config, context)
        return {"input": input, "config": config, "context": context, **kwargs}

    def stream(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> Iterator[Any]:
        __tracebackhide__ = True
        return super().stream(**self._run_args(input, config, context, kwargs))

    def astream(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        __tracebackhide__ = True
        return super().astream(**self._run_args(input, config, context, kwargs))

    def bulk_update_state(self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> Any:
        return super().bulk_update_state(config, _guarded(self, supersteps))

    async def abulk_update_state(self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]) -> Any:
        return await super().abulk_update_state(config, _guarded(self, supersteps))

    @property
    def stream_channels_asis(self) -> Any:
        return snapshot_channels(super().stream_channels_asis)

    def _prepare_state_snapshot(self, *args: Any, **kwargs: Any) -> Any:
        with snapshot_scope():
            return super()._prepare_state_snapshot(*args, **kwargs)

    async def _aprepare_state_snapshot(self, *args: Any, **kwargs: Any) -> Any:
        with snapshot_scope():
            return await super()._aprepare_state_snapshot(*args, **kwargs)


def _guarded(agent: Any, supersteps: Sequence[Sequence[StateUpdate]]) -> list[list[StateUpdate]]:
    transform = transform_of(agent)
    return [[update._replace(values=transform(update.values)) for update in step] for step in supersteps]
