# shellcheck shell=bash
# retention_bound.sh - the lower bound on what a replica keeps under
# retention by size, for run.sh's replica comparison (sourced).
#
# A replica applies its topic's retention_bytes on its own: it drops its
# oldest closed segment only while what stays is at least retention_bytes
# (src/storage/plog.c, plog_retention_keep: total - retention >= the
# segment's size), as Kafka does. So a replica whose log start moved
# above 0 holds at least retention_bytes of segments, unless a
# DeleteRecords moved it (the start then at most the highest target sent,
# acknowledged or in doubt). A replica that came back through a snapshot
# or was rebuilt from a peer starts where that peer's log started, which
# the same rule bounded; it is checked once it is caught up (run.sh skips
# lagging replicas). What the bound catches: retention (or anything else)
# dropping records a replica had to keep, which the start check alone
# cannot see once retention may move the start.

# retention_bound_read CAIRN_LOG DIR: prints "START BYTES" of the replica's
# log in DIR (its start offset and the bytes of its segments, as
# `cairn-log verify` opens it), or nothing when it does not open.
retention_bound_read() {
  "$1" verify "$2" 2>/dev/null |
    sed -n 's/^log: offsets \[\([0-9]*\), [0-9]*), [0-9]* segment(s), \([0-9]*\) bytes.*/\1 \2/p'
}

# retention_bound_why START BYTES RETENTION CEILING: prints why a replica
# whose log starts at START holding BYTES bytes of segments breaks the
# bound (RETENTION the topic's retention_bytes, 0 for none; CEILING the
# highest DeleteRecords target sent to its partition, 0 for none), or
# nothing when it keeps it.
retention_bound_why() {
  local start=$1 bytes=$2 retention=$3 ceiling=$4
  if ((retention > 0 && start > 0 && start > ceiling && bytes < retention)); then
    echo "starts at $start holding $bytes bytes of segments, less than its retention of $retention bytes, above every DeleteRecords sent (the highest: $ceiling): records it had to keep were dropped"
  fi
}
