"""A run's budget (GPU-hours and/or cost): the pool's, from the catalog, or the run's own
override; a range estimated over it is refused before anything starts."""

from __future__ import annotations

from dataclasses import dataclass

from ads_ranking_pipelines.config.pools import GpuPool
from ads_ranking_pipelines.planning.estimate import Estimate


@dataclass(frozen=True)
class Budget:
    gpu_hours: float | None = None
    cost: float | None = None
    gpu_hours_from: str = ""            # where each limit comes from, for the message
    cost_from: str = ""

    @property
    def any(self) -> bool:
        return self.gpu_hours is not None or self.cost is not None


def budget_for(pool: GpuPool, gpu_hours: float | None = None, cost: float | None = None) -> Budget:
    """The run's override where it gives one, else the pool's catalog budget."""
    catalog = f"pool {pool.name}'s budget in the pool catalog"
    for name, value in (("budget_gpu_hours", gpu_hours), ("budget_cost", cost)):
        if value is not None and not value > 0:
            raise ValueError(f"invalid {name}={value!r}; valid: a number > 0 (unset: the pool's, from the catalog)")
    return Budget(gpu_hours if gpu_hours is not None else pool.budget_gpu_hours,
                  cost if cost is not None else pool.budget_cost,
                  "the run's budget_gpu_hours" if gpu_hours is not None else catalog,
                  "the run's budget_cost" if cost is not None else catalog)


def over_budget(estimate: Estimate, budget: Budget, span: str) -> str | None:
    """Why the range is refused (estimate and limit named), or None when it is within (or unknown)."""
    if not budget.any or not estimate.known:
        return None
    problems = []
    basis = (f"from {estimate.basis_days} past day(s), spread {{low:.4g}}..{{high:.4g}}")
    if budget.gpu_hours is not None and estimate.gpu_hours() > budget.gpu_hours:
        problems.append(f"estimated {estimate.gpu_hours():.4g} GPU-hours ("
                        + basis.format(low=estimate.gpu_hours("low_seconds"), high=estimate.gpu_hours("high_seconds"))
                        + f") > budget_gpu_hours {budget.gpu_hours:g} ({budget.gpu_hours_from})")
    cost = estimate.cost()
    if budget.cost is not None and cost is not None and cost > budget.cost:
        problems.append(f"estimated cost {cost:.4g} ("
                        + basis.format(low=estimate.cost("low_seconds"), high=estimate.cost("high_seconds"))
                        + f") > budget_cost {budget.cost:g} ({budget.cost_from})")
    if not problems:
        return None
    return (f"refused before any cluster starts: training {estimate.model_name} on {span} "
            f"({len(estimate.days)} day(s), pool {estimate.gpu_pool}) is over its budget: " + "; ".join(problems)
            + "; valid: a shorter range whose estimate is within the budget, or a higher budget "
            "(run config budget_gpu_hours / budget_cost, CLI --budget-gpu-hours / --budget-cost)")


def unchecked(estimate: Estimate, budget: Budget) -> str | None:
    """Why a budget could not be checked (no history, or no cost rate), or None."""
    if not budget.any:
        return None
    if not estimate.known:
        return f"budget not checked: {estimate.note}"
    if budget.cost is not None and estimate.cost() is None:
        return f"budget_cost not checked: pool {estimate.gpu_pool} has no cost rate in the catalog"
    return None
