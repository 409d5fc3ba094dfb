/* raftmux_codec.c - the Raft message frame codec (raftmux_codec.h). */
#include "cluster/raftmux_codec.h"

#include "cluster/nodewatch.h"
#include "cluster/rgroup.h"
#include "common/err.h"
#include "format/endian.h"
#include "storage/manifest.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RAFTMUX_AE_FIXED 36u  /* 4 u64 + u32 n */
#define RAFTMUX_AE_ENTRY 16u  /* u64 term, u8 type, 3 pad, u32 length */
#define RAFTMUX_IS_FIXED 36u  /* 4 u64 + u32 n */
#define RAFTMUX_IS_SERVER 12u /* u64 id, u8 role, u8 0, u16 address length */

/* The sizes of raftmux.h follow from these (see "Sizes" there). */
_Static_assert(RAFTMUX_ENTRIES_MAX >= RGROUP_CAP_BYTES &&
                   RAFTMUX_ENTRIES_MAX >= RGROUP_DEFAULT_MAX_ENTRY_BYTES,
               "an AppendEntries can carry more than RAFTMUX_ENTRIES_MAX");
_Static_assert(RAFTMUX_SNAPSHOT_MAX >= MANIFEST_MAX_BYTES,
               "a snapshot's manifest can be larger than RAFTMUX_SNAPSHOT_MAX");
_Static_assert(RAFTMUX_AE_FIXED == 36u && RAFTMUX_AE_ENTRY == 16u && RAFTMUX_IS_FIXED == 36u &&
                   RAFTMUX_IS_SERVER == 12u,
               "raftmux.h's sizes assume these layouts");
_Static_assert(RAFTMUX_MSG_MAX >= RAFTMUX_AE_MAX && RAFTMUX_MSG_MAX > NWATCH_FRAME_MAX &&
                   RAFTMUX_MSG_MAX <= UINT32_MAX,
               "RAFTMUX_MSG_MAX");

/* A cursor over a payload being read; every take is bounds-checked. */
struct raftmux_rd {
  const uint8_t *p;
  size_t len, off;
  bool short_;
};

static const uint8_t *raftmux_take(struct raftmux_rd *r, size_t n)
{
  if (r->short_ || r->len - r->off < n) {
    r->short_ = true;
    return NULL;
  }
  const uint8_t *at = r->p + r->off;
  r->off += n;
  return at;
}

static uint64_t raftmux_get64(struct raftmux_rd *r)
{
  const uint8_t *at = raftmux_take(r, 8);
  return at != NULL ? le_get64(at) : 0;
}

static uint32_t raftmux_get32(struct raftmux_rd *r)
{
  const uint8_t *at = raftmux_take(r, 4);
  return at != NULL ? le_get32(at) : 0;
}

static uint16_t raftmux_get16(struct raftmux_rd *r)
{
  const uint8_t *at = raftmux_take(r, 2);
  return at != NULL ? le_get16(at) : 0;
}

static uint8_t raftmux_get8(struct raftmux_rd *r)
{
  const uint8_t *at = raftmux_take(r, 1);
  return at != NULL ? at[0] : 0;
}

static size_t raftmux_body_size(const struct raft_message *m)
{
  switch (m->type) {
  case RAFT_IO_REQUEST_VOTE:
    return 36;
  case RAFT_IO_REQUEST_VOTE_RESULT:
    return 10;
  case RAFT_IO_APPEND_ENTRIES: {
    const struct raft_append_entries *ae = &m->append_entries;
    size_t n = RAFTMUX_AE_FIXED + (size_t)ae->n_entries * RAFTMUX_AE_ENTRY;
    for (unsigned i = 0; i < ae->n_entries; i++) {
      n += ae->entries[i].buf.len;
    }
    return n;
  }
  case RAFT_IO_APPEND_ENTRIES_RESULT:
    return 24;
  case RAFT_IO_INSTALL_SNAPSHOT: {
    const struct raft_install_snapshot *is = &m->install_snapshot;
    size_t n = RAFTMUX_IS_FIXED + 8 + is->data.len;
    for (unsigned i = 0; i < is->conf.n; i++) {
      const char *a = is->conf.servers[i].address;
      n += RAFTMUX_IS_SERVER + (a != NULL ? strlen(a) : 0);
    }
    return n;
  }
  case RAFT_IO_TIMEOUT_NOW:
    return 24;
  default:
    return 0;
  }
}

