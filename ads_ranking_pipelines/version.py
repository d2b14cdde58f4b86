"""The code version recorded with every model version."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping

from ads_ranking_pipelines import __version__

CODE_VERSION_ENV = "ADS_RANKING_CODE_VERSION"


@functools.lru_cache(maxsize=1)
def _git_revision() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + (".dirty" if dirty.stdout.strip() else "")


def code_version(environ: Mapping[str, str]) -> str:
    """``ADS_RANKING_CODE_VERSION`` (set by image builds) or ``<package version>+g<git sha>``."""
    if environ.get(CODE_VERSION_ENV):
        return environ[CODE_VERSION_ENV]
    rev = _git_revision()
    return f"{__version__}+g{rev}" if rev else __version__


if __name__ == "__main__":  # `python -m ads_ranking_pipelines.version`: what `make image` records
    print(code_version(os.environ))
