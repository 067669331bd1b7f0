"""Peak resident memory of a process and all its children, sampled by a thread (psutil), for `bench scale`."""
from __future__ import annotations

import os
import threading
import time


def tree_rss(root) -> tuple[int, dict[int, int]]:
    """(sum of RSS, {pid: RSS}) over a psutil.Process and all its descendants; processes that
    exit while being read are skipped."""
    import psutil

    per: dict[int, int] = {}
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, per
    for p in procs:
        try:
            per[p.pid] = p.memory_info().rss
        except psutil.Error:
            pass
    return sum(per.values()), per


class PeakRSS(threading.Thread):
    """Samples tree_rss(pid) every `interval` seconds until stop(); keeps the peaks."""

    def __init__(self, pid: int, interval: float = 0.2, limit: int = 0):
        import psutil

        super().__init__(daemon=True)
        self.root, self.interval, self._stop_event = psutil.Process(pid), interval, threading.Event()
        self.limit, self.killed_at = limit, 0  # limit > 0: kill the tree when its RSS passes it
        self.peak_total = self.peak_single = 0
        self.peak_by_pid: dict[int, int] = {}
        self.t0, self.peak_total_at = time.perf_counter(), 0.0
        self.samples = 0

    def sample(self) -> None:
        total, per = tree_rss(self.root)
        self.samples += 1
        if total > self.peak_total:
            self.peak_total, self.peak_total_at = total, time.perf_counter() - self.t0
        for pid, rss in per.items():
            self.peak_by_pid[pid] = max(rss, self.peak_by_pid.get(pid, 0))
        self.peak_single = max([self.peak_single, *per.values()])
        if self.limit and total > self.limit and not self.killed_at:
            # Stop before the kernel's OOM killer picks a victim (possibly not ours).
            self.killed_at = total
            for pid in sorted(per, reverse=True):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


# ---------------------------------------------------------------- running the stage
