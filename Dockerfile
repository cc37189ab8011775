# syntax=docker/dockerfile:1
# toposched's image. Two stages: the first installs toposched and its dependencies into a virtual
# environment (/opt/toposched) with byte-code compiled ahead (the container runs with a read-only
# root filesystem, so nothing can be compiled at run time); the second copies that environment
# into a clean slim base. No build tools, no pip cache and no source tree reach the final image.
#
#   docker build -t toposched:0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# Health is checked by the Kubernetes probes on /healthz and /readyz (ops/base/deployment.yaml),
# so there is no HEALTHCHECK here.

# Pinned to an exact Python patch release on Debian bookworm (pin the digest too in your registry
# mirror if your policy asks for it). Both stages use the same base, so the venv's interpreter path
# exists in the final image.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/toposched
WORKDIR /src
COPY pyproject.toml README.md ./
COPY daemon ./daemon
COPY events ./events
COPY state ./state
COPY placement ./placement
COPY preemption ./preemption
COPY devcluster ./devcluster
COPY manifests ./manifests
COPY bench ./bench
RUN /opt/toposched/bin/pip install . \
    && /opt/toposched/bin/pip uninstall --yes pip setuptools \
    && python -m compileall -q /opt/toposched

FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="toposched" \
      org.opencontainers.image.description="Network-topology-aware gang scheduler for Kubernetes: all-or-nothing gangs in the tightest network domain, job-level preemption" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PATH=/opt/toposched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 65532 toposched \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/toposched \
       --shell /usr/sbin/nologin toposched \
    && install -d -o 65532 -g 65532 -m 0750 /var/lib/toposched
COPY --from=build /opt/toposched /opt/toposched
USER 65532:65532
WORKDIR /var/lib/toposched
# /metrics, /healthz, /readyz (config key `address`, default 0.0.0.0:10251).
EXPOSE 10251
ENTRYPOINT ["toposched"]
CMD ["run"]
