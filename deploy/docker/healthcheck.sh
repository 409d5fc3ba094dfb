#!/bin/bash
# healthcheck.sh - the image's HEALTHCHECK: healthy when the node's admin
# port answers GET /ready with 200 (registered in the cluster, every
# assigned replica open: the Kubernetes readiness probe's answer). Plain
# bash (/dev/tcp), so the slim image needs no curl.
#   cairn-healthcheck [HOST:PORT]   default 127.0.0.1:${CAIRN_ADMIN_PORT:-7402}
set -u
addr=${1:-127.0.0.1:${CAIRN_ADMIN_PORT:-7402}}
host=${addr%:*}
port=${addr##*:}
{ exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null || { echo "admin port $addr: not reachable"; exit 1; }
printf 'GET /ready HTTP/1.0\r\nHost: %s\r\n\r\n' "$addr" >&3
IFS= read -r -t 5 status <&3 || { echo "admin port $addr: no answer"; exit 1; }
body=$(timeout 5 cat <&3 | tr -d '\r' | sed '1,/^$/d')
case "$status" in
  "HTTP/1."?" 200 "*) echo "ready"; exit 0 ;;
  *) echo "not ready: ${status%$'\r'} $body"; exit 1 ;;
esac
