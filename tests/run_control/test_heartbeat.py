"""The shared heartbeat of sync runs: one slow renewal (a hung database, a locked SQLite file) holds up no other run's
renewal, and a run is never renewed twice at once."""

from __future__ import annotations

import threading
import time
from typing import Any

from middleware_kit.run_control import RunControl
from middleware_kit.run_control.control import RunHandle
from middleware_kit.run_control.heartbeat import Heartbeats
from middleware_kit.run_control.lease import LeaseBackend


class Database(LeaseBackend):
    """A lease database whose renewals take ``delay`` seconds; it records when each renewal ran."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.renewals: list[tuple[str, float]] = []
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def renew(self, thread_id: str, run_id: str, ttl: float) -> tuple[bool, str | None]:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.delay)
        with self._lock:
            self.running -= 1
            self.renewals.append((run_id, time.monotonic()))
        return True, None


def handle(run_id: str, backend: Any) -> RunHandle:
    return RunHandle(run_id, run_id, RunControl(ttl=3.0, poll_interval=0.05), backend)


def test_a_slow_renewal_holds_up_no_other_run() -> None:
    beats = Heartbeats()
    stuck, healthy = Database(delay=2.0), Database(delay=0.0)
    slow, fast = handle("slow", stuck), handle("fast", healthy)
    beats.add(stuck, slow)
    beats.add(healthy, fast)
    time.sleep(1.0)  # the slow run's first renewal is still in flight for another second
    beats.remove(slow)
    beats.remove(fast)
    assert not stuck.renewals  # the hung database answered nothing yet
    assert len(healthy.renewals) >= 5, healthy.renewals  # the other run was renewed on time meanwhile (every 0.05 s)
    assert fast.fence_at > time.monotonic()  # so its writes were never fenced
    assert stuck.most_at_once == 1  # one renewal of a run at a time, however late it is
