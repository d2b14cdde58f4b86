"""The chart's copy of the KubeRay backend's RBAC rules (``files/kuberay-rbac.yaml``) and the
verbs table in ``helm/README.md``.

Helm cannot import Python, so the chart reads its Role rules from a file generated from
:func:`ads_ranking_pipelines.backends.kuberay.permissions.rbac_rules`. The helm tests compare
the file, the README table and the rendered Role with the table at test time; when the
backend's table changes, regenerate both::

    .venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ads_ranking_pipelines.backends.kuberay.permissions import (
    KUEUE_PERMISSIONS,
    NOTEBOOK_PERMISSIONS,
    PERMISSIONS,
    ApiPermission,
    rbac_rules,
)

CHART_DIR = Path(__file__).resolve().parents[2] / "helm" / "ads-ranking-pipelines"
RULES_FILE = CHART_DIR / "files" / "kuberay-rbac.yaml"
NOTEBOOK_RULES_FILE = CHART_DIR / "files" / "xray-notebook-rbac.yaml"
KUEUE_RULES_FILE = CHART_DIR / "files" / "kueue-rbac.yaml"
README = CHART_DIR.parent / "README.md"
TABLE_START, TABLE_END = "<!-- rbac-table:start -->\n", "<!-- rbac-table:end -->"
NOTEBOOK_TABLE_START = "<!-- xray-notebook-rbac-table:start -->\n"
NOTEBOOK_TABLE_END = "<!-- xray-notebook-rbac-table:end -->"
KUEUE_TABLE_START = "<!-- kueue-rbac-table:start -->\n"
KUEUE_TABLE_END = "<!-- kueue-rbac-table:end -->"

HEADER = """\
# GENERATED from ads_ranking_pipelines/backends/kuberay/permissions.py (rbac_rules()).
# Do not edit: regenerate with
#   .venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file
# The chart's Role grants exactly these rules; the helm tests fail when they drift.
"""


def rules_file_text(permissions: tuple[ApiPermission, ...] = PERMISSIONS) -> str:
    """What ``files/kuberay-rbac.yaml`` (or, for :data:`NOTEBOOK_PERMISSIONS`,
    ``files/xray-notebook-rbac.yaml``) must hold for the backend's current table."""
    if permissions is PERMISSIONS:
        header = HEADER
    elif permissions is KUEUE_PERMISSIONS:
        header = HEADER.replace("(rbac_rules())", "(rbac_rules(KUEUE_PERMISSIONS))").replace(
            "The chart's Role grants", "With kueue.enabled the chart's Role also grants")
    else:
        header = HEADER.replace("(rbac_rules())", "(rbac_rules(NOTEBOOK_PERMISSIONS))").replace(
            "The chart's Role", "X-Ray's notebooks Role")
    return header + yaml.safe_dump({"rules": rbac_rules(permissions)}, sort_keys=False)


def readme_table(permissions: tuple[ApiPermission, ...] = PERMISSIONS) -> str:
    """A verbs table of helm/README.md: one row per rule of :func:`rbac_rules`."""
    rows = ["| API group | resource | verbs | used for |", "| --- | --- | --- | --- |"]
    for rule in rbac_rules(permissions):
        (group,), (resource,) = rule["apiGroups"], rule["resources"]
        why: list[str] = []
        for p in permissions:
            if (p.group, p.resource) == (group, resource):
                why += [w.strip() for w in p.why.split(";") if w.strip() not in why]
        rows.append(f"| {f'`{group}`' if group else 'core'} | `{resource}` | {', '.join(rule['verbs'])} "
                    f"| {'; '.join(dict.fromkeys(why))} |")
    return "\n".join(rows) + "\n"


def readme_with_table(text: str) -> str:
    for (begin, end), permissions in (((TABLE_START, TABLE_END), PERMISSIONS),
                                      ((NOTEBOOK_TABLE_START, NOTEBOOK_TABLE_END),
                                       NOTEBOOK_PERMISSIONS),
                                      ((KUEUE_TABLE_START, KUEUE_TABLE_END), KUEUE_PERMISSIONS)):
        start = text.index(begin) + len(begin)
        text = text[:start] + readme_table(permissions) + text[text.index(end):]
    return text


def main() -> int:
    RULES_FILE.write_text(rules_file_text(), encoding="utf-8")
    NOTEBOOK_RULES_FILE.write_text(rules_file_text(NOTEBOOK_PERMISSIONS), encoding="utf-8")
    KUEUE_RULES_FILE.write_text(rules_file_text(KUEUE_PERMISSIONS), encoding="utf-8")
    README.write_text(readme_with_table(README.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {RULES_FILE}, {NOTEBOOK_RULES_FILE} and the tables in {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
