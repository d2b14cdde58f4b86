"""X-Ray's KubeRay settings from the command's options and the environment."""

from __future__ import annotations

from ads_ranking_pipelines.xray.settings import kube_settings


def test_in_cluster_from_the_environment_turns_kuberay_on(tmp_path) -> None:
    """The chart's X-Ray pod has no kubeconfig and passes no --in-cluster; it sets
    ADS_RANKING_KUBE_IN_CLUSTER=true, which must be enough to list its KubeRay clusters."""
    env = {"HOME": str(tmp_path), "ADS_RANKING_KUBE_IN_CLUSTER": "true"}
    kube = kube_settings(env, context=None, in_cluster=False, namespaces=[], kuberay=None)
    assert kube.enabled and kube.in_cluster
    off = kube_settings({"HOME": str(tmp_path)}, context=None, in_cluster=False, namespaces=[],
                        kuberay=None)
    assert not off.enabled and not off.in_cluster
