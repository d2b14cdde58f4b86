"""The toy KubeRay operator behind the fake API server, modelled on KubeRay v1.7.0: the loop
that runs its controllers, the garbage collector and the kubelet every tick.

Each behaviour names the upstream function it models (ray-project/kuberay at tag v1.7.0,
``ray-operator/controllers/ray/``). What happens to one RayJob or RayCluster is chosen by a
:class:`Scenario`. Times are compressed: a spec field in seconds (``ttlSecondsAfterFinished``,
deletion-rule ``ttlSeconds``, ``preRunningDeadlineSeconds``) lasts ``time_scale`` real seconds
per second.

* :mod:`.raycluster_controller` - RayCluster (raycluster_controller.go): pods, readiness,
  status.
* :mod:`.rayjob_controller` - RayJob (rayjob_controller.go ``Reconcile``): the state machine
  from New to a terminal state, the submitter, deadlines, retries, deletion.
* :mod:`.kueue_controller` - Kueue (kubernetes-sigs/kueue): Workloads, quota, admission,
  preemption for RayJobs and standalone RayClusters labelled ``kueue.x-k8s.io/queue-name``.
* :mod:`.operator_common` - what both share: :class:`Scenario`, the settings they read, pods.
"""

from __future__ import annotations

import threading
import time

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import KueueController
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import (
    OperatorHost,
    Scenario,
    start_due_pods,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.raycluster_controller import (
    RayClusterController,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.rayjob_controller import RayJobController

__all__ = ["Scenario", "ToyOperator"]


class ToyOperator(OperatorHost):
    """Reconciles RayJobs, RayClusters and pods every ``tick_s`` (part of
    :class:`FakeKubeApiServer`, which holds the settings of :class:`OperatorHost`)."""

    tick_s: float
    _stop: threading.Event

    def _operator_loop(self) -> None:
        clusters, jobs = RayClusterController(self), RayJobController(self)
        kueue = KueueController(self)
        while not self._stop.is_set():
            with self.lock:
                now = time.monotonic()
                self._run_due_deletes(now)
                for key in list(self.objects):
                    if key in self.objects:
                        try:
                            if key[0] == "rayjobs":
                                jobs.reconcile(key, now)
                            elif key[0] == "rayclusters":  # not Services/Secrets
                                clusters.reconcile(key, now)
                        except Exception as exc:  # keep the operator alive; surface in tests
                            self.rejected.append(f"operator error on {key}: {exc!r}")
                try:
                    kueue.reconcile(now)
                except Exception as exc:  # keep the operator alive; surface in tests
                    self.rejected.append(f"kueue error: {exc!r}")
                start_due_pods(self, now)
            time.sleep(self.tick_s)

    def _run_due_deletes(self, now: float) -> None:
        """The garbage collector: an object goes once its deletion is due and no finalizer
        other than ``foregroundDeletion`` holds it."""
        keep = []
        for entry in self._pending_deletes:
            obj = self.objects.get(entry[2])
            held = obj is not None and any(f != "foregroundDeletion" for f in
                                           obj["metadata"].get("finalizers") or [])
            if entry[0] <= now and not held:
                self._remove(entry[2])
            else:
                keep.append(entry)
        self._pending_deletes = keep
