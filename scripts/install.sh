#!/usr/bin/env bash
# The one pinned install sequence of this project, used by `make venv` and by the Dockerfile.
#
#   scripts/install.sh [--variant cpu|gpu] [--torch-index-url URL] [--editable] [--extras LIST]
#                      [--steps all|base|project] -- PIP...
#
# PIP is the pip command to run, e.g. `.venv/bin/python -m pip` (make venv) or `python -m pip`
# (the image). Steps, in this order:
#   base     1. pip itself, upgraded
#            2. torch, first and pinned: left free to choose, pip pulls a multi-GB CUDA build
#               into a CPU install (or the wrong CUDA build into a GPU one)
#            3. torchrec --no-deps: its metadata requires fbgemm-gpu (CUDA); the project's
#               cpu/gpu extra brings the matching fbgemm build instead
#   project  4. this project with constraints.txt and the variant's extra (cpu: fbgemm-gpu-cpu,
#               gpu: fbgemm-gpu), editable with --editable
# --torch-index-url installs torch from that index (the image's CPU variant uses PyTorch's CPU
# wheel index; PyPI's Linux torch wheels are the CUDA build). Run from the repository root.
set -euo pipefail

# Pins checked against constraints.txt and pyproject.toml by ads_ranking_pipelines_tests/test_install.py.
TORCH_VERSION=2.13.0
TORCHREC_VERSION=1.8.0

variant=cpu torch_index="" editable=0 extras="" steps=all
while [[ $# -gt 0 ]]; do
  case "$1" in
    --variant) variant="$2"; shift 2 ;;
    --torch-index-url) torch_index="$2"; shift 2 ;;
    --editable) editable=1; shift ;;
    --extras) extras="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "install.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 ]]; then
  echo "install.sh: give the pip command after --, e.g. -- .venv/bin/python -m pip" >&2; exit 2
fi
case "$variant" in cpu|gpu) ;; *) echo "install.sh: --variant $variant; valid: cpu, gpu" >&2; exit 2 ;; esac
case "$steps" in all|base|project) ;; *) echo "install.sh: --steps $steps; valid: all, base, project" >&2; exit 2 ;; esac
pip=("$@")
cd "$(dirname "$0")/.."

if [[ "$steps" != project ]]; then
  "${pip[@]}" install -q --upgrade pip
  torch_from=()
  [[ -n "$torch_index" ]] && torch_from=(--index-url "$torch_index")
  "${pip[@]}" install -q -c constraints.txt "${torch_from[@]}" "torch==${TORCH_VERSION}"
  "${pip[@]}" install -q --no-deps "torchrec==${TORCHREC_VERSION}"
fi
if [[ "$steps" != base ]]; then
  extra="$variant${extras:+,$extras}"
  if [[ "$editable" == 1 ]]; then
    "${pip[@]}" install -q -c constraints.txt -e ".[${extra}]"
  else
    "${pip[@]}" install -q -c constraints.txt ".[${extra}]"
  fi
fi
