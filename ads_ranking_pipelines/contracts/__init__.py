"""The contract between the orchestrator and the Ray workers: serialized job specs.

Pure pydantic models over ``config``; imported by ``defs`` (which writes them) and by
``ray_jobs`` / ``training`` (which read them). Nothing here imports Dagster, Ray or torch.
"""
