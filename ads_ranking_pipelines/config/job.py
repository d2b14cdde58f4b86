"""What one Ray job is, whatever runs it: the local backend submits it to Ray's job API, the
KubeRay backend writes it into a RayJob (``kuberay/job_fields.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobSpec:
    """One Ray job. ``env_vars`` may carry secrets (Pipes bootstrap): never log them."""

    submission_id: str
    entrypoint: str
    env_vars: dict[str, str] = field(default_factory=dict, repr=False)
    working_dir: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    entrypoint_num_cpus: float = 0.0
