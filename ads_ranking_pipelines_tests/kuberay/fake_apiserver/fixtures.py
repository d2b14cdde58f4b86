"""Pytest helpers for the fake API server: the fixture, a client pointed at it, a kubeconfig."""

from __future__ import annotations

from typing import Any

import pytest

from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.server import FakeKubeApiServer


@pytest.fixture
def fake_apiserver() -> "Any":
    """A started fake (skips when the KubeRay CRDs are not available for validation)."""
    crd_schema.require_crds()
    with FakeKubeApiServer() as fake:
        yield fake
        assert not fake.rejected, fake.rejected


def fast_retry(**overrides: Any) -> "Any":
    from ads_ranking_pipelines.backends.kuberay.client import RetryPolicy

    values = {"max_attempts": 5, "initial_delay_s": 0.005, "max_delay_s": 0.02, "jitter": 0.0,
              "max_retry_after_s": 2.0}
    values.update(overrides)
    return RetryPolicy(**values)


def client_for(fake: FakeKubeApiServer, **kwargs: Any) -> "Any":
    """The real ``kubernetes`` client, pointed at the fake, with quick retries."""
    from ads_ranking_pipelines.backends.kuberay.client import KubeRayClient

    kwargs.setdefault("retry", fast_retry())
    kwargs.setdefault("request_timeout_s", 5.0)
    kwargs.setdefault("stream_read_timeout_s", 10.0)
    return KubeRayClient.for_host(fake.url, **kwargs)


def write_kubeconfig(path: "Any", fake: FakeKubeApiServer, context: str = "fake") -> str:
    """A kubeconfig whose ``context`` points at the fake (plus a decoy current context)."""
    import yaml

    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "decoy",
        "clusters": [{"name": "fake", "cluster": {"server": fake.url}},
                     {"name": "decoy", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "tester", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester",
                                                   "namespace": "ads-ranking"}},
                     {"name": "decoy", "context": {"cluster": "decoy", "user": "tester"}}],
    }
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh)
    return str(path)
