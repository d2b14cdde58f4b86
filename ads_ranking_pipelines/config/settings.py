"""Process-level settings, read from an environment mapping that the caller passes in.

Nothing here reads ``os.environ`` at import: resources, the CLI and the UI call
``Settings.from_environ(os.environ)`` when they are built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

HOME_ENV = "ADS_RANKING_HOME"
CATALOG_ENV = "ADS_RANKING_POOL_CATALOG"
DEFAULT_HOME = ".ads_ranking"


@dataclass(frozen=True)
class Settings:
    home: str                      # storage root URI (local path or s3://, gs://)
    pool_catalog: str | None       # override of the shipped pool catalog
    state_dir: str                 # local-backend cluster state files (always a local path)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        home = environ.get(HOME_ENV) or os.path.abspath(DEFAULT_HOME)
        local_home = home if "://" not in home else os.path.abspath(DEFAULT_HOME)
        return cls(home=home, pool_catalog=environ.get(CATALOG_ENV) or None,
                   state_dir=os.path.join(local_home, "clusters"))
