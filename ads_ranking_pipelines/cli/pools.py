"""``ads-ranking pools``: the GPU pool catalog a cluster request may name."""

from __future__ import annotations

import os

import typer

from ads_ranking_pipelines.cli import render
from ads_ranking_pipelines.cli.backend_factory import cli_env, make_env
from ads_ranking_pipelines.config.validation import (
    default_worker_resources,
    usable_cpus,
    usable_memory_bytes,
)
from ads_ranking_pipelines.config.quantity import format_memory

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="The GPU pool catalog (ADS_RANKING_POOL_CATALOG overrides the shipped one).")


@app.callback()
def _settings(ctx: typer.Context) -> None:
    ctx.obj = make_env(os.environ)


@app.command("list")
def list_pools(
    ctx: typer.Context,
    output: render.TableOutput = typer.Option(render.TableOutput.table, "--output", "-o",
                                              help="table or json"),
) -> None:
    """Every pool: GPUs, CPUs and memory of one node, what a worker may take, max workers."""
    catalog = cli_env(ctx).catalog
    rows = []
    for pool in sorted(catalog, key=lambda p: p.name):
        rows.append({
            "name": pool.name,
            "default": pool.name == catalog.default_pool,
            "gpu_type": pool.gpu_type,
            "gpu_product": pool.gpu_product,
            "gpus_per_node": pool.gpus_per_node,
            "cpus_per_node": pool.cpus_per_node,
            "memory_per_node": pool.memory_per_node,
            "max_cpus_per_worker": usable_cpus(pool),
            "max_memory_per_worker": format_memory(usable_memory_bytes(pool)),
            "default_cpus_per_gpu": (default_worker_resources(pool, 1)[0] if pool.has_gpus
                                     else None),
            "default_memory_per_gpu": (default_worker_resources(pool, 1)[1] if pool.has_gpus
                                       else None),
            "max_workers": pool.max_workers,
            "machine_type": pool.machine_type,
            "local": pool.local,
            "node_selector": dict(pool.node_selector),
            "max_concurrent_runs": pool.max_concurrent_runs,
            "cost_per_gpu_hour": pool.cost_per_gpu_hour, "cost_per_worker_hour": pool.cost_per_worker_hour,
            "budget_gpu_hours": pool.budget_gpu_hours, "budget_cost": pool.budget_cost,
            "description": " ".join(pool.description.split()),
        })
    if output is render.TableOutput.json:
        render.echo(render.dump({"provider": catalog.provider,
                                  "default_pool": catalog.default_pool, "pools": rows}, "json"))
        return
    render.stdout().print(render.table(
        None,
        ["POOL", "GPU", "GPUS/NODE", "CPUS/NODE", "MEMORY/NODE", "MAX WORKER CPU/MEM",
         "MAX WORKERS", "MACHINE"],
        [[r["name"] + (" (default)" if r["default"] else ""), r["gpu_type"] or "-",
          r["gpus_per_node"], f"{r['cpus_per_node']:g}", r["memory_per_node"],
          f"{r['max_cpus_per_worker']:g} / {r['max_memory_per_worker']}", r["max_workers"],
          r["machine_type"] or ("local" if r["local"] else "-")] for r in rows],
    ))
