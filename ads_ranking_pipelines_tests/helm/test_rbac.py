"""The chart grants exactly what the KubeRay backend calls: the Role's rules are
``permissions.rbac_rules()`` read now (not a copy), nothing is granted with ``*``; Secrets appear
only in X-Ray's notebooks Role, bound to X-Ray alone, with ``create``/``delete`` and no read
verb; the Ray pods' service account has no permissions and no token; a ClusterRole exists only
when X-Ray's cross-namespace listing is switched on, and then only reads."""

from __future__ import annotations

import pytest
import yaml

from ads_ranking_pipelines.backends.kuberay import permissions
from ads_ranking_pipelines.backends.kuberay.permissions import (
    KUEUE_PERMISSIONS,
    NOTEBOOK_PERMISSIONS,
    ApiPermission,
    rbac_rules,
)
from ads_ranking_pipelines_tests.helm.chart import VALUE_SETS, all_of, merge, one, render, value_set
from ads_ranking_pipelines_tests.helm.rbac_file import (
    KUEUE_RULES_FILE,
    NOTEBOOK_RULES_FILE,
    README,
    RULES_FILE,
    readme_with_table,
    rules_file_text,
)

KUBERAY_ROLE = "ads-ranking-pipelines-kuberay"
NOTEBOOK_ROLE = "ads-ranking-pipelines-xray-notebooks"

READ_VERBS = {"get", "list", "watch"}


def _grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_rules_file_is_generated_from_the_backend_table() -> None:
    assert RULES_FILE.read_text(encoding="utf-8") == rules_file_text(), (
        "helm/ads-ranking-pipelines/files/kuberay-rbac.yaml is out of date with "
        "backends/kuberay/permissions.py; regenerate it with "
        "`.venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file`")
    assert NOTEBOOK_RULES_FILE.read_text(encoding="utf-8") == rules_file_text(NOTEBOOK_PERMISSIONS), (
        "helm/ads-ranking-pipelines/files/xray-notebook-rbac.yaml is out of date with "
        "NOTEBOOK_PERMISSIONS; regenerate it with "
        "`.venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file`")


def test_readme_verbs_table_is_the_backend_table() -> None:
    text = README.read_text(encoding="utf-8")
    assert text == readme_with_table(text), (
        "the verbs table in helm/README.md is out of date with backends/kuberay/permissions.py; "
        "regenerate it with `.venv/bin/python -m ads_ranking_pipelines_tests.helm.rbac_file`")


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_role_grants_exactly_the_backend_table(name: str) -> None:
    objects = render(value_set(name))
    role = one(objects, "Role", KUBERAY_ROLE)
    assert role["rules"] == rbac_rules()
    assert _grants(role["rules"]) == {p.key for p in permissions.PERMISSIONS}


def test_the_comparison_fails_when_the_table_grows() -> None:
    """A permission added to the backend (e.g. services for notebooks) without regenerating the
    chart's file is caught: the rendered Role no longer equals the table's rules."""
    grown = permissions.PERMISSIONS + (ApiPermission("", "services", "create", "notebooks"),)
    role = one(render(value_set("default")), "Role", KUBERAY_ROLE)
    assert role["rules"] != rbac_rules(grown)
    assert yaml.safe_load(rules_file_text()) == {"rules": role["rules"]}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_no_wildcards_and_secrets_only_for_xray_notebooks(name: str) -> None:
    objects = render(value_set(name))
    for obj in all_of(objects, "Role") + all_of(objects, "ClusterRole"):
        grants = _grants(obj["rules"])
        for group, resource, verb in grants:
            assert "*" not in (group, resource, verb), obj["metadata"]["name"]
            assert verb not in ("escalate", "bind", "impersonate"), obj["metadata"]["name"]
        on_secrets = {v for g, r, v in grants if r.split("/")[0] == "secrets"}
        if obj["kind"] == "Role" and obj["metadata"]["name"] == NOTEBOOK_ROLE:
            assert on_secrets == {"create", "delete"}  # never get, list or watch
        else:
            assert on_secrets == set(), obj["metadata"]["name"]


def test_xray_notebooks_role_is_bound_to_xray_alone() -> None:
    objects = render(value_set("xray"))
    role, binding = one(objects, "Role", NOTEBOOK_ROLE), one(objects, "RoleBinding", NOTEBOOK_ROLE)
    assert role["rules"] == rbac_rules(NOTEBOOK_PERMISSIONS)
    assert _grants(role["rules"]) == {p.key for p in NOTEBOOK_PERMISSIONS} == {
        ("", "services", "create"), ("", "services", "list"), ("", "services", "delete"),
        ("", "secrets", "create"), ("", "secrets", "delete")}
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"]
    assert binding["roleRef"]["name"] == NOTEBOOK_ROLE
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ads-ranking-pipelines-xray",
                                    "namespace": "dagster"}]
    # Not without X-Ray, and not when its notebooks are switched off.
    for values in (value_set("default"), merge(value_set("xray"), {"xray": {"notebooks": False}})):
        assert NOTEBOOK_ROLE not in {o["metadata"]["name"] for o in all_of(render(values), "Role")}