size_t raftmux_encoded_size(const struct raft_message *m, size_t addr_len)
{
  size_t body = raftmux_body_size(m);
  return body == 0 ? 0 : RAFTMUX_HEADER + addr_len + body;
}

/* A writer over a buffer whose size was computed first. */
struct raftmux_wr {
  uint8_t *p;
  size_t off;
};

static void raftmux_put64(struct raftmux_wr *w, uint64_t v)
{
  le_put64(w->p + w->off, v);
  w->off += 8;
}

static void raftmux_put32(struct raftmux_wr *w, uint32_t v)
{
  le_put32(w->p + w->off, v);
  w->off += 4;
}

static void raftmux_put_bytes(struct raftmux_wr *w, const void *b, size_t n)
{
  if (n > 0) {
    memcpy(w->p + w->off, b, n);
  }
  w->off += n;
}

static int raftmux_encode_ae(struct raftmux_wr *w, const struct raft_append_entries *ae)
{
  raftmux_put64(w, ae->term);
  raftmux_put64(w, ae->prev_log_index);
  raftmux_put64(w, ae->prev_log_term);
  raftmux_put64(w, ae->leader_commit);
  raftmux_put32(w, ae->n_entries);
  for (unsigned i = 0; i < ae->n_entries; i++) {
    const struct raft_entry *e = &ae->entries[i];
    if (e->buf.len > UINT32_MAX || e->type > UINT8_MAX) {
      return CAIRN_EINVAL;
    }
    raftmux_put64(w, e->term);
    w->p[w->off] = (uint8_t)e->type;
    memset(w->p + w->off + 1, 0, 3);
    w->off += 4;
    raftmux_put32(w, (uint32_t)e->buf.len);
  }
  for (unsigned i = 0; i < ae->n_entries; i++) {
    raftmux_put_bytes(w, ae->entries[i].buf.base, ae->entries[i].buf.len);
  }
  return 0;
}

static int raftmux_encode_is(struct raftmux_wr *w, const struct raft_install_snapshot *is)
{
  if (is->conf.n > RAFTMUX_CONF_MAX) {
    return CAIRN_EINVAL;
  }
  raftmux_put64(w, is->term);
  raftmux_put64(w, is->last_index);
  raftmux_put64(w, is->last_term);
  raftmux_put64(w, is->conf_index);
  raftmux_put32(w, is->conf.n);
  for (unsigned i = 0; i < is->conf.n; i++) {
    const struct raft_server *s = &is->conf.servers[i];
    size_t alen = s->address != NULL ? strlen(s->address) : 0;
    if (alen > RAFTMUX_ADDRESS_MAX || s->role < 0 || s->role > UINT8_MAX) {
      return CAIRN_EINVAL;
    }
    raftmux_put64(w, s->id);
    w->p[w->off] = (uint8_t)s->role;
    w->p[w->off + 1] = 0;
    le_put16(w->p + w->off + 2, (uint16_t)alen);
    w->off += 4;
    raftmux_put_bytes(w, s->address, alen);
  }
  raftmux_put64(w, is->data.len);
  raftmux_put_bytes(w, is->data.base, is->data.len);
  return 0;
}

