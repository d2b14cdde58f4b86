"""An in-test fake of the Kubernetes API server with a toy KubeRay operator behind it.

A real HTTP server on 127.0.0.1 (one thread per connection) serving the REST paths the real
``kubernetes`` Python client calls for what our code uses:

* ``/apis/ray.io/v1/namespaces/{ns}/{rayjobs|rayclusters}`` - list (``labelSelector``), create
* ``/apis/ray.io/v1/namespaces/{ns}/{plural}/{name}`` - get, delete (``propagationPolicy``)
* ``/apis/ray.io/v1/namespaces/{ns}/{plural}/{name}/status`` - get
* ``/api/v1/namespaces/{ns}/pods`` (``labelSelector``), ``/pods/{name}``, ``/pods/{name}/log``
  (``follow=true`` streams with chunked transfer encoding; ``timestamps``, ``sinceSeconds``)

Errors are ``Status`` objects (404 NotFound, 409 AlreadyExists, 422 Invalid, 400 BadRequest).
Every RayJob and RayCluster created through the API is validated strictly against the KubeRay
v1.7 CRDs (:mod:`crd_schema`); an invalid one is refused with 422 and recorded in
:attr:`FakeKubeApiServer.rejected`.

The operator walks KubeRay's documented RayJob states: ``jobDeploymentStatus`` "" →
Initializing → Running → Complete / Failed, ``jobStatus`` PENDING → RUNNING → SUCCEEDED /
FAILED. It creates the RayCluster (owned by the RayJob, labelled
``ray.io/originated-from-cr-name``), head/worker pods and the submitter pod (labelled
``job-name`` / ``batch.kubernetes.io/job-name`` like the pods of KubeRay's submitter Job), and
deletes the cluster after the job when ``shutdownAfterJobFinishes``. What happens is chosen per
RayJob by a :class:`Scenario` (success, app failure, failed cluster, deadline exceeded, hang).
Deletion honours owner references (foreground: the owner goes last) after a short delay.

Faults are injected with :meth:`FakeKubeApiServer.inject` (status, ``Retry-After``, a number of
times or forever, optionally after the request took effect).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
import re
import string
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ads_ranking_pipelines_tests.kuberay import crd_schema

KINDS = {"rayjobs": "RayJob", "rayclusters": "RayCluster"}

_CR_COLLECTION = re.compile(r"^/apis/ray\.io/v1/namespaces/([^/]+)/(rayjobs|rayclusters)$")
_CR_ITEM = re.compile(r"^/apis/ray\.io/v1/namespaces/([^/]+)/(rayjobs|rayclusters)/([^/]+)(/status)?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)(/log)?$")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamp(t: float) -> str:
    """RFC 3339 with nanoseconds, trailing zeros trimmed as Go's RFC3339Nano does."""
    whole = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{int((t % 1) * 1e9):09d}".rstrip("0")
    return f"{whole}.{frac}Z" if frac else f"{whole}Z"


def _suffix(n: int = 5) -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


