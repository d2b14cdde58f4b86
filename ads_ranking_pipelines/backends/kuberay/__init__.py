"""The production backend: KubeRay on Kubernetes, behind the same interface as the local one.

A session creates nothing by itself. Each :meth:`KubeRayClusterSession.submit` creates one
``RayJob`` from the shared template (``build_rayjob``); KubeRay creates its RayCluster,
runs the submitter Job (``K8sJobMode``: a pod running ``ray job submit``, whose log *is* the
job's driver log) and deletes the cluster when the job ends. Leaving the session - normally,
on an exception, on a timeout or when the Dagster run is interrupted (``KeyboardInterrupt`` /
``DagsterExecutionInterruptedError``, both ``BaseException``) - deletes every RayJob the
session created (foreground propagation, so their clusters and submitter pods go first) and
waits, bounded, until they are gone.

Only objects this process created are ever deleted by a session: each create carries a random
token annotation (``CREATION_TOKEN_ANNOTATION``) and teardown checks it before deleting.

For the CLI the backend also manages long-lived RayClusters (create / list / describe /
delete, restricted to objects carrying our ``app.kubernetes.io/managed-by`` label) and
submits RayJobs to an existing cluster through ``clusterSelector``.

Environment variables of a job (``JobSpec.env_vars``, e.g. the Dagster Pipes bootstrap) are
written into the RayJob's ``runtimeEnvYAML``: they are visible to whoever can read RayJobs, so
they must not be secrets; they are never logged or put into error messages here.

Modules, one job each:

* :mod:`.status` - RayJob status → JobStatus, failure words, cluster rows (the manifests, their
  names and labels are built in ``ads_ranking_pipelines/kuberay/``)
* :mod:`.client` - the thin Kubernetes client (retries, idempotent create, pod logs, events)
* :mod:`.permissions` - every API permission the client uses (the Helm chart's Role comes from it)
* :mod:`.calls` - API calls with their failures worded as BackendError
* :mod:`.context` - what the operations share: the client, catalog, labels, timing
* :mod:`.health` - why a cluster is not coming up (ReplicaFailure, unschedulable pods)
* :mod:`.rayjobs` - RayJob operations (wait, status, logs, stop, list)
* :mod:`.session` - :class:`KubeRayClusterSession` (submit, status, logs, stop, teardown)
* :mod:`.logs` - following the submitter pod's log: broken streams, retried submitters
* :mod:`.clusters` - long-lived RayClusters and jobs on them (the CLI's operations)
* :mod:`.notebooks` - Jupyter on a long-lived cluster's head: token Secret + Service (X-Ray)
* :mod:`.backend` - :class:`KubeRayBackend`, composing the above over one client
"""

from ads_ranking_pipelines.backends.kuberay.backend import KubeRayBackend, StatusCallback
from ads_ranking_pipelines.backends.kuberay.session import KubeRayClusterSession
from ads_ranking_pipelines.backends.kuberay.status import (
    ClusterInfo,
    cluster_info,
    failure_text,
    job_status_from_rayjob,
)

__all__ = [
    "ClusterInfo", "KubeRayBackend", "KubeRayClusterSession", "StatusCallback", "cluster_info",
    "failure_text", "job_status_from_rayjob",
]
