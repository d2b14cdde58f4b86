"""``import ray``, which every Ray process runs first, pays for nothing our environment adds.

Every Ray worker, actor, job supervisor and job driver, and the Python daemons of every node,
starts by importing ray, on a daily run's 2 CPUs dozens of times. Ray imports jsonschema, and
jsonschema 4.24+ imports rfc3987-syntax when it is installed (JupyterLab's jupyter-events pulls it
in), which builds a Lark grammar at import: 1.5 CPU-seconds per process, `import ray` 1.9-2.3 s
instead of 0.4-0.6 s (measured). pyproject.toml keeps jsonschema below 4.24.
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_ray_builds_no_grammar() -> None:
    probe = ("import json, sys; import ray; "
             "print(json.dumps(sorted(m for m in ('rfc3987_syntax', 'lark') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
