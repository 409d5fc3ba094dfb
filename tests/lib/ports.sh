# ports.sh - for shell tests: a base port whose block of ports is free.
# Source it, then: base=$(free_base_port NODES)
#
# A local cluster's node I uses base+10(I-1) .. base+10(I-1)+2 (deploy/cluster.sh).
# Bases are drawn from 20000-32000, below Linux's ephemeral range
# (32768-60999), so no outgoing connection can hold one of them, and a block
# is taken only if no listener holds any of its ports (ss from iproute2; a
# test started in parallel may still race for it, which the draw makes rare).

free_base_port() {
  local nodes="${1:-3}" tries=0 base p busy
  while [ $tries -lt 200 ]; do
    tries=$((tries + 1))
    base=$((20000 + (RANDOM % 1200) * 10))
    busy=0
    for ((p = base; p < base + 10 * nodes; p++)); do
      if ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
        busy=1
        break
      fi
    done
    if [ $busy -eq 0 ]; then
      echo "$base"
      return 0
    fi
  done
  echo "free_base_port: no free block of $((10 * nodes)) ports found" >&2
  return 1
}
