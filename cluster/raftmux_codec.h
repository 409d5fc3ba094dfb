/* raftmux_codec.h - the frame codec of the partition groups' Raft messages
 * between nodes (raftmux.h sends and receives them): encoding a raft 0.15
 * message into a payload tagged with its group and sender, and decoding a
 * peer's payload, every length and field checked (bytes from the network).
 *
 * Frame payload (inside a nodewatch frame, which carries the length and a
 * CRC-32C), little-endian, version RAFTMUX_VERSION = 1:
 *    0  u8  RAFTMUX_TAG ('R'; a coalesced heartbeat payload starts with its
 *           version, 1, so the two never collide)
 *    1  u8  version
 *    2  u8  raft message type (RAFT_IO_APPEND_ENTRIES .. RAFT_IO_TIMEOUT_NOW)
 *    3  u8  sender address length a (1..255)
 *    4  u32 0
 *    8  u64 group id
 *   16  u64 sender server id
 *   24  a   sender address (no NUL)
 *  24+a     the body of the type:
 *    RequestVote        u64 term, candidate id, last log index, last log term;
 *                       u32 flags (1: disrupt leader, 2: pre-vote)
 *    RequestVoteResult  u64 term; u8 vote granted (0/1); u8 pre-vote
 *                       (0 unknown, 1 true, 2 false)
 *    AppendEntries      u64 term, prev log index, prev log term, leader
 *                       commit; u32 n (entries); n x { u64 term, u8 type,
 *                       u8[3] 0, u32 length }; then the n entries' bytes
 *                       back to back
 *    AppendEntriesResult u64 term, rejected, last log index
 *    InstallSnapshot    u64 term, last index, last term, conf index;
 *                       u32 n (servers); n x { u64 id, u8 role, u8 0,
 *                       u16 address length, address }; u64 data length;
 *                       data
 *    TimeoutNow         u64 term, last log index, last log term
 * Nothing may follow the body. A payload that does not parse is malformed:
 * its connection is closed with a log line (the sender reconnects).
 *
 * Ownership on receive is raft 0.15's (as raft_uv's uv_recv.c does it): the
 * entries array of an AppendEntries and one batch buffer holding every
 * entry's bytes (entries[i].batch) are raft_malloc'ed, as are an
 * InstallSnapshot's data buffer and configuration; the receive callback
 * takes them all.
 *
 * Context: any thread; no state. */
#ifndef CAIRN_RAFTMUX_CODEC_H
#define CAIRN_RAFTMUX_CODEC_H

#include <raft.h>
#include <stddef.h>
#include <stdint.h>

#define RAFTMUX_TAG 0x52 /* 'R' */
#define RAFTMUX_VERSION 1
#define RAFTMUX_HEADER 24
#define RAFTMUX_ADDRESS_MAX 255
#define RAFTMUX_CONF_MAX 1024 /* servers in an InstallSnapshot's configuration */

/* Sizes: what a partition replica's Raft message can really be (checked
 * against the constants they come from in raftmux_codec.c).
 *  - AppendEntries: the leader sends the longest prefix of its entries
 *    within RGROUP_CAP_BYTES (1 MiB, counting 16 bytes per entry, as this
 *    encoding's entry header does) or one larger entry alone, and an entry
 *    is at most a group's max_entry_bytes (RGROUP_DEFAULT_MAX_ENTRY_BYTES,
 *    1 MiB; batches are checked against it before they are proposed). So
 *    the body is at most 36 + 16 + 1 MiB.
 *  - InstallSnapshot: the data is the partition's manifest (offsets,
 *    segment list, producer table), which a receiver refuses above
 *    MANIFEST_MAX_BYTES (16 MiB); the configuration at most
 *    RAFTMUX_CONF_MAX servers with 255-byte addresses.
 * A message above RAFTMUX_MSG_MAX is not sent (the receiver could not use
 * it); the watch connection lets a tagged frame up to RAFTMUX_MSG_MAX
 * through on a node with the mux on, every other frame keeps 1 MiB. */
#define RAFTMUX_ENTRIES_MAX (1u << 20)   /* entry bytes (with 16 per entry) of one AppendEntries */
#define RAFTMUX_SNAPSHOT_MAX (16u << 20) /* an InstallSnapshot's data */
#define RAFTMUX_AE_MAX (RAFTMUX_HEADER + RAFTMUX_ADDRESS_MAX + 36u + 16u + RAFTMUX_ENTRIES_MAX)
#define RAFTMUX_IS_MAX                                                                             \
  (RAFTMUX_HEADER + RAFTMUX_ADDRESS_MAX + 36u + RAFTMUX_CONF_MAX * (12u + RAFTMUX_ADDRESS_MAX) +   \
   8u + RAFTMUX_SNAPSHOT_MAX)
#define RAFTMUX_MSG_MAX RAFTMUX_IS_MAX /* encoded payload bytes (16.3 MiB) */

/* The encoded size of m from a sender with an address of addr_len bytes;
 * 0 if m's type is unknown. */
size_t raftmux_encoded_size(const struct raft_message *m, size_t addr_len);

/* Encodes m (from server sender_id at sender_address, for group gid) into
 * buf[0..cap). Ownership: borrows everything. Returns the bytes written, or
 * CAIRN_EINVAL (unknown type, address empty or too long, a field out of
 * its range) or CAIRN_ETOOLARGE (cap too small). */
__attribute__((warn_unused_result)) long raftmux_encode(uint8_t *buf, size_t cap, uint64_t gid,
                                                        uint64_t sender_id,
                                                        const char *sender_address,
                                                        const struct raft_message *m);

/* Reads the group id of payload p[0..len) after checking its header:
 * 0, or CAIRN_EBADLEN / CAIRN_EBADMAGIC / CAIRN_EUNSUPPORTED. */
__attribute__((warn_unused_result)) int raftmux_peek(const uint8_t *p, size_t len, uint64_t *gid);

/* Decodes payload p[0..len) into *m. m->server_id is the sender, and
 * m->server_address points into addr (at least RAFTMUX_ADDRESS_MAX + 1
 * bytes, NUL-terminated here), valid as long as addr. Ownership: on 0,
 * *m owns the raft_malloc'ed memory described above (hand it to raft's
 * receive callback, or free it with raftmux_message_free); on failure
 * nothing is allocated. Returns 0, CAIRN_EBADLEN / CAIRN_ETRUNCATED (lengths
 * that do not add up), CAIRN_EBADMAGIC / CAIRN_EUNSUPPORTED (header),
 * CAIRN_EBADFRAME (a field out of range), CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int
raftmux_decode(const uint8_t *p, size_t len, struct raft_message *m, uint64_t *gid, char *addr);

/* Frees what raftmux_decode allocated for m, for a message raft never saw. */
void raftmux_message_free(struct raft_message *m);

#endif
