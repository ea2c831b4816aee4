"""Run control: one run per thread, resumes applied exactly once, deadlines and cancellation (issue 14).

``with_run_control(agent, RunControl(...))`` wraps a compiled agent built with
``middleware=controlled_middleware([...])``. See ``docs/production.md``.
"""

from middleware_kit.run_control.agent import ControlledAgent, acancel_run, cancel_run, with_run_control
from middleware_kit.run_control.control import RunControl, RunHandle, current_handle
from middleware_kit.run_control.errors import (
    InterruptAlreadyResolvedError,
    NothingToResumeError,
    PendingApprovalError,
    ResumeError,
    RunCancelledError,
    RunControlConfigError,
    RunControlError,
    RunDeadlineExceededError,
    ThreadBusyError,
    UnknownInterruptError,
)
from middleware_kit.run_control.lease import backend_for
from middleware_kit.run_control.middleware import (
    RunControlGuard,
    RunControlMiddleware,
    RunControlState,
    controlled_middleware,
)

__all__ = [
    "ControlledAgent",
    "InterruptAlreadyResolvedError",
    "NothingToResumeError",
    "PendingApprovalError",
    "ResumeError",
    "RunCancelledError",
    "RunControl",
    "RunControlConfigError",
    "RunControlError",
    "RunControlGuard",
    "RunControlMiddleware",
    "RunControlState",
    "RunDeadlineExceededError",
    "RunHandle",
    "ThreadBusyError",
    "UnknownInterruptError",
    "acancel_run",
    "backend_for",
    "cancel_run",
    "controlled_middleware",
    "current_handle",
    "with_run_control",
]
