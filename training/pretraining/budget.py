"""A training run bounded by wall-clock time instead of a step count (`--time-budget-minutes`)."""
from __future__ import annotations

import time

import torch

from training.runtime.recipe import lr_factor


class BudgetClock:
    """Progress through a wall-clock budget, the same number on every rank (the slowest rank's clock,
    all-reduced each step), so all ranks see one learning rate and stop at the same step.

    The schedule is the run's (`training.runtime.recipe.lr_factor`) over the fraction of the budget spent:
    warm-up over `warmup_ratio` of it, then e.g. for `linear` `(1 - p) / (1 - w)`, 0 at its end."""

    def __init__(self, budget_seconds: float, warmup_ratio: float, schedule: str = "linear"):
        self.budget, self.warmup, self.schedule = budget_seconds, warmup_ratio, schedule
        self.resume_at(0.0)

    def resume_at(self, elapsed: float) -> None:
        """Continue a run that had spent `elapsed` seconds of its budget."""
        self.elapsed = elapsed
        self._t = time.time() - elapsed

    @property
    def progress(self) -> float:
        return min(1.0, self.elapsed / self.budget)

    def factor(self, _step: int = 0) -> float:
        return lr_factor(self.schedule, self.progress, self.warmup, 1.0)

    def tick(self, device: torch.device | str = "cpu") -> bool:
        """Agree on the elapsed time (max over ranks, a tensor on the step's device); True once the budget is
        spent. The one collective and host read per step of a budgeted run: every rank must stop at the same step."""
        import torch.distributed as dist

        t = torch.tensor([time.time() - self._t], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        self.elapsed = t.item()
        return self.elapsed >= self.budget
