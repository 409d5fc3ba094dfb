/* manifest.h - a partition log's manifest (offsets, last Raft index and a
 * checksummed list of its segments), encoded as the protobuf message
 * cairn.storage.LogManifest (proto/storage.proto). It lets a replica that
 * lacks data say exactly which byte ranges to fetch from a peer, and check
 * them on arrival. */
#ifndef CAIRN_MANIFEST_H
#define CAIRN_MANIFEST_H

#include "storage/plog.h"

#include <stddef.h>
#include <stdint.h>

#define MANIFEST_MAX_BYTES (16u * 1024 * 1024)

struct manifest {
  int64_t start_offset;
  int64_t next_offset;
  uint64_t last_index;
  struct plog_segment_desc *segments; /* owned */
  size_t nsegments;
  /* The partition's encoded producer table as of next_offset
   * (cluster/producer_state.h), opaque here: owned, NULL/0 when absent
   * (manifest_build leaves it so; snapshots of older versions lack it). */
  uint8_t *producers;
  size_t producers_len;
};

/* Builds the manifest of a plog (reads every segment to checksum it:
 * blocks). *m owns its segments (free with manifest_free()). Returns 0 or a
 * negative code. */
__attribute__((warn_unused_result)) int manifest_build(struct store *s, struct manifest *m);

/* Encodes m. *out is owned by the caller (free with free()). Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int manifest_encode(const struct manifest *m, uint8_t **out,
                                                        size_t *len);

/* Decodes buf[0..len) (untrusted: at most MANIFEST_MAX_BYTES, segments
 * contiguous and in order). *m owns its segments. Returns 0, CAIRN_ETOOLARGE
 * or CAIRN_ECORRUPT. */
__attribute__((warn_unused_result)) int manifest_decode(const uint8_t *buf, size_t len,
                                                        struct manifest *m);

/* Frees what m owns (segments and producers). */
void manifest_free(struct manifest *m);

#endif
