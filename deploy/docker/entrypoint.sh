#!/bin/sh
# entrypoint.sh - starts cairnd in a container (Docker compose, Kubernetes).
# Settings come from the environment, each optional:
#   CAIRN_NODE_ID     the node id; default: the ordinal at the end of the host
#                     name plus one (a StatefulSet's pod cairn-0 is node 1)
#   CAIRN_ADVERTISE   the host others dial; default: the host name
#                     (Kubernetes: the pod's DNS name, set in the manifest)
#   CAIRN_VOTERS      the controller's voters, ID@HOST:7401,...
#   CAIRN_JOIN        HOST:7400 of a node to join (nodes beyond the voters)
#   CAIRN_DATA_DIR    default /var/lib/cairn
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
  ${CAIRN_VOTERS:+--voters "$CAIRN_VOTERS"} ${CAIRN_JOIN:+--join "$CAIRN_JOIN"} "$@"
exec "${CAIRND:-cairnd}" "$@"
