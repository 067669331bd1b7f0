"""Batches handed to the training step on its device, built ahead of use on a GPU.

    feed = DeviceFeed(loader.batches(epoch, start), device, prepare=sparse_targets)
    for position, batch in feed:      # batch tensors already on `device`
        loader.position = position    # the loader's resumable position is the consumed batch's

On CUDA a thread builds each batch (numpy gathers in training.pretraining.data), applies `prepare` on the CPU,
pins it and copies it with `non_blocking=True` on a side stream, `depth` batches ahead; the step's
stream waits on each batch's copy event, so the copy of batch n+1 overlaps the compute of batch n and
nothing synchronises the host. On the CPU the batch is used as built: no thread (a Python thread would
take a core from torch's own), no copy. torch's DataLoader was considered: its workers fork the process
(with the DeepSpeed engine in it) and pin on yet another thread; one thread here does the same job.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

Batch = dict[str, torch.Tensor]
_END = object()


def on_device(batch: Batch, device: torch.device) -> Batch:
    """The batch on `device` (the CPU: as it is)."""
    if device.type == "cpu":
        return batch
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}


class DeviceFeed:
    def __init__(self, batches: Iterator[tuple[Any, Batch]], device: torch.device,
                 prepare: Callable[[Batch], Batch] | None = None, depth: int = 2):
        self.batches, self.device, self.prepare, self.depth = batches, device, prepare or (lambda b: b), depth
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __iter__(self) -> Iterator[tuple[Any, Batch]]:
        if self.device.type != "cuda":
            for position, batch in self.batches:
                yield position, on_device(self.prepare(batch), self.device)
            return
        yield from self._ahead()

    def _ahead(self) -> Iterator[tuple[Any, Batch]]:
        q: queue.Queue = queue.Queue(maxsize=self.depth)
        stream = torch.cuda.Stream(self.device)

        def produce() -> None:
            torch.cuda.set_device(self.device)  # the current device is per thread
            try:
                for position, batch in self.batches:
                    batch = self.prepare(batch)
                    with torch.cuda.stream(stream):
                        moved = on_device(batch, self.device)
                        ready = torch.cuda.Event()
                        ready.record(stream)
                    while not self._stop.is_set():
                        try:
                            q.put((position, moved, ready), timeout=0.5)
                            break
                        except queue.Full:
                            continue
                    if self._stop.is_set():
                        return
                q.put(_END)
            except BaseException as e:  # raised again in the consumer, where the step can report it
                q.put(e)

        self._thread = threading.Thread(target=produce, name="lmforge-feed", daemon=True)
        self._thread.start()
        try:
            while True:
                item = q.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                position, batch, ready = item
                current = torch.cuda.current_stream(self.device)
                current.wait_event(ready)
                for v in batch.values():  # the side stream's memory is in use on this stream now
                    v.record_stream(current)
                yield position, batch
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
