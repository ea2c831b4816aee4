"""Run control: one run per thread, resumes applied exactly once, deadlines and cancellation (issues 14, 23).

On by default for ``create_agent(..., checkpointer=saver)``; ``run_control=RunControl(...)`` tunes it and
``run_control=False`` turns it off. See ``docs/production.md``.
"""

from middleware_kit.run_control.agent import ControlledAgent, acancel_run, cancel_run, with_run_control
from middleware_kit.run_control.control import RunControl, RunHandle, current_handle
from middleware_kit.run_control.errors import (
    AmbiguousResumeError,
    InterruptAlreadyResolvedError,
    LeaseLostError,
    NothingToResumeError,
    PendingApprovalError,
    ResumeError,
    RunCancelledError,
    RunControlConfigError,
    RunControlError,
    RunDeadlineExceededError,
    ThreadBusyError,
    UnknownInterruptError,
    UnsharedLeaseWarning,
)
from middleware_kit.run_control.lease import backend_for
from middleware_kit.run_control.middleware import (
    RunControlGuard,
    RunControlMiddleware,
    RunControlState,
    controlled_middleware,
)

__all__ = [
    "AmbiguousResumeError",
    "ControlledAgent",
    "InterruptAlreadyResolvedError",
    "LeaseLostError",
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
    "UnsharedLeaseWarning",
    "acancel_run",
    "backend_for",
    "cancel_run",
    "controlled_middleware",
    "current_handle",
    "with_run_control",
]