# ---- label selectors -----------------------------------------------------------------------
_SET_EXPR = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_selector(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def matches_selector(labels: dict[str, str], selector: str) -> bool:
    """Kubernetes label selector syntax: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``,
    ``k in (a,b)``, ``k notin (a,b)``."""
    for term in _split_selector(selector or ""):
        set_expr = _SET_EXPR.match(term)
        if set_expr:
            key, op, values = set_expr[1], set_expr[2], {v.strip() for v in set_expr[3].split(",")}
            present = key in labels and labels[key] in values
            if (op == "in") != present:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


# ---- behaviour ----------------------------------------------------------------------------
@dataclass
class Scenario:
    """What the toy operator does with one RayJob (or standalone RayCluster).

    ``outcome``: ``succeed`` | ``app_failed`` | ``cluster_failed`` | ``deadline_exceeded`` |
    ``hang`` (the cluster never gets ready, nothing fails). Times are real seconds.
    """

    outcome: str = "succeed"
    log_lines: tuple[str, ...] = ("hello from the driver",)
    cluster_ready_after_s: float = 0.15
    pod_running_after_s: float = 0.05
    line_interval_s: float = 0.01
    hold_running_s: float = 0.0
    cluster_failure_reason: str = (
        'pods "%(cluster)s-head" is forbidden: exceeded quota: gpu-quota, requested: '
        "nvidia.com/gpu=32, used: nvidia.com/gpu=0, limited: nvidia.com/gpu=16")
    app_failure_message: str = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to "
        "20,000 chars):\nValueError: window has no _SUCCESS marker")
    deadline_after_s: float = 0.4
    cluster_cleanup_after_s: float = 0.05


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int | None = 1  # None: forever
    headers: dict[str, str] = field(default_factory=dict)
    after_effect: bool = False  # apply the request, then answer with the fault
    reason: str = ""
    message: str = ""
    hits: int = 0


@dataclass
class _Pod:
    obj: dict[str, Any]
    lines: list[tuple[float, str]] = field(default_factory=list)
    closed: bool = False  # the container has exited: log streams end


