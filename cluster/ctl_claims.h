/* ctl_claims.h - the controller leader's ReportLeader proposals in flight,
 * at most one per partition.
 *
 * Why: every node's heartbeat names each partition it leads that the
 * metadata does not show yet, and the controller leader proposed a
 * ReportLeader for each, at every heartbeat, until one was applied. While
 * the metadata group was behind (creating 10,000 partitions: ~10,000
 * leaderships to record at once) the same claims were proposed again and
 * again: 207,547 proposals for 10,000 partitions, and the metadata group's
 * queued entries and sends (heaptrack: 132 MB at the peak) stayed in the
 * leader's memory after. A claim is now proposed once; the next heartbeat
 * proposes it again only after the first was applied or failed, or for a
 * newer term or another node.
 *
 * A set keyed by partition (topic id, partition) of (node id, term):
 * open addressing, linear probing, deletion by backward shift; it grows
 * and never shrinks below its first size.
 *
 * Ownership: the set owns its array (ctl_claims_free). Context: the loop
 * thread; nothing here blocks or calls back. */
#ifndef CAIRN_CTL_CLAIMS_H
#define CAIRN_CTL_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ctl_claim {
  uint64_t key; /* topic id << 32 | partition */
  uint64_t node_id;
  uint64_t term;
  bool used;
};

struct ctl_claims {
  struct ctl_claim *v; /* cap slots, a power of two, or NULL */
  size_t n, cap;
};

/* An empty set (no allocation). */
void ctl_claims_init(struct ctl_claims *c);

/* Frees the array; c is empty after. */
void ctl_claims_free(struct ctl_claims *c);

/* May node_id's claim to lead (topic_id, partition) in term be proposed?
 * False when a claim of the same node for that term or a later one is in
 * flight. Otherwise records it as in flight (replacing an older one of the
 * partition) and returns true; also true, recording nothing, without
 * memory (a duplicate proposal is harmless, only wasteful). */
bool ctl_claims_take(struct ctl_claims *c, uint32_t topic_id, uint32_t partition, uint64_t node_id,
                     uint64_t term);

/* The proposal of that claim ended (applied or failed): forgets it, unless
 * a newer claim of the partition replaced it. */
void ctl_claims_end(struct ctl_claims *c, uint32_t topic_id, uint32_t partition, uint64_t node_id,
                    uint64_t term);

/* Forgets every claim (leadership of the metadata group lost: the
 * proposals in flight end with failures anyway). */
void ctl_claims_clear(struct ctl_claims *c);

#endif
