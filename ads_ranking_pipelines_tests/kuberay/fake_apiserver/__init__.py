"""An in-test fake of the Kubernetes API server with a toy KubeRay operator behind it.

A real HTTP server on 127.0.0.1 serving the REST paths the real ``kubernetes`` Python client
calls for what our code uses (RayJobs, RayClusters, pods and pod logs), validating every
RayJob and RayCluster strictly against the KubeRay v1.7 CRDs, with a toy operator that walks
KubeRay's documented RayJob states as a :class:`Scenario` says, and injectable faults
(:meth:`FakeKubeApiServer.inject`: status, ``Retry-After``, a number of times or forever,
optionally after the request took effect).

Modules, one job each:

* :mod:`.server` - the HTTP server, its lifecycle and log streaming
* :mod:`.routes` - the REST paths and their answers
* :mod:`.store` - the object store, label selectors, owner-reference deletion
* :mod:`.toy_operator` - the toy KubeRay operator: the loop that runs its controllers
* :mod:`.raycluster_controller` - its RayCluster controller (pods, readiness, status)
* :mod:`.rayjob_controller` - its RayJob controller (the state machine, deletion)
* :mod:`.submitter` - the RayJob's submitter Job: its pods and what they print
  (:mod:`.submitter_output`: the text, as KubeRay's submitter command and Ray's CLI print it)
* :mod:`.operator_common` - what they share: :class:`Scenario`, their settings, pods
* :mod:`.kueue_controller`, :mod:`.kueue_routes`, :mod:`.kueue_visibility` - a toy Kueue:
  Workloads for queued RayJobs and RayClusters, quota, admission, preemption; its REST paths
  and its visibility API (pending Workloads and their positions)
* :mod:`.faults` - fault injection
* :mod:`.fixtures` - the ``fake_apiserver`` fixture, a client and a kubeconfig for it
"""

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.faults import Fault
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.fixtures import (
    client_for,
    fake_apiserver,
    fast_retry,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.routes import KINDS, status_body
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.server import FakeKubeApiServer
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import matches_selector, now_rfc3339
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.toy_operator import Scenario

__all__ = [
    "KINDS", "FakeKubeApiServer", "Fault", "Scenario", "client_for", "fake_apiserver",
    "fast_retry", "matches_selector", "now_rfc3339", "status_body", "write_kubeconfig",
]
