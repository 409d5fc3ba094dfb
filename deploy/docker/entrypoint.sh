#!/bin/sh
# entrypoint.sh - starts cairnd in a container (Docker compose, Kubernetes).
# Settings come from the environment, each optional:
#   CAIRN_NODE_ID     the node id; default: the ordinal at the end of the host
#                     name plus one (a StatefulSet's pod cairn-0 is node 1)
#   CAIRN_ADVERTISE   the host others dial; default: the host name
#                     (Kubernetes: the pod's DNS name, set in the manifest)
#   CAIRN_VOTERS      the controller's voters, ID@HOST:7401,...
#   CAIRN_JOIN        HOST:7400 of a node to join (nodes beyond the voters)
#   CAIRN_EXTERNAL_ADVERTISE  HOST:PORT clients outside the container
#                     network dial (compose: the published port on the
#                     host): turns on the external client port 0.0.0.0:7500,
#                     whose Metadata answers name every node's external address
#   CAIRN_DATA_DIR    default /var/lib/cairn
#   CAIRN_CLUSTER_SECRET_FILE  the cluster secret (Kubernetes: a Secret's
#                     volume); nodes authenticate to each other with it
#   CAIRN_CONFIG_ERROR_EXIT  when set, a configuration error (cairnd's exit
#                     2) ends the container with this status instead: compose
#                     sets 0, so `restart: on-failure` does not restart a
#                     node that can only fail the same way again
#   CAIRND            the binary, default cairnd on PATH
# Arguments are passed on to cairnd after these (so --check-config works).
set -eu
host=${HOSTNAME:-$(hostname)}
if [ -z "${CAIRN_NODE_ID:-}" ]; then
  ordinal=${host##*-}
  case "$ordinal" in
    '' | *[!0-9]*) echo "entrypoint: set CAIRN_NODE_ID (host name $host has no -ORDINAL)" >&2; exit 2 ;;
  esac
  CAIRN_NODE_ID=$((ordinal + 1))
fi
set -- --node-id "$CAIRN_NODE_ID" --data-dir "${CAIRN_DATA_DIR:-/var/lib/cairn}" \
  --listen 0.0.0.0:7400 --cluster-listen 0.0.0.0:7401 --admin-listen 0.0.0.0:7402 \
  --advertise "${CAIRN_ADVERTISE:-$host}" \
  ${CAIRN_VOTERS:+--voters "$CAIRN_VOTERS"} ${CAIRN_JOIN:+--join "$CAIRN_JOIN"} \
  ${CAIRN_CLUSTER_SECRET_FILE:+--cluster-secret-file "$CAIRN_CLUSTER_SECRET_FILE"} \
  ${CAIRN_EXTERNAL_ADVERTISE:+--external-listen 0.0.0.0:7500 --external-advertise "$CAIRN_EXTERNAL_ADVERTISE"} \
  "$@"
if [ -z "${CAIRN_CONFIG_ERROR_EXIT:-}" ]; then
  exec "${CAIRND:-cairnd}" "$@"
fi
# Docker's restart policies cannot skip one exit status (systemd's
# RestartPreventExitStatus=2): this shell stays as the parent, passes
# SIGTERM/SIGINT on, and turns exit 2 into CAIRN_CONFIG_ERROR_EXIT.
"${CAIRND:-cairnd}" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM
trap 'kill -INT "$pid" 2>/dev/null' INT
set +e
while :; do
  wait "$pid"
  status=$?
  # wait returns early (>128) when a trapped signal arrives: go on waiting
  # while cairnd stops.
  kill -0 "$pid" 2>/dev/null || break
done
if [ "$status" -eq 2 ]; then
  echo "entrypoint: cairnd exit 2 (a configuration or data-dir error, above): not restarting;" \
    "fix the settings, then: docker compose up -d" >&2
  exit "$CAIRN_CONFIG_ERROR_EXIT"
fi
exit "$status"
