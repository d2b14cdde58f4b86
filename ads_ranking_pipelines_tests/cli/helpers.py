"""Running ``ads-ranking`` as a subprocess, the way a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# A project image (the stock rayproject/ray image is refused on the KubeRay path).
RAY_IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "ADS_RANKING_BACKEND", "ADS_RANKING_POOL_CATALOG", "KUBECONFIG")}
    env.update({"ADS_RANKING_HOME": str(tmp_path / "ads_home"), "ADS_RANKING_OWNER": "tester",
                "ADS_RANKING_RAY_IMAGE": RAY_IMAGE, "COLUMNS": "200", "PYTHONUNBUFFERED": "1",
                # a native crash (SIGSEGV/SIGABRT) prints every thread's Python stack to stderr
                "PYTHONFAULTHANDLER": "1"})
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ads_ranking_pipelines.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=REPO_ROOT, stdin=subprocess.DEVNULL)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def ok_json(result: subprocess.CompletedProcess) -> Any:
    return json.loads(ok(result).stdout)
