"""The notebook pieces of the template (``kuberay/notebook.py``): the RayCluster with notebook
support stays strictly valid against the KubeRay CRD, the operator rules and the restricted Pod
Security Standard, and names the token Secret without holding a token; the Service and the
Secret are valid v1 objects owned by the RayCluster, selecting the head pod on the Jupyter
port."""

from __future__ import annotations

import subprocess

import kubernetes_validate
import pytest

from ads_ranking_pipelines.kuberay import rules
from ads_ranking_pipelines.kuberay.notebook import (
    LABEL_NOTEBOOK,
    NOTEBOOK_PORT,
    OVERWRITE_CMD_ANNOTATION,
    TOKEN_DIR,
    has_notebook_support,
    jupyter_command,
    notebook_secret,
    notebook_service,
    owner_reference,
    with_notebook,
)
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.cases import CASES, Case
from ads_ranking_pipelines_tests.kuberay.pod_security import (
    as_pod,
    kubernetes_version,
    pod_templates,
    restricted_violations,
    validate_pod,
)
from ads_ranking_pipelines_tests.kuberay.golden import render

IDS = [c.name for c in CASES]
UID = "6c9d7b1a-0000-4000-8000-00000000abcd"
TOKEN = "tok-" + "x" * 40


def live(case: Case) -> dict:
    """The RayCluster as the API server answers it (with a uid)."""
    cluster = with_notebook(render(case)["raycluster"])
    cluster["metadata"]["uid"] = UID
    return cluster


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_raycluster_with_notebook_is_valid(case: Case) -> None:
    original = render(case)["raycluster"]
    manifest = with_notebook(original)
    crd_schema.assert_valid(manifest, strict=True)
    rules.check_raycluster(manifest)
    for role, template in pod_templates(manifest):
        validate_pod(as_pod(template, f"{case.request.name}-{role}"))
        assert restricted_violations(template["spec"]) == [], role
    pod = manifest["spec"]["headGroupSpec"]["template"]["spec"]
    head = pod["containers"][0]
    assert manifest["metadata"]["annotations"][OVERWRITE_CMD_ANNOTATION] == "true"
    assert has_notebook_support(manifest) and not has_notebook_support(original)
    assert {"containerPort": NOTEBOOK_PORT, "name": "jupyter", "protocol": "TCP"} in head["ports"]
    assert head["command"] == ["/bin/bash", "-lc", "--"]
    assert head["args"][0].endswith("& $KUBERAY_GEN_RAY_START_CMD")
    volume = next(v for v in pod["volumes"] if v["name"] == "notebook-token")
    assert volume["secret"]["secretName"] == f"{case.request.name}-notebook-token"
    assert volume["secret"]["optional"] is True  # the head starts before any notebook
    assert {"name": "notebook-token", "mountPath": TOKEN_DIR, "readOnly": True} in head["volumeMounts"]
    assert not any(e["name"].startswith("JUPYTER") for e in head.get("env", []))
    # Workers are untouched and the input is not modified.
    assert manifest["spec"]["workerGroupSpecs"] == original["spec"]["workerGroupSpecs"]
    assert "annotations" not in original["metadata"]
    assert LABEL_NOTEBOOK not in original["metadata"]["labels"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_notebook_service_and_secret_are_valid_and_owned_by_the_cluster(case: Case) -> None:
    cluster = live(case)
    service = notebook_service(cluster, owner="Bob <bob@example.com>", started_at="2026-12-01T09:00:00+00:00")
    secret = notebook_secret(cluster, TOKEN)
    for obj in (service, secret):
        kubernetes_validate.validate(obj, kubernetes_version(), strict=True)
        assert obj["metadata"]["namespace"] == cluster["metadata"]["namespace"]
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": case.request.name, "uid": UID}]
        assert len(obj["metadata"]["name"]) <= 63
        labels = obj["metadata"]["labels"]
        assert not any(k.startswith("ray.io/") for k in labels)  # KubeRay's head-svc lookup
        assert labels["app.kubernetes.io/component"] == "notebook"
        assert labels["ads-ranking.io/owner"] == cluster["metadata"]["labels"]["ads-ranking.io/owner"]
    assert service["metadata"]["name"] == f"{case.request.name}-notebook"
    assert service["spec"]["selector"] == {"ray.io/cluster": case.request.name,
                                           "ray.io/node-type": "head"}
    (port,) = service["spec"]["ports"]
    assert port["port"] == NOTEBOOK_PORT and port["targetPort"] == "jupyter"
    assert service["metadata"]["annotations"]["ads-ranking.io/notebook-owner"] == "Bob <bob@example.com>"
    assert TOKEN not in str(service) and TOKEN not in str(cluster)
    assert secret["stringData"] == {"token": TOKEN}


def test_owner_reference_needs_the_live_object() -> None:
    with pytest.raises(ValueError, match="has no uid"):
        owner_reference(render(CASES[0])["raycluster"])


def test_with_notebook_is_idempotent() -> None:
    cluster = render(CASES[0])["raycluster"]
    once = with_notebook(cluster)
    assert with_notebook(once) == once


def test_supervisor_line_is_valid_bash() -> None:
    """``bash -n`` parses the head's command line (the supervisor loop and Ray's start)."""
    subprocess.run(["bash", "-n", "-c", jupyter_command()], check=True)


def test_supervisor_runs_jupyter_only_while_the_token_file_exists(tmp_path) -> None:
    """The head's command line, run by bash with a stand-in ``jupyter`` on PATH and a stand-in
    Ray: Jupyter starts when the Secret's file appears (reading the token from the file, never
    from its environment), stops when the file goes, starts again for a new token."""
    import os
    import signal
    import time

    bin_dir, token_file, seen = tmp_path / "bin", tmp_path / "token", tmp_path / "seen"
    bin_dir.mkdir()
    (bin_dir / "jupyter").write_text(
        "#!/bin/bash\n"
        f'echo "start file=$JUPYTER_TOKEN_FILE ray=$RAY_ADDRESS env_token=${{JUPYTER_TOKEN:-none}}" >> {seen}\n'
        "exec sleep 3601\n")
    (bin_dir / "jupyter").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "KUBERAY_GEN_RAY_START_CMD": "sleep 3600"}     # the stand-in Ray outlives the test

    def clean_signals() -> None:
        # A container's shell starts with no signal blocked. This test process may have
        # SIGTERM blocked (in-process Ray of an earlier test; a child inherits the mask), and
        # then the supervisor's `kill` could never stop the stand-in Jupyter (CI, twice).
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)

    proc = subprocess.Popen(["bash", "-c", jupyter_command(token_file=str(token_file), poll_s=0.1)],
                            env=env, start_new_session=True, preexec_fn=clean_signals)

    def jupyters() -> int:
        out = subprocess.run(["pgrep", "-g", str(proc.pid), "-f", "sleep 3601"], capture_output=True,
                             text=True).stdout.split()
        return len(out)       # the stand-in Jupyter's own marker: never the stand-in Ray

    def wait(predicate) -> None:
        deadline = time.monotonic() + 60     # a hang guard; a 0.1 s poll is all it waits for
        while not predicate():
            assert time.monotonic() < deadline, (seen.read_text() if seen.exists() else "")
            time.sleep(0.05)

    try:
        time.sleep(0.5)
        assert not seen.exists() and jupyters() == 0  # no Secret: no Jupyter
        token_file.write_text(TOKEN)
        wait(lambda: jupyters() == 1)
        assert seen.read_text().splitlines() == [
            f"start file={token_file} ray=auto env_token=none"]
        token_file.unlink()
        wait(lambda: jupyters() == 0)
        token_file.write_text(TOKEN + "2")
        wait(lambda: jupyters() == 1 and len(seen.read_text().splitlines()) == 2)
        token_file.write_text(TOKEN + "3")  # a new token: restarted with it
        wait(lambda: len(seen.read_text().splitlines()) == 3 and jupyters() == 1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
