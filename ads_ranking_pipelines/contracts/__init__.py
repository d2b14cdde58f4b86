"""The contract between the orchestrator and the Ray workers: serialized job specs (one day,
and a run's day range) and the gate decision both sides take (``gates``).

Pure pydantic models and functions over ``config``; imported by ``defs`` (which writes the
specs and promotes) and by ``ray_jobs`` / ``training`` (which read them and walk the champion
chain). Nothing here imports Dagster, Ray or torch.
"""
