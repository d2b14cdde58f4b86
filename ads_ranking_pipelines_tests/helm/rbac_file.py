"""The chart's copy of the KubeRay backend's RBAC rules (``files/kuberay-rbac.yaml``).

Helm cannot import Python, so the chart reads its Role rules from a file generated from
:func:`ads_ranking_pipelines.backends.kuberay.permissions.rbac_rules`. The helm tests compare
the file and the rendered Role with the table at test time; when the backend's table changes,
regenerate the file::

    .venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ads_ranking_pipelines.backends.kuberay.permissions import rbac_rules

CHART_DIR = Path(__file__).resolve().parents[2] / "helm" / "ads-ranking-pipelines"
RULES_FILE = CHART_DIR / "files" / "kuberay-rbac.yaml"

HEADER = """\
# GENERATED from ads_ranking_pipelines/backends/kuberay/permissions.py (rbac_rules()).
# Do not edit: regenerate with
#   .venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file
# The chart's Role grants exactly these rules; the helm tests fail when they drift.
"""


def rules_file_text() -> str:
    """What ``files/kuberay-rbac.yaml`` must hold for the backend's current table."""
    return HEADER + yaml.safe_dump({"rules": rbac_rules()}, sort_keys=False)


def main() -> int:
    RULES_FILE.write_text(rules_file_text(), encoding="utf-8")
    print(f"wrote {RULES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
