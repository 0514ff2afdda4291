# syntax=docker/dockerfile:1
# The service image: built in one stage, run in another with production dependencies only, as the
# unprivileged "node" user, with a health check on GET /ready. No tsx at run time: plain node runs
# the compiled dist/.
#
#   docker build -t channel-messaging .
#   docker run -p 8080:8080 -v cm-data:/data channel-messaging          # embedded mode
#   docker compose -f infra/docker-compose.yml up                       # production mode (Kafka, ClickHouse)
#   docker exec <container> channel-messaging-replay --help             # also: npm run replay -- --help

ARG NODE_VERSION=22

# ---- build: every dependency (tsc), then the compiled service, then production dependencies only
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /src
# better-sqlite3 has prebuilt binaries for linux x64/arm64 (glibc); the toolchain is there for others.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY infra/build.mjs infra/prod-package.mjs ./infra/
COPY src ./src
COPY projections ./projections
# prod-package.mjs: `npm start`, `npm run replay`, `npm run rebuild` run their :prod twins (plain
# node on dist/; tsx is a dev dependency and is gone after the prune).
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && node infra/prod-package.mjs

# ---- run: node, the compiled service and its production dependencies; nothing else
FROM node:${NODE_VERSION}-bookworm-slim AS run
ENV NODE_ENV=production \
    PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=build --chown=root:root /src/package.json ./package.json
COPY --from=build --chown=root:root /src/node_modules ./node_modules
COPY --from=build --chown=root:root /src/dist ./dist
# The bin links on PATH (channel-messaging, channel-messaging-replay, channel-messaging-rebuild):
# `npm install --global` of this directory links it, installs nothing (test/e2e/pruned-install).
# The data directory belongs to the unprivileged user the service runs as; the code does not.
RUN npm install --global --offline --no-audit --no-fund /app \
 && mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
# /ready: 200 when the log is writable and the consumers are caught up (README: Deploying).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM starts the graceful shutdown (SHUTDOWN_TIMEOUT_MS); node runs as PID 1 and handles it.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/src/main.js"]