def test_role_lives_in_the_ray_namespace_and_binds_the_run_account() -> None:
    objects = render(value_set("gpu-pools"))
    role, binding = one(objects, "Role", KUBERAY_ROLE), one(objects, "RoleBinding", KUBERAY_ROLE)
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "ray-jobs"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ads-ranking-pipelines",
                                    "namespace": "dagster"}]


def test_ray_pods_account_has_no_permissions_and_no_token() -> None:
    objects = render(value_set("gpu-pools"))
    ray_sa = one(objects, "ServiceAccount", "ads-ranking-pipelines-ray")
    assert ray_sa["metadata"]["namespace"] == "ray-jobs"
    assert ray_sa["automountServiceAccountToken"] is False
    bound = {s["name"] for b in all_of(objects, "RoleBinding") + all_of(objects, "ClusterRoleBinding")
             for s in b["subjects"]}
    assert "ads-ranking-pipelines-ray" not in bound


def test_existing_service_accounts_are_bound_not_created() -> None:
    objects = render(value_set("existing-service-account"))
    assert all_of(objects, "ServiceAccount") == []
    subjects = {s["name"] for s in one(objects, "RoleBinding", KUBERAY_ROLE)["subjects"]}
    assert subjects == {"dagster-ads-ranking", "xray-ads-ranking"}


def test_no_cluster_role_unless_xray_lists_across_namespaces() -> None:
    base = value_set("default")
    for override in ({}, {"xray": {"enabled": True, "tokenSecret": {"name": "t"}}},
                     {"xray": {"crossNamespace": True}}):
        objects = render(merge(base, override))
        assert all_of(objects, "ClusterRole") == all_of(objects, "ClusterRoleBinding") == []


def test_xray_cluster_role_reads_only() -> None:
    objects = render(value_set("xray"))
    cluster_role = one(objects, "ClusterRole")
    expected = {p.key for p in permissions.PERMISSIONS + NOTEBOOK_PERMISSIONS
                if p.verb in READ_VERBS}
    assert ("", "services", "list") in expected  # notebooks in every namespace
    assert _grants(cluster_role["rules"]) == expected
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ads-ranking-pipelines-xray",
                                    "namespace": "dagster"}]
    # X-Ray also creates and deletes clusters in the Ray namespace: it shares the Role.
    assert {s["name"] for s in one(objects, "RoleBinding", KUBERAY_ROLE)["subjects"]} == {
        "ads-ranking-pipelines", "ads-ranking-pipelines-xray"}


def test_code_server_mounts_no_token_xray_does() -> None:
    objects = render(value_set("xray"))
    code = one(objects, "Deployment", "ads-ranking-pipelines")["spec"]["template"]["spec"]
    xray = one(objects, "Deployment", "ads-ranking-pipelines-xray")["spec"]["template"]["spec"]
    assert code["automountServiceAccountToken"] is False
    assert code["serviceAccountName"] == "ads-ranking-pipelines"
    assert xray["automountServiceAccountToken"] is True
    assert xray["serviceAccountName"] == "ads-ranking-pipelines-xray"


def test_kueue_on_adds_only_workload_reads_to_the_role() -> None:
    """kueue.enabled: the Role gains get/list on workloads.kueue.x-k8s.io and get on the
    visibility API's localqueues/pendingworkloads (a queued job's position) (KUEUE_PERMISSIONS,
    via the generated files/kueue-rbac.yaml) and nothing else; off, no Kueue rule at all; no
    LocalQueue/ClusterQueue is rendered."""
    assert KUEUE_RULES_FILE.read_text(encoding="utf-8") == rules_file_text(KUEUE_PERMISSIONS)
    objects = render(merge(value_set("default"), {"kueue": {"enabled": True}}))
    role = one(objects, "Role", KUBERAY_ROLE)
    assert role["rules"] == rbac_rules() + rbac_rules(KUEUE_PERMISSIONS)
    added = _grants(role["rules"]) - {p.key for p in permissions.PERMISSIONS}
    assert added == {("kueue.x-k8s.io", "workloads", "get"), ("kueue.x-k8s.io", "workloads", "list"),
                     ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get")}
    assert not any(o.get("kind") in ("LocalQueue", "ClusterQueue") for o in objects)
    off = one(render(value_set("default")), "Role", KUBERAY_ROLE)
    assert not any(group.endswith("kueue.x-k8s.io") for rule in off["rules"]
                   for group in rule["apiGroups"])