static int raftmux_encode_body(struct raftmux_wr *w, const struct raft_message *m)
{
  switch (m->type) {
  case RAFT_IO_REQUEST_VOTE: {
    const struct raft_request_vote *rv = &m->request_vote;
    raftmux_put64(w, rv->term);
    raftmux_put64(w, rv->candidate_id);
    raftmux_put64(w, rv->last_log_index);
    raftmux_put64(w, rv->last_log_term);
    raftmux_put32(w, (rv->disrupt_leader ? 1u : 0u) | (rv->pre_vote ? 2u : 0u));
    return 0;
  }
  case RAFT_IO_REQUEST_VOTE_RESULT: {
    const struct raft_request_vote_result *rr = &m->request_vote_result;
    raftmux_put64(w, rr->term);
    w->p[w->off++] = rr->vote_granted ? 1 : 0;
    w->p[w->off++] = rr->pre_vote == raft_tribool_true    ? 1
                     : rr->pre_vote == raft_tribool_false ? 2
                                                          : 0;
    return 0;
  }
  case RAFT_IO_APPEND_ENTRIES:
    return raftmux_encode_ae(w, &m->append_entries);
  case RAFT_IO_APPEND_ENTRIES_RESULT:
    raftmux_put64(w, m->append_entries_result.term);
    raftmux_put64(w, m->append_entries_result.rejected);
    raftmux_put64(w, m->append_entries_result.last_log_index);
    return 0;
  case RAFT_IO_INSTALL_SNAPSHOT:
    return raftmux_encode_is(w, &m->install_snapshot);
  case RAFT_IO_TIMEOUT_NOW:
    raftmux_put64(w, m->timeout_now.term);
    raftmux_put64(w, m->timeout_now.last_log_index);
    raftmux_put64(w, m->timeout_now.last_log_term);
    return 0;
  default:
    return CAIRN_EINVAL;
  }
}

long raftmux_encode(uint8_t *buf, size_t cap, uint64_t gid, uint64_t sender_id,
                    const char *sender_address, const struct raft_message *m)
{
  size_t alen = sender_address != NULL ? strlen(sender_address) : 0;
  if (alen == 0 || alen > RAFTMUX_ADDRESS_MAX) {
    return CAIRN_EINVAL;
  }
  size_t need = raftmux_encoded_size(m, alen);
  if (need == 0) {
    return CAIRN_EINVAL;
  }
  if (need > cap || need > (size_t)LONG_MAX) {
    return CAIRN_ETOOLARGE;
  }
  struct raftmux_wr w = {buf, 0};
  buf[0] = RAFTMUX_TAG;
  buf[1] = RAFTMUX_VERSION;
  buf[2] = (uint8_t)m->type;
  buf[3] = (uint8_t)alen;
  le_put32(buf + 4, 0);
  w.off = 8;
  raftmux_put64(&w, gid);
  raftmux_put64(&w, sender_id);
  raftmux_put_bytes(&w, sender_address, alen);
  int rv = raftmux_encode_body(&w, m);
  if (rv != 0) {
    return rv;
  }
  return w.off == need ? (long)need : CAIRN_EINVAL;
}

int raftmux_peek(const uint8_t *p, size_t len, uint64_t *gid)
{
  if (len < RAFTMUX_HEADER) {
    return CAIRN_EBADLEN;
  }
  if (p[0] != RAFTMUX_TAG) {
    return CAIRN_EBADMAGIC;
  }
  if (p[1] != RAFTMUX_VERSION) {
    return CAIRN_EUNSUPPORTED;
  }
  *gid = le_get64(p + 8);
  return 0;
}

