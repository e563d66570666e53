# SPDX-License-Identifier: Apache-2.0
# Dockerfile — owns: the container image of the gateway (fencegate, and fencectl when it is built).
# Stage 1 builds a Release binary on Debian 12; stage 2 is debian:12-slim with only the runtime libraries,
# running as an unprivileged user. Redis and Postgres are not in the image (see docker-compose.yml).
#   docker build -t fencegate .
#   docker run --rm fencegate fencegate keys new --id admin --scope admin   (a key, and its entry)
#   docker run --rm -p 8480:8480 -e FENCEGATE_REDIS_URL=... -e FENCEGATE_PG_DSN=... \
#     -v $PWD/deploy/keys.json:/run/secrets/fencegate_keys:ro \
#     -e FENCEGATE_AUTH_KEYS_FILE=/run/secrets/fencegate_keys fencegate
# The image holds no key and no secret: listening on 0.0.0.0, the gateway requires API keys and refuses to
# start without a keys file (or FENCEGATE_AUTH_MODE=off, which it warns about).

FROM debian:12-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ca-certificates python3-minimal \
      libhiredis-dev libpq-dev libmicrohttpd-dev libgnutls28-dev libjansson-dev libssl-dev libcmocka-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# A fresh build directory outside the sources, so a build/ or build-test/ in the context does not leak in.
RUN rm -rf build build-test .data \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DFG_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && mkdir -p /out \
 && install -m 0755 /build/fencegate /out/fencegate \
 && if [ -x /build/fencectl ]; then install -m 0755 /build/fencectl /out/fencectl; fi

FROM debian:12-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libhiredis0.14 libpq5 libmicrohttpd12 libgnutls30 libjansson4 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 fencegate \
 && useradd --system --uid 10001 --gid fencegate --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin fencegate \
 && mkdir -p /etc/fencegate
COPY --from=build /out/ /usr/local/bin/
ENV FENCEGATE_LISTEN=0.0.0.0:8480
EXPOSE 8480
USER fencegate:fencegate
# The gateway drains on SIGTERM (in-flight requests finish, waiters get 503) and exits 0.
STOPSIGNAL SIGTERM
CMD ["fencegate"]
