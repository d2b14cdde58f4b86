"""The fake API server's object store: RayJobs, RayClusters and pods, label selectors,
resource versions, and deletion that honours owner references (foreground: the owner goes
last) after a short delay."""

from __future__ import annotations

import copy
import datetime as dt
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


@dataclass
class _Pod:
    obj: dict[str, Any]
    lines: list[tuple[float, str]] = field(default_factory=list)
    closed: bool = False  # the container has exited: log streams end


class ObjectStore:
    """Objects by ``(plural, namespace, name)`` and pods by ``(namespace, name)``.

    Part of :class:`FakeKubeApiServer`, which creates the state below; every method takes or
    expects :attr:`lock`.
    """

    lock: threading.RLock
    changed: threading.Condition
    deletion_delay_s: float
    objects: dict[tuple[str, str, str], dict[str, Any]]
    pods: dict[tuple[str, str], _Pod]
    sim: dict[tuple[str, str, str], dict[str, Any]]
    deployment_history: dict[str, list[str]]
    created: list[tuple[str, str, str]]
    _pending_deletes: list[tuple[float, str, tuple]]
    _resource_version: int

    # ---- test helpers ------------------------------------------------------------------------
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


    def _cluster_removed(self, key: tuple) -> None:
        """Hook: a RayCluster left the store (the server stops its real Ray, if any)."""

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
        self._record_deployment_status(obj)
        self.changed.notify_all()

    def _record_deployment_status(self, obj: dict[str, Any]) -> None:
        """Every ``jobDeploymentStatus`` a RayJob is written with, in order, by RayJob name: a
        state that lasts one operator tick (Retrying, Suspending) can be missed by a poller."""
        state = (obj.get("status") or {}).get("jobDeploymentStatus") if obj.get("kind") == "RayJob" else None
        if state is None:
            return
        seen = self.deployment_history.setdefault(obj["metadata"]["name"], [])
        if not seen or seen[-1] != state:
            seen.append(state)

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
            if key[0] == "rayclusters":
                self._cluster_removed(key)
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