static int raftmux_decode_ae(struct raftmux_rd *r, struct raft_append_entries *ae)
{
  ae->term = raftmux_get64(r);
  ae->prev_log_index = raftmux_get64(r);
  ae->prev_log_term = raftmux_get64(r);
  ae->leader_commit = raftmux_get64(r);
  uint32_t n = raftmux_get32(r);
  ae->entries = NULL;
  ae->n_entries = 0;
  if (r->short_) {
    return CAIRN_ETRUNCATED;
  }
  /* The headers alone must fit: a count cannot make us allocate more than
   * the payload could describe. */
  if ((size_t)n > (r->len - r->off) / RAFTMUX_AE_ENTRY) {
    return CAIRN_ETRUNCATED;
  }
  if (n == 0) {
    return 0;
  }
  struct raft_entry *es = raft_calloc(n, sizeof *es);
  if (es == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    es[i].term = raftmux_get64(r);
    es[i].type = raftmux_get8(r);
    const uint8_t *pad = raftmux_take(r, 3);
    es[i].buf.len = raftmux_get32(r);
    total += es[i].buf.len;
    bool zero = pad != NULL && pad[0] == 0 && pad[1] == 0 && pad[2] == 0;
    if (!zero ||
        (es[i].type != RAFT_COMMAND && es[i].type != RAFT_BARRIER && es[i].type != RAFT_CHANGE)) {
      raft_free(es);
      return CAIRN_EBADFRAME;
    }
  }
  if (total != r->len - r->off) {
    raft_free(es);
    return CAIRN_ETRUNCATED;
  }
  /* One batch for every entry's bytes, as raft_uv hands them over: raft
   * frees each distinct batch once. */
  uint8_t *batch = raft_malloc(total > 0 ? total : 1);
  if (batch == NULL) {
    raft_free(es);
    return CAIRN_ENOMEM;
  }
  memcpy(batch, raftmux_take(r, total), total);
  size_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    es[i].buf.base = batch + off;
    es[i].batch = batch;
    off += es[i].buf.len;
  }
  ae->entries = es;
  ae->n_entries = n;
  return 0;
}

static int raftmux_decode_conf(struct raftmux_rd *r, struct raft_configuration *c)
{
  uint32_t n = raftmux_get32(r);
  if (r->short_) {
    return CAIRN_ETRUNCATED;
  }
  if (n > RAFTMUX_CONF_MAX) {
    return CAIRN_EBADFRAME;
  }
  raft_configuration_init(c);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t id = raftmux_get64(r);
    uint8_t role = raftmux_get8(r);
    uint8_t pad = raftmux_get8(r);
    uint16_t alen = raftmux_get16(r);
    if (alen > RAFTMUX_ADDRESS_MAX || pad != 0) {
      raft_configuration_close(c);
      return CAIRN_EBADFRAME;
    }
    const uint8_t *a = raftmux_take(r, alen);
    if (r->short_) {
      raft_configuration_close(c);
      return CAIRN_ETRUNCATED;
    }
    char addr[RAFTMUX_ADDRESS_MAX + 1];
    memcpy(addr, a, alen);
    addr[alen] = '\0';
    /* raft_configuration_add asserts a non-zero id. */
    if (strlen(addr) != alen || id == 0) {
      raft_configuration_close(c);
      return CAIRN_EBADFRAME;
    }
    int rv = raft_configuration_add(c, id, addr, role);
    if (rv != 0) {
      raft_configuration_close(c);
      return rv == RAFT_NOMEM ? CAIRN_ENOMEM : CAIRN_EBADFRAME;
    }
  }
  return 0;
}

static int raftmux_decode_is(struct raftmux_rd *r, struct raft_install_snapshot *is)
{
  is->term = raftmux_get64(r);
  is->last_index = raftmux_get64(r);
  is->last_term = raftmux_get64(r);
  is->conf_index = raftmux_get64(r);
  int rv = raftmux_decode_conf(r, &is->conf);
  if (rv != 0) {
    return rv;
  }
  uint64_t dlen = raftmux_get64(r);
  if (r->short_ || dlen != r->len - r->off) {
    raft_configuration_close(&is->conf);
    return CAIRN_ETRUNCATED;
  }
  is->data.len = (size_t)dlen;
  is->data.base = raft_malloc(dlen > 0 ? (size_t)dlen : 1);
  if (is->data.base == NULL) {
    raft_configuration_close(&is->conf);
    return CAIRN_ENOMEM;
  }
  memcpy(is->data.base, raftmux_take(r, (size_t)dlen), (size_t)dlen);
  return 0;
}