class FakeKubeApiServer:
    """Start with ``with FakeKubeApiServer() as fake:``; ``fake.url`` is the API server URL."""

    def __init__(self, *, tick_s: float = 0.01, deletion_delay_s: float = 0.05,
                 validate: bool = True) -> None:
        self.tick_s = tick_s
        self.deletion_delay_s = deletion_delay_s
        self.validate = validate
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.sim: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.scenario = Scenario()
        self.scenarios: dict[str, Scenario] = {}  # by RayJob / RayCluster name
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, int]] = []
        self.rejected: list[str] = []
        self.created: list[tuple[str, str, str]] = []  # (plural, ns, name) created via the API
        self.deleted: list[tuple[str, str, str]] = []  # (plural, ns, name) deleted via the API
        self.break_log_stream_after: int | None = None  # cut the next follow after N lines
        self._pending_deletes: list[tuple[float, str, tuple]] = []
        self._stop = threading.Event()
        self._resource_version = 0
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "FakeKubeApiServer":
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        serve = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                 name="fake-apiserver", daemon=True)
        operator = threading.Thread(target=self._operator_loop, name="fake-kuberay", daemon=True)
        self._threads = [serve, operator]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self.changed:
            self.changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> "FakeKubeApiServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ---- test helpers ------------------------------------------------------------------------
    def inject(self, method: str, path: str, status: int, *, times: int | None = 1,
               headers: dict[str, str] | None = None, after_effect: bool = False,
               reason: str = "", message: str = "") -> Fault:
        """Answer the next ``times`` (None: all) ``method`` requests whose path matches the
        regex ``path`` with ``status``. With ``after_effect`` the request is applied first."""
        fault = Fault(method.upper(), re.compile(path), status, times, dict(headers or {}),
                      after_effect, reason, message)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def seed(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Put an object in the store without the API (someone else's object)."""
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            ns = meta.setdefault("namespace", "default")
            self._stamp_new(meta)
            self.objects[(plural, ns, meta["name"])] = obj
            return obj

    def names(self, plural: str, namespace: str | None = None) -> list[str]:
        with self.lock:
            return sorted(n for (p, ns, n) in self.objects
                          if p == plural and (namespace is None or ns == namespace))

    def leftovers(self) -> list[str]:
        """RayJobs/RayClusters still in the store that were created through the API, or by the
        operator for such a RayJob - i.e. everything a test's code made."""
        with self.lock:
            created = set(self.created)
            left = []
            for key, obj in self.objects.items():
                owners = {o.get("uid") for o in obj["metadata"].get("ownerReferences") or []}
                owner_created = any(self._key_by_uid(uid) in created for uid in owners)
                if key in created or owner_created or obj["metadata"].get("labels", {}).get(
                        "ray.io/originated-from-cr-name") in {n for (_, _, n) in created}:
                    left.append(f"{key[0]}/{key[2]}")
            return sorted(left)

    def pod_names(self, namespace: str | None = None) -> list[str]:
        with self.lock:
            return sorted(n for (ns, n) in self.pods if namespace is None or ns == namespace)

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            obj = self.objects.get((plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def count(self, method: str, path_regex: str) -> int:
        pattern = re.compile(path_regex)
        with self.lock:
            return sum(1 for m, p, _ in self.requests if m == method and pattern.search(p))

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return predicate()

    # ---- store internals (call with the lock held) -------------------------------------------
    def _stamp_new(self, meta: dict[str, Any]) -> None:
        self._resource_version += 1
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        meta["resourceVersion"] = str(self._resource_version)
        meta.setdefault("generation", 1)

    def _touch(self, obj: dict[str, Any]) -> None:
        self._resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self._resource_version)
        self.changed.notify_all()

    def _key_by_uid(self, uid: str | None) -> tuple | None:
        for key, obj in self.objects.items():
            if obj["metadata"].get("uid") == uid:
                return key
        for (ns, name), pod in self.pods.items():
            if pod.obj["metadata"].get("uid") == uid:
                return ("pods", ns, name)
        return None

    def _dependents(self, uid: str) -> list[tuple]:
        deps = []
        for key, obj in self.objects.items():
            if any(o.get("uid") == uid for o in obj["metadata"].get("ownerReferences") or []):
                deps.append(key)
        for (ns, name), pod in self.pods.items():
            if any(o.get("uid") == uid for o in pod.obj["metadata"].get("ownerReferences") or []):
                deps.append(("pods", ns, name))
        return deps

    def _remove(self, key: tuple) -> None:
        """Remove an object and, recursively, everything it owns."""
        if key[0] == "pods":
            pod = self.pods.pop((key[1], key[2]), None)
            if pod is None:
                return
            pod.closed = True
            uid = pod.obj["metadata"]["uid"]
        else:
            obj = self.objects.pop(key, None)
            self.sim.pop(key, None)
            if obj is None:
                return
            uid = obj["metadata"]["uid"]
        for dep in self._dependents(uid):
            self._remove(dep)
        self.changed.notify_all()

    def _schedule_delete(self, key: tuple, policy: str) -> dict[str, Any] | None:
        obj = self.objects.get(key)
        if obj is None:
            return None
        if policy == "Orphan":
            for dep in self._dependents(obj["metadata"]["uid"]):
                dep_obj = self.objects.get(dep) or (self.pods.get(dep[1:]).obj
                                                    if dep[0] == "pods" else None)
                if dep_obj:
                    dep_obj["metadata"]["ownerReferences"] = [
                        o for o in dep_obj["metadata"].get("ownerReferences") or []
                        if o.get("uid") != obj["metadata"]["uid"]]
            self.objects.pop(key, None)
            self.sim.pop(key, None)
            self.changed.notify_all()
            return obj
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_rfc3339()
            if policy == "Foreground":
                meta["finalizers"] = [*meta.get("finalizers", []), "foregroundDeletion"]
            self._pending_deletes.append((time.monotonic() + self.deletion_delay_s, policy, key))
            self._touch(obj)
        return copy.deepcopy(obj)

    # ---- the toy KubeRay operator ------------------------------------------------------------
    def _operator_loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                now = time.monotonic()
                due = [d for d in self._pending_deletes if d[0] <= now]
                self._pending_deletes = [d for d in self._pending_deletes if d[0] > now]
                for _, _, key in due:
                    self._remove(key)
                for key in list(self.objects):
                    if key in self.objects:
                        try:
                            if key[0] == "rayjobs":
                                self._reconcile_job(key, now)
                            else:
                                self._reconcile_cluster(key, now)
                        except Exception as exc:  # keep the operator alive; surface in tests
                            self.rejected.append(f"operator error on {key}: {exc!r}")
                self._reconcile_pods(now)
            time.sleep(self.tick_s)

    def _scenario(self, name: str, owner_job: str | None = None) -> Scenario:
        return self.scenarios.get(name) or (self.scenarios.get(owner_job) if owner_job else None) \
            or self.scenario

    def _reconcile_pods(self, now: float) -> None:
        for pod in self.pods.values():
            status = pod.obj["status"]
            start = pod.obj["_start"]
            if status["phase"] == "Pending" and now >= start:
                status["phase"] = "Running"
                self.changed.notify_all()

    def _new_pod(self, ns: str, name: str, labels: dict[str, str], owner: dict[str, Any],
                 container: str, start_in_s: float) -> _Pod:
        meta = {"name": name, "namespace": ns, "labels": dict(labels),
                "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                     "name": owner["metadata"]["name"],
                                     "uid": owner["metadata"]["uid"], "controller": True,
                                     "blockOwnerDeletion": True}]}
        self._stamp_new(meta)
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"containers": [{"name": container, "image": "rayproject/ray"}]},
               "status": {"phase": "Pending"}, "_start": time.monotonic() + start_in_s}
        pod = _Pod(obj)
        self.pods[(ns, name)] = pod
        return pod

    def _reconcile_cluster(self, key: tuple, now: float) -> None:
        obj = self.objects[key]
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        sim = self.sim.setdefault(key, {"t0": now, "phase": "new"})
        owner_job = (meta.get("labels") or {}).get("ray.io/originated-from-cr-name")
        scenario = self._scenario(key[2], owner_job)
        workers = sum(int(g.get("replicas") or 0) for g in spec.get("workerGroupSpecs") or [])
        status = obj.setdefault("status", {})
        if sim["phase"] == "new":
            head = f"{key[2]}-head-{_suffix()}"
            labels = {**(meta.get("labels") or {}), "ray.io/cluster": key[2],
                      "ray.io/node-type": "head"}
            self._new_pod(key[1], head, labels, obj, "ray-head", scenario.cluster_ready_after_s)
            for i in range(workers):
                labels = {**(meta.get("labels") or {}), "ray.io/cluster": key[2],
                          "ray.io/node-type": "worker", "ray.io/group": "workers"}
                self._new_pod(key[1], f"{key[2]}-workers-worker-{_suffix()}", labels, obj,
                              "ray-worker", scenario.cluster_ready_after_s)
            status.update({"desiredWorkerReplicas": workers, "minWorkerReplicas": workers,
                           "maxWorkerReplicas": workers, "readyWorkerReplicas": 0,
                           "availableWorkerReplicas": 0, "observedGeneration": 1,
                           "lastUpdateTime": now_rfc3339(),
                           "conditions": [{"type": "HeadPodReady", "status": "False",
                                           "reason": "HeadPodNotFound",
                                           "lastTransitionTime": now_rfc3339()}]})
            sim["phase"] = "provisioning"
            self._touch(obj)
        elif sim["phase"] == "provisioning":
            if scenario.outcome == "cluster_failed" and now - sim["t0"] >= scenario.cluster_ready_after_s:
                status.update({"state": "failed",
                               "reason": scenario.cluster_failure_reason % {"cluster": key[2]},
                               "lastUpdateTime": now_rfc3339()})
                sim["phase"] = "failed"
                self._touch(obj)
            elif scenario.outcome not in ("hang", "deadline_exceeded", "cluster_failed") and \
                    now - sim["t0"] >= scenario.cluster_ready_after_s:
                status.update({
                    "state": "ready", "readyWorkerReplicas": workers,
                    "availableWorkerReplicas": workers, "lastUpdateTime": now_rfc3339(),
                    "desiredCPU": "1", "desiredMemory": "4Gi", "desiredGPU": "0", "desiredTPU": "0",
                    "head": {"podIP": "10.0.0.10", "serviceIP": "10.96.0.10",
                             "podName": f"{key[2]}-head", "serviceName": f"{key[2]}-head-svc"},
                    "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379",
                                  "metrics": "8080"},
                    "conditions": [
                        {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                         "lastTransitionTime": now_rfc3339()},
                        {"type": "RayClusterProvisioned", "status": "True",
                         "reason": "AllPodRunningAndReadyFirstTime",
                         "lastTransitionTime": now_rfc3339()}],
                    "stateTransitionTimes": {"ready": now_rfc3339()},
                })
                sim["phase"] = "ready"
                self._touch(obj)

    def _reconcile_job(self, key: tuple, now: float) -> None:
        obj = self.objects[key]
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        ns, name = key[1], key[2]
        scenario = self._scenario(name)
        sim = self.sim.setdefault(key, {"t0": now, "phase": "new"})
        status = obj.setdefault("status", {})
        if sim["phase"] in ("done",):
            if sim.get("cleanup_at") and now >= sim["cleanup_at"]:
                sim["cleanup_at"] = None
                ckey = ("rayclusters", ns, status.get("rayClusterName", ""))
                if ckey in self.objects:
                    self._remove(ckey)
            return
        if sim["phase"] == "new":
            status.update({"jobDeploymentStatus": "Initializing", "jobId": spec.get("jobId") or
                           f"rayjob-{_suffix(8)}", "startTime": now_rfc3339(),
                           "observedGeneration": 1, "succeeded": 0, "failed": 0})
            selector = spec.get("clusterSelector") or {}
            if selector:
                status["rayClusterName"] = selector.get("ray.io/cluster", "")
            else:
                cname = f"{name}-{_suffix()}"
                labels = {**(meta.get("labels") or {}), "ray.io/originated-from-crd": "RayJob",
                          "ray.io/originated-from-cr-name": name}
                cmeta = {"name": cname, "namespace": ns, "labels": labels,
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                                              "name": name, "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]}
                self._stamp_new(cmeta)
                cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": cmeta,
                           "spec": copy.deepcopy(spec.get("rayClusterSpec") or {})}
                if self.validate:
                    errors = crd_schema.schema_errors(cluster)
                    if errors:
                        self.rejected.append(f"operator-made RayCluster {cname}: {errors}")
                self.objects[("rayclusters", ns, cname)] = cluster
                status["rayClusterName"] = cname
            sim["phase"] = "initializing"
            self._touch(obj)
            return
        # The active deadline runs from the start, whatever the phase.
        if scenario.outcome == "deadline_exceeded" and now - sim["t0"] >= scenario.deadline_after_s:
            status.update({
                "jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded",
                "message": f"The RayJob has passed the activeDeadlineSeconds. StartTime: "
                           f"{status.get('startTime')}. ActiveDeadlineSeconds: "
                           f"{spec.get('activeDeadlineSeconds')}",
                "endTime": now_rfc3339(), "failed": 1})
            self._finish(key, obj, sim, now, scenario, succeeded=False)
            return
        cluster_key = ("rayclusters", ns, status.get("rayClusterName", ""))
        cluster = self.objects.get(cluster_key)
        if sim["phase"] == "initializing":
            if cluster is not None:
                status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
            if cluster is not None and (cluster.get("status") or {}).get("state") == "ready":
                status.update({"jobDeploymentStatus": "Running", "jobStatus": "PENDING",
                               "dashboardURL": f"{cluster_key[2]}-head-svc.{ns}.svc.cluster.local:8265"})
                labels = {**((spec.get("submitterPodTemplate") or {}).get("metadata") or {})
                          .get("labels", {}), "job-name": name, "batch.kubernetes.io/job-name": name}
                pod = self._new_pod(ns, f"{name}-{_suffix()}", labels, obj, "ray-job-submitter",
                                    scenario.pod_running_after_s)
                sim.update(phase="submitted", pod=(ns, pod.obj["metadata"]["name"]), line=0,
                           next_line_at=now + scenario.pod_running_after_s)
                self._touch(obj)
            elif status.get("rayClusterStatus", {}).get("state") == "failed" and \
                    not sim.get("cluster_failure_seen"):
                sim["cluster_failure_seen"] = True
                self._touch(obj)
            return
        pod = self.pods.get(sim["pod"])
        if sim["phase"] == "submitted":
            if pod is not None and pod.obj["status"]["phase"] == "Running":
                status["jobStatus"] = "RUNNING"
                status["rayJobInfo"] = {"startTime": now_rfc3339()}
                sim["phase"] = "running"
                sim["running_at"] = now
                self._touch(obj)
            return
        if sim["phase"] == "running":
            if pod is None:
                return
            if sim["line"] < len(scenario.log_lines):
                if now >= sim["next_line_at"]:
                    pod.lines.append((time.time(), scenario.log_lines[sim["line"]]))
                    sim["line"] += 1
                    sim["next_line_at"] = now + scenario.line_interval_s
                    self.changed.notify_all()
                return
            if scenario.outcome in ("hang",) or now - sim["running_at"] < scenario.hold_running_s:
                return
            if scenario.outcome == "app_failed":
                status.update({"jobStatus": "FAILED", "jobDeploymentStatus": "Failed",
                               "reason": "AppFailed", "message": scenario.app_failure_message,
                               "endTime": now_rfc3339(), "failed": 1})
                pod.obj["status"]["phase"] = "Failed"
                self._finish(key, obj, sim, now, scenario, succeeded=False)
            else:
                status.update({"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete",
                               "message": "Job finished successfully.", "endTime": now_rfc3339(),
                               "succeeded": 1})
                pod.obj["status"]["phase"] = "Succeeded"
                self._finish(key, obj, sim, now, scenario, succeeded=True)

    def _finish(self, key: tuple, obj: dict, sim: dict, now: float, scenario: Scenario,
                succeeded: bool) -> None:
        pod = self.pods.get(sim.get("pod") or ("", ""))
        if pod is not None:
            pod.closed = True
            if pod.obj["status"]["phase"] in ("Pending", "Running"):
                pod.obj["status"]["phase"] = "Succeeded" if succeeded else "Failed"
        sim["phase"] = "done"
        if (obj.get("spec") or {}).get("shutdownAfterJobFinishes") and \
                not (obj.get("spec") or {}).get("clusterSelector"):
            sim["cleanup_at"] = now + scenario.cluster_cleanup_after_s
        self._touch(obj)

    # ---- request handling (called by the handler) --------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any
               ) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            fault = None
            for f in self.faults:
                if f.method == method and f.path.search(path) and (f.times is None or f.times > 0):
                    fault = f
                    if f.times is not None:
                        f.times -= 1
                    f.hits += 1
                    break
            if fault is not None and not fault.after_effect:
                return self._fault_answer(fault)
            code, payload, headers = self._route(method, path, query, body)
            if fault is not None:
                return self._fault_answer(fault)
            return code, payload, headers

    @staticmethod
    def _fault_answer(fault: Fault) -> tuple[int, Any, dict[str, str]]:
        reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                   504: "Timeout", 409: "AlreadyExists", 403: "Forbidden"}
        reason = fault.reason or reasons.get(fault.status, "InternalError")
        message = fault.message or f"injected fault: HTTP {fault.status}"
        return fault.status, status_body(fault.status, reason, message), dict(fault.headers)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any
               ) -> tuple[int, Any, dict[str, str]]:
        selector = (query.get("labelSelector") or [""])[0]
        if m := _CR_COLLECTION.match(path):
            ns, plural = m[1], m[2]
            if method == "GET":
                items = [copy.deepcopy(o) for (p, n, _), o in sorted(self.objects.items())
                         if p == plural and n == ns
                         and matches_selector(o["metadata"].get("labels") or {}, selector)]
                return 200, {"apiVersion": "ray.io/v1", "kind": KINDS[plural] + "List",
                             "metadata": {"resourceVersion": str(self._resource_version)},
                             "items": items}, {}
            if method == "POST":
                return self._create(ns, plural, body, query)
        if m := _CR_ITEM.match(path):
            ns, plural, name, sub = m[1], m[2], m[3], m[4]
            key = (plural, ns, name)
            obj = self.objects.get(key)
            if obj is None:
                return 404, status_body(404, "NotFound",
                                        f'{plural}.ray.io "{name}" not found',
                                        {"name": name, "group": "ray.io", "kind": plural}), {}
            if method == "GET":
                return 200, copy.deepcopy(obj), {}
            if method == "DELETE" and not sub:
                policy = (query.get("propagationPolicy") or [None])[0] or \
                    (body or {}).get("propagationPolicy") or "Background"
                self.deleted.append(key)
                return 200, self._schedule_delete(key, policy), {}
        if m := _PODS.match(path):
            if method == "GET":
                ns = m[1]
                items = [self._pod_view(p) for (n, _), p in sorted(self.pods.items())
                         if n == ns and matches_selector(p.obj["metadata"].get("labels") or {},
                                                         selector)]
                return 200, {"apiVersion": "v1", "kind": "PodList",
                             "metadata": {"resourceVersion": str(self._resource_version)},
                             "items": items}, {}
        if m := _POD.match(path):
            ns, name, log_ = m[1], m[2], m[3]
            pod = self.pods.get((ns, name))
            if pod is None:
                return 404, status_body(404, "NotFound", f'pods "{name}" not found'), {}
            if method == "GET" and not log_:
                return 200, self._pod_view(pod), {}
            if method == "GET" and log_:
                if pod.obj["status"]["phase"] == "Pending":
                    container = pod.obj["spec"]["containers"][0]["name"]
                    return 400, status_body(400, "BadRequest",
                                            f'container "{container}" in pod "{name}" is waiting '
                                            "to start: ContainerCreating"), {}
                return 200, ("LOG", pod), {}
        return 404, status_body(404, "NotFound", f"the server could not find the requested "
                                f"resource ({method} {path})"), {}

    @staticmethod
    def _pod_view(pod: _Pod) -> dict[str, Any]:
        return {k: copy.deepcopy(v) for k, v in pod.obj.items() if not k.startswith("_")}

    def _create(self, ns: str, plural: str, body: Any, query: dict[str, list[str]]
                ) -> tuple[int, Any, dict[str, str]]:
        kind = KINDS[plural]
        if not isinstance(body, dict):
            return 400, status_body(400, "BadRequest", "the body is not a JSON object"), {}
        obj = copy.deepcopy(body)
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if obj.get("apiVersion") != "ray.io/v1" or obj.get("kind") != kind:
            return 400, status_body(400, "BadRequest",
                                    f"expected ray.io/v1 {kind}, got {obj.get('apiVersion')} "
                                    f"{obj.get('kind')}"), {}
        if not name or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name):
            return 422, status_body(422, "Invalid", f'{kind}.ray.io "{name}" is invalid: '
                                    "metadata.name: Invalid value"), {}
        if meta.get("namespace", ns) != ns:
            return 400, status_body(400, "BadRequest", "the namespace of the provided object "
                                    "does not match the namespace sent on the request"), {}
        if self.validate:
            errors = crd_schema.schema_errors(obj)
            if errors:
                self.rejected.append(f"{kind} {name}: " + "; ".join(errors))
                return 422, status_body(422, "Invalid", f'{kind}.ray.io "{name}" is invalid: '
                                        + "; ".join(errors)), {}
        if (plural, ns, name) in self.objects:
            return 409, status_body(409, "AlreadyExists",
                                    f'{plural}.ray.io "{name}" already exists',
                                    {"name": name, "group": "ray.io", "kind": plural}), {}
        obj.pop("status", None)  # the status subresource ignores status on create
        meta["namespace"] = ns
        obj["metadata"] = meta
        self._stamp_new(meta)
        self.objects[(plural, ns, name)] = obj
        self.created.append((plural, ns, name))
        self.changed.notify_all()
        return 201, copy.deepcopy(obj), {}

    # ---- log streaming -----------------------------------------------------------------------
    def log_text(self, pod: _Pod, query: dict[str, list[str]]) -> str:
        stamps = (query.get("timestamps") or ["false"])[0].lower() in ("true", "1")
        since = (query.get("sinceSeconds") or [None])[0]
        cutoff = time.time() - float(since) if since else None
        return "".join(self._format(t, line, stamps) for t, line in pod.lines
                       if cutoff is None or t >= cutoff)

    @staticmethod
    def _format(t: float, line: str, stamps: bool) -> str:
        return f"{_stamp(t)} {line}\n" if stamps else f"{line}\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeKubeApiServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(self, code: int, payload: Any, headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, method: str) -> None:
        fake = self.server_fake
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        body = self._body()
        code, payload, headers = fake.handle(method, parts.path, query, body)
        with fake.lock:
            fake.requests.append((method, parts.path, code))
        if isinstance(payload, tuple) and payload and payload[0] == "LOG":
            self._send_log(payload[1], query)
            return
        self._send_json(code, payload, headers)

    def _send_log(self, pod: _Pod, query: dict[str, list[str]]) -> None:
        fake = self.server_fake
        follow = (query.get("follow") or ["false"])[0].lower() in ("true", "1")
        stamps = (query.get("timestamps") or ["false"])[0].lower() in ("true", "1")
        if not follow:
            data = fake.log_text(pod, query).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with fake.lock:
            since = (query.get("sinceSeconds") or [None])[0]
            cutoff = time.time() - float(since) if since else None
            index = 0
            if cutoff is not None:
                while index < len(pod.lines) and pod.lines[index][0] < cutoff:
                    index += 1
            break_after = fake.break_log_stream_after
            fake.break_log_stream_after = None
        sent = 0
        try:
            while True:
                with fake.changed:
                    while index >= len(pod.lines) and not pod.closed and not fake._stop.is_set():
                        fake.changed.wait(timeout=0.1)
                    batch = pod.lines[index:]
                    index = len(pod.lines)
                    done = pod.closed or fake._stop.is_set()
                for t, line in batch:
                    if break_after is not None and sent >= break_after:
                        # Cut the connection mid-stream, without the terminating chunk.
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    chunk = FakeKubeApiServer._format(t, line, stamps).encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    sent += 1
                if done and index >= len(pod.lines):
                    break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")


# ---- pytest helpers ---------------------------------------------------------------------------
import pytest  # noqa: E402


@pytest.fixture
def fake_apiserver() -> "Any":
    """A started fake (skips when the KubeRay CRDs are not available for validation)."""
    crd_schema.require_crds()
    with FakeKubeApiServer() as fake:
        yield fake
        assert not fake.rejected, fake.rejected


def fast_retry(**overrides: Any) -> "Any":
    from ads_ranking_pipelines.kuberay.client import RetryPolicy

    values = {"max_attempts": 5, "initial_delay_s": 0.005, "max_delay_s": 0.02, "jitter": 0.0,
              "max_retry_after_s": 2.0}
    values.update(overrides)
    return RetryPolicy(**values)


def client_for(fake: FakeKubeApiServer, **kwargs: Any) -> "Any":
    """The real ``kubernetes`` client, pointed at the fake, with quick retries."""
    from ads_ranking_pipelines.kuberay.client import KubeRayClient

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
