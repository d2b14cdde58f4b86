"""A real ``ads-ranking xray serve`` process and a real headless Chromium (Debian's package,
driven by Playwright; Playwright never downloads a browser here)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from ads_ranking_pipelines.backends.ports import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "ads_ranking_pipelines_tests" / "artifacts" / "xray"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    """Debian's chromium, else the test fails saying how to get it (``make test`` installs it
    where it may: scripts/test_prereqs.sh): a browser test never silently skips."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if not path:
        pytest.fail("browser tests need Debian's chromium: sudo apt-get install -y chromium "
                    "(make test installs it where this user may)", pytrace=False)
    return path


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: object, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path


def xray_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "ADS_RANKING_BACKEND", "ADS_RANKING_POOL_CATALOG",
                        "KUBECONFIG", "ADS_RANKING_XRAY_TOKEN")}
    env.update({"ADS_RANKING_HOME": str(home), "ADS_RANKING_OWNER": "alice",
                "DAGSTER_HOME": str(home / "dagster"), "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


class XrayServer:
    """``ads-ranking xray serve`` in its own process group, stopped by PID."""

    def __init__(self, env: dict[str, str], *args: str, log_path: Path) -> None:
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "xray", "serve",
             "--port", str(self.port), *args],
            env=env, cwd=REPO_ROOT, stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self, timeout_s: float = 60) -> "XrayServer":
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"xray serve exited {self.proc.returncode}: {self.log()}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.3)
        raise RuntimeError(f"xray serve did not answer within {timeout_s}s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self._log.close()


def wait_until(predicate, timeout_s: float, interval_s: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} not met within {timeout_s}s")