static int raftmux_decode_body(struct raftmux_rd *r, struct raft_message *m)
{
  switch (m->type) {
  case RAFT_IO_REQUEST_VOTE: {
    struct raft_request_vote *rv = &m->request_vote;
    rv->term = raftmux_get64(r);
    rv->candidate_id = raftmux_get64(r);
    rv->last_log_index = raftmux_get64(r);
    rv->last_log_term = raftmux_get64(r);
    uint32_t flags = raftmux_get32(r);
    if ((flags & ~3u) != 0) {
      return CAIRN_EBADFRAME;
    }
    rv->disrupt_leader = (flags & 1u) != 0;
    rv->pre_vote = (flags & 2u) != 0;
    return 0;
  }
  case RAFT_IO_REQUEST_VOTE_RESULT: {
    struct raft_request_vote_result *rr = &m->request_vote_result;
    rr->term = raftmux_get64(r);
    uint8_t granted = raftmux_get8(r);
    uint8_t pre = raftmux_get8(r);
    if (granted > 1 || pre > 2) {
      return CAIRN_EBADFRAME;
    }
    rr->vote_granted = granted == 1;
    rr->pre_vote = pre == 1   ? raft_tribool_true
                   : pre == 2 ? raft_tribool_false
                              : raft_tribool_unknown;
    return 0;
  }
  case RAFT_IO_APPEND_ENTRIES:
    return raftmux_decode_ae(r, &m->append_entries);
  case RAFT_IO_APPEND_ENTRIES_RESULT:
    m->append_entries_result.term = raftmux_get64(r);
    m->append_entries_result.rejected = raftmux_get64(r);
    m->append_entries_result.last_log_index = raftmux_get64(r);
    return 0;
  case RAFT_IO_INSTALL_SNAPSHOT:
    return raftmux_decode_is(r, &m->install_snapshot);
  case RAFT_IO_TIMEOUT_NOW:
    m->timeout_now.term = raftmux_get64(r);
    m->timeout_now.last_log_index = raftmux_get64(r);
    m->timeout_now.last_log_term = raftmux_get64(r);
    return 0;
  default:
    return CAIRN_EUNSUPPORTED;
  }
}

int raftmux_decode(const uint8_t *p, size_t len, struct raft_message *m, uint64_t *gid, char *addr)
{
  int rv = raftmux_peek(p, len, gid);
  if (rv != 0) {
    return rv;
  }
  size_t alen = p[3];
  if (alen == 0 || le_get32(p + 4) != 0) {
    return CAIRN_EBADFRAME;
  }
  memset(m, 0, sizeof *m);
  m->type = p[2];
  m->server_id = le_get64(p + 16);
  struct raftmux_rd r = {p, len, RAFTMUX_HEADER, false};
  const uint8_t *a = raftmux_take(&r, alen);
  if (a == NULL) {
    return CAIRN_ETRUNCATED;
  }
  memcpy(addr, a, alen);
  addr[alen] = '\0';
  if (strlen(addr) != alen) {
    return CAIRN_EBADFRAME;
  }
  m->server_address = addr;
  rv = raftmux_decode_body(&r, m);
  if (rv == 0 && (r.short_ || r.off != len)) {
    raftmux_message_free(m);
    rv = CAIRN_ETRUNCATED;
  }
  return rv;
}

void raftmux_message_free(struct raft_message *m)
{
  if (m->type == RAFT_IO_APPEND_ENTRIES) {
    struct raft_append_entries *ae = &m->append_entries;
    if (ae->n_entries > 0) {
      raft_free(ae->entries[0].batch); /* one batch for all (raftmux_decode_ae) */
    }
    raft_free(ae->entries);
    ae->entries = NULL;
    ae->n_entries = 0;
  } else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
    raft_configuration_close(&m->install_snapshot.conf);
    raft_free(m->install_snapshot.data.base);
    m->install_snapshot.data.base = NULL;
  }
}
