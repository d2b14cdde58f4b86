"""One source of truth for installing: `make venv` and the Dockerfile run the same pinned
steps (scripts/install.sh), and its pins agree with constraints.txt and pyproject.toml.

Static (there is no Docker engine on the development machines): the Dockerfile is parsed,
not built. The script itself is run for real with a recording stand-in for pip, so the
order and arguments of every install command are checked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install.sh"


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _script_pin(name: str) -> str:
    match = re.search(rf"^{name}=([0-9.]+)$", SCRIPT.read_text(), re.MULTILINE)
    assert match, f"{name}= not found in {SCRIPT}"
    return match[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def run_install(tmp_path: Path, *args: str) -> list[list[str]]:
    """Run scripts/install.sh with a pip that only records its arguments."""
    log = tmp_path / "pip-calls.txt"
    fake = tmp_path / "fakepip.py"
    fake.write_text("import json, sys\nwith open(sys.argv[1], 'a') as f:\n"
                    "    f.write(json.dumps(sys.argv[2:]) + '\\n')\n")
    subprocess.run(["bash", str(SCRIPT), *args, "--", sys.executable, str(fake), str(log)],
                   check=True, cwd=tmp_path, capture_output=True, text=True)
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_script_pins_agree_with_constraints_and_pyproject() -> None:
    pins, project = _constraints(), _pyproject()
    torch, torchrec = _script_pin("TORCH_VERSION"), _script_pin("TORCHREC_VERSION")
    assert pins["torch"] == torch
    assert f"torch=={torch}" in project["project"]["dependencies"]
    extras = project["project"]["optional-dependencies"]
    # torchrec X.Y goes with fbgemm X.Y: the CPU and the CUDA build, one in each extra
    assert extras["cpu"] == [f"fbgemm-gpu-cpu=={torchrec}"]
    assert extras["gpu"] == [f"fbgemm-gpu=={torchrec}"]
    assert pins["fbgemm-gpu-cpu"] == torchrec
    assert not any(d.startswith(("fbgemm", "torchrec")) for d in project["project"]["dependencies"])


def test_make_venv_runs_the_script_and_nothing_else(tmp_path: Path) -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^\$\(STAMP\):(?P<deps>.*)\n(?P<body>(?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the $(STAMP) rule of make venv is missing"
    assert "scripts/install.sh" in recipe["deps"] and "constraints.txt" in recipe["deps"]
    body = recipe["body"]
    assert "bash scripts/install.sh --variant cpu --editable --extras dev -- $(PIP)" in body
    assert "pip install" not in body.replace("$(PIP)", "") and "$(PIP) install" not in body


def _venv_python(tmp_path: Path, distro_has_venv: bool | None) -> str:
    """The interpreter ``make venv`` would create .venv with, for a distribution Python that has
    venv support (True), lacks it (False) or is not installed (None): ``make -n`` for a .venv
    that does not exist yet, with a stand-in for the distribution's interpreter."""
    distro = tmp_path / "distro-python3.11"
    if distro_has_venv is not None:
        distro.write_text("#!/bin/sh\nexit %d\n" % (0 if distro_has_venv else 1))
        distro.chmod(0o755)
    out = subprocess.run(
        ["make", "-n", "venv", f"DISTRO_PYTHON={distro}", f"VENV={tmp_path / 'venv'}",
         f"STAMP={tmp_path / 'stamp'}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHON"}).stdout
    create = next(line for line in out.splitlines() if line.startswith("test -x"))
    return create.split("||")[1].split(" -m venv")[0].strip()


def test_make_venv_prefers_the_distribution_python_where_it_can_make_a_venv(tmp_path: Path) -> None:
    # its PGO/LTO build takes fewer CPU-seconds for this project's processes (the Makefile's comment)
    assert _venv_python(tmp_path, True) == str(tmp_path / "distro-python3.11")
    assert _venv_python(tmp_path, False) == "python3"   # no python3.11-venv: the PATH's python3
    assert _venv_python(tmp_path, None) == "python3"    # not installed


