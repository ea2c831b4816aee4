"""``RunSaver``: the checkpointer one controlled run reads and writes its thread through.

A controlled run runs a shallow copy of the compiled graph whose checkpointer is this wrapper of the agent's (LangGraph
lends it to the run's subgraphs as it lends any parent's), so everything the run and its subgraphs store passes here:

- **the lease**, when the backend takes it with the read (PostgreSQL, :attr:`LeaseBackend.reads_with_lease`): the
  run's first try for the lease travels with that first read, in one round trip
  (:func:`~middleware_kit.run_control.lease.reading_flow`); a busy thread raises ``ThreadBusyError`` (or the run
  waits its turn and reads again) before anything of the thread is used;
- **admission**, on the run's first read of the thread (the checkpoint LangGraph itself loads, under the lease):
  :func:`~middleware_kit.run_control.admission.admit` may refuse the input before anything is written, at no
  extra read;
- **resolved interrupts**, right before the run's first write (so after LangGraph's strict resume accepted it): the
  interrupts it answers are recorded as resolved by this run, so a late duplicate is told apart from a resume that
  never matched anything;
- **the fence**, before every write: a run whose lease may have passed to another run (its heartbeat stalled past
  two thirds of the ``ttl``, or the renewal found another holder) writes nothing more (``LeaseLostError``).

Reads, listing and everything else go straight to the wrapped saver.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from middleware_kit._engine.compat import put_writes_accepts_task_path
from middleware_kit.run_control.admission import admit, pending_interrupts
from middleware_kit.run_control.control import RunHandle
from middleware_kit.run_control.lease import LeaseBackend, LeaseStep, adrive, drive, reading_flow

__all__ = ["RunSaver"]


_TASK_PATH: dict[type, tuple[bool, bool]] = {}


def _takes_task_path(saver: type[BaseCheckpointSaver[Any]]) -> tuple[bool, bool]:
    """Whether the class's ``put_writes`` / ``aput_writes`` take ``task_path`` (LangGraph's test; once per class:
    reading a signature costs more than the rest of the wrapper per run)."""
    found = _TASK_PATH.get(saver)
    if found is None:
        found = _TASK_PATH[saver] = (put_writes_accepts_task_path(saver.put_writes),
                                     put_writes_accepts_task_path(saver.aput_writes))
    return found


class _Run:
    """What the wrapper (and its ``with_allowlist`` clones) share for one run."""

    __slots__ = ("admitted", "backend", "handle", "input", "lease")

    def __init__(self, handle: RunHandle, backend: LeaseBackend, input: Any,
                 lease: Generator[LeaseStep, Any, float] | None) -> None:
        self.handle, self.backend, self.input, self.lease = handle, backend, input, lease
        self.admitted = False

    def reading(self, config: RunnableConfig) -> Generator[LeaseStep, Any, tuple[float, bool, Any]] | None:
        """The lease flow to run with the first read (once), or None: the lease was taken before the run."""
        lease, self.lease = self.lease, None
        return None if lease is None else reading_flow(lease, config)

    def taken(self, sent: float) -> None:
        """The lease was taken by a statement sent at ``sent``: the run's clock starts now (a wait for the thread
        does not count against its deadline, as when the lease is taken before the run)."""
        self.handle.leased(sent)
        self.handle.slice_started = time.monotonic()

    def first_read(self, config: RunnableConfig) -> bool:
        if self.admitted or (config.get("configurable") or {}).get("checkpoint_ns"):
            return False
        self.admitted = True
        return True


class RunSaver(BaseCheckpointSaver[Any]):
    """``inner`` as one controlled run sees it (see the module doc)."""

    def __init__(self, inner: BaseCheckpointSaver[Any], run: _Run) -> None:
        self.inner = inner
        self.serde = inner.serde
        self._run = run
        self._task_path, self._atask_path = _takes_task_path(type(inner))
        self.get_next_version = inner.get_next_version  # type: ignore[method-assign]  # called per channel write:
        # no wrapper frame (nothing of the run is involved)

    @classmethod
    def for_run(cls, inner: BaseCheckpointSaver[Any], handle: RunHandle, backend: LeaseBackend, input: Any,
                lease: Generator[LeaseStep, Any, float] | None = None) -> RunSaver:
        """The saver of one run; ``lease``: the run's acquire flow, to take the lease with its first read (when
        ``backend.reads_with_lease``), else None (the lease is already held)."""
        return cls(inner, _Run(handle, backend, input, lease))

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    def with_allowlist(self, extra_allowlist: Any) -> BaseCheckpointSaver[Any]:
        inner = self.inner.with_allowlist(extra_allowlist)
        return self if inner is self.inner else RunSaver(inner, self._run)

    # -- reads -------------------------------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        run = self._run
        if not run.first_read(config):
            return self.inner.get_tuple(config)
        lease = run.reading(config)
        if lease is None:
            found = self.inner.get_tuple(config)
        else:
            sent, read, found = drive(lease, run.backend)
            run.taken(sent)
            if not read:
                found = self.inner.get_tuple(config)
        if (lookup := admit(run.input, run.handle, [i.id for i in pending_interrupts(found)])) is not None:
            drive(lookup, run.backend)
        return found

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        run = self._run
        if not run.first_read(config):
            return await self.inner.aget_tuple(config)
        lease = run.reading(config)
        if lease is None:
            found = await self.inner.aget_tuple(config)
        else:
            sent, read, found = await adrive(lease, run.backend)
            run.taken(sent)
            if not read:
                found = await self.inner.aget_tuple(config)
        if (lookup := admit(run.input, run.handle, [i.id for i in pending_interrupts(found)])) is not None:
            await adrive(lookup, run.backend)
        return found

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, **kwargs)

    def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        return self.inner.alist(config, **kwargs)

    def get_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_delta_channel_history(*args, **kwargs)

    async def aget_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.aget_delta_channel_history(*args, **kwargs)

    # -- writes ------------------------------------------------------------------------------------------------
    def _clear(self) -> bool:
        """Whether a write may go ahead with nothing to do first: the lease is certainly still the run's and no
        interrupt waits to be recorded as resolved (every write but a resume's first, until the fence nears; asked
        before each write, so one call, with the rule's details in :meth:`_before_write`)."""
        handle = self._run.handle
        return not handle.answering and not handle.lease_lost and time.monotonic() < handle.fence_at

    def _before_write(self) -> None:
        handle = self._run.handle
        handle.fence()
        if answered := handle.take_answering():
            self._run.backend.record_resolved(handle.thread_id, answered, handle.run_id)

    async def _abefore_write(self) -> None:
        handle = self._run.handle
        handle.fence()
        if answered := handle.take_answering():
            await self._run.backend.arecord_resolved(handle.thread_id, answered, handle.run_id)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        if not self._clear():
            self._before_write()
        return self.inner.put(config, checkpoint, metadata, new_versions)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        if not self._clear():
            await self._abefore_write()
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        if not self._clear():
            self._before_write()
        if self._task_path:
            self.inner.put_writes(config, writes, task_id, task_path)
        else:
            self.inner.put_writes(config, writes, task_id)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        if not self._clear():
            await self._abefore_write()
        if self._atask_path:
            await self.inner.aput_writes(config, writes, task_id, task_path)
        else:
            await self.inner.aput_writes(config, writes, task_id)
