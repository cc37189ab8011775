# syntax=docker/dockerfile:1
# Build a wheel in one stage, install it into a clean slim image in the next: no compilers, no
# pip cache, no source tree in the final image.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN pip install --no-cache-dir --upgrade pip build
COPY pyproject.toml README.md ./
COPY daemon ./daemon
COPY events ./events
COPY state ./state
COPY placement ./placement
COPY preemption ./preemption
COPY devcluster ./devcluster
COPY bench ./bench
RUN python -m build --wheel --outdir /dist

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="toposched" \
      org.opencontainers.image.description="Network-topology-aware gang scheduler for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /dist/*.whl /tmp/
RUN pip install --no-cache-dir /tmp/*.whl && rm -f /tmp/*.whl \
    && groupadd --system --gid 65532 toposched \
    && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/toposched --create-home toposched
USER 65532:65532
WORKDIR /var/lib/toposched
VOLUME ["/var/lib/toposched"]
EXPOSE 10259
ENTRYPOINT ["toposched", "run"]