def test_dockerfile_installs_only_through_the_script() -> None:
    instructions = _dockerfile_instructions()
    runs = [rest for kw, rest in instructions if kw == "RUN"]
    installs = [r for r in runs if "install.sh" in r]
    assert [re.search(r"--steps (\w+)", r)[1] for r in installs] == ["base", "project"]
    assert all(r.startswith("bash scripts/install.sh --variant \"${VARIANT}\"") for r in installs)
    for run in runs:
        assert not re.search(r"\bpip3? install\b|-m pip install|\bconda install\b|\buv pip\b", run), run
    # the project step comes after the sources are copied, the base step before
    copies = [i for i, (kw, rest) in enumerate(instructions) if kw == "COPY"
              and "ads_ranking_pipelines" in rest]
    steps = [i for i, (kw, rest) in enumerate(instructions) if kw == "RUN" and "install.sh" in rest]
    assert steps[0] < copies[0] < steps[1]


def test_dockerfile_base_and_code_version() -> None:
    instructions = _dockerfile_instructions()
    args = dict(rest.partition("=")[::2] for kw, rest in instructions if kw == "ARG" and "=" in rest)
    ray = _constraints()["ray"]
    assert args["BASE_IMAGE"] == f"rayproject/ray:{ray}-py311-cpu"  # the Ray the project pins
    assert args["VARIANT"] == "cpu"
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    env = [rest for kw, rest in instructions if kw == "ENV"]
    assert "ADS_RANKING_CODE_VERSION=${CODE_VERSION}" in env  # read by version.code_version
    labels = " ".join(rest for kw, rest in instructions if kw == "LABEL")
    assert 'org.opencontainers.image.revision="${GIT_COMMIT}"' in labels
    assert 'org.opencontainers.image.version="${CODE_VERSION}"' in labels
    runs = " ".join(rest for kw, rest in instructions if kw == "RUN")
    assert 'test -n "${CODE_VERSION}"' in runs and 'test -n "${GIT_COMMIT}"' in runs
    make = (ROOT / "Makefile").read_text()
    assert "--build-arg CODE_VERSION=$$($(PY) -m ads_ranking_pipelines.version)" in make
    assert "--build-arg GIT_COMMIT=$$(git rev-parse HEAD)" in make


def test_dockerignore_sends_only_what_the_image_needs() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines[0] == "*"  # everything else (.venv, .git, data, tests) stays out of the context
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    sources = set()
    for keyword, rest in _dockerfile_instructions():
        if keyword == "COPY":
            words = [w for w in rest.split() if not w.startswith("--")]
            sources.update(w.rstrip("/") for w in words[:-1])
    assert sources == allowed


@pytest.mark.parametrize("variant,torch_index,extra", [
    ("cpu", "https://download.pytorch.org/whl/cpu", "cpu"),
    ("gpu", "", "gpu"),
])
def test_image_steps_in_order(tmp_path: Path, variant: str, torch_index: str, extra: str) -> None:
    base = run_install(tmp_path, "--variant", variant, "--torch-index-url", torch_index,
                       "--steps", "base")
    torch = _script_pin("TORCH_VERSION")
    index = ["--index-url", torch_index] if torch_index else []
    assert base == [
        ["install", "-q", "--upgrade", "pip"],
        ["install", "-q", "-c", "constraints.txt", *index, f"torch=={torch}"],
        ["install", "-q", "--no-deps", f"torchrec=={_script_pin('TORCHREC_VERSION')}"],
    ]
    (tmp_path / "pip-calls.txt").unlink()
    project = run_install(tmp_path, "--variant", variant, "--steps", "project")
    assert project == [["install", "-q", "-c", "constraints.txt", f".[{extra}]"]]


def test_make_venv_steps_are_the_image_steps_plus_editable_dev(tmp_path: Path) -> None:
    calls = run_install(tmp_path, "--variant", "cpu", "--editable", "--extras", "dev")
    assert [c[-1] for c in calls] == ["pip", "torch==2.13.0", "torchrec==1.8.0", ".[cpu,dev]"]
    assert calls[-1] == ["install", "-q", "-c", "constraints.txt", "-e", ".[cpu,dev]"]


@pytest.mark.parametrize("args,needle", [
    (["--variant", "tpu"], "valid: cpu, gpu"),
    (["--steps", "some"], "valid: all, base, project"),
    (["--bogus"], "unknown option"),
])
def test_script_refuses_bad_options(tmp_path: Path, args: list[str], needle: str) -> None:
    result = subprocess.run(["bash", str(SCRIPT), *args, "--", "true"], capture_output=True, text=True)
    assert result.returncode == 2 and needle in result.stderr
