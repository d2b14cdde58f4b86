# The Ray image for the KubeRay backend: rayproject/ray with this package installed at one exact
# code version, through the same pinned steps as `make venv` (scripts/install.sh).
#
#   CPU (default):  make image IMAGE=REGISTRY/ads-ranking-pipelines:TAG
#   GPU:            make image IMAGE=REGISTRY/ads-ranking-pipelines:TAG-gpu VARIANT=gpu
#
# `make image` passes GIT_COMMIT and CODE_VERSION (ads_ranking_pipelines/version.py); the
# equivalent docker command is in the README ("Building the image"). The GPU variant starts
# from the CUDA Ray image and installs PyPI's CUDA torch 2.13.0, torchrec 1.8.0 and
# fbgemm-gpu 1.8.0; the CPU variant installs torch from PyTorch's CPU wheel index and
# fbgemm-gpu-cpu 1.8.0.
ARG BASE_IMAGE=rayproject/ray:2.60.0-py311-cpu
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
ARG VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG GIT_COMMIT=""
ARG CODE_VERSION=""

# rayproject/ray runs as the non-root user `ray` (uid 1000, group users), as the pods do.
WORKDIR /home/ray/ads-ranking-pipelines

# Heavy, rarely changing layers first: pip, torch and torchrec.
COPY --chown=1000:100 constraints.txt ./
COPY --chown=1000:100 scripts/install.sh scripts/install.sh
RUN bash scripts/install.sh --variant "${VARIANT}" --torch-index-url "${TORCH_INDEX_URL}" \
        --steps base -- python -m pip

# Then the project itself (not editable), pinned by constraints.txt.
COPY --chown=1000:100 pyproject.toml README.md ./
COPY --chown=1000:100 ads_ranking_pipelines ads_ranking_pipelines
RUN test -n "${CODE_VERSION}" && test -n "${GIT_COMMIT}" \
    || { echo "pass --build-arg GIT_COMMIT=\$(git rev-parse HEAD) --build-arg CODE_VERSION=... (or use make image)" >&2; exit 2; }
RUN bash scripts/install.sh --variant "${VARIANT}" --steps project -- python -m pip \
    && python -c "import ads_ranking_pipelines.ray_jobs.train" \
    && if [ "${VARIANT}" = cpu ]; then python -c "import torchrec, fbgemm_gpu"; fi

# Model versions record this (ads_ranking_pipelines.version.code_version).
ENV ADS_RANKING_CODE_VERSION=${CODE_VERSION}
LABEL org.opencontainers.image.title="ads-ranking-pipelines" \
      org.opencontainers.image.source="ads-ranking-pipelines" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.version="${CODE_VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.ads-ranking.variant="${VARIANT}"
