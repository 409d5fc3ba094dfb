/* raftmux.c - the partition groups' Raft messages over one connection per
 * peer node: the frame codec and the send/receive multiplexer (raftmux.h). */
#include "cluster/raftmux.h"

#include "cluster/rgroup.h"
#include "common/err.h"
#include "common/log.h"
#include "format/endian.h"
#include "storage/manifest.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- codec ---- */

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
    (void)raftmux_take(r, 3);
    es[i].buf.len = raftmux_get32(r);
    total += es[i].buf.len;
    if (es[i].type != RAFT_COMMAND && es[i].type != RAFT_BARRIER && es[i].type != RAFT_CHANGE) {
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
    (void)raftmux_get8(r);
    uint16_t alen = raftmux_get16(r);
    if (alen > RAFTMUX_ADDRESS_MAX) {
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

/* ---- the multiplexer ---- */

/* One send whose callback is due, or one held (raftmux_hold) with its
 * encoded frame. */
struct raftmux_send {
  struct raft_io_send *req;
  raft_io_send_cb cb;
  int status;
  struct raftmux_group *mg;
  struct raftmux_send *next;
  uint64_t to;  /* held: the peer's server id */
  uint8_t *buf; /* held: the frame (owned), NULL once sent or failed */
  size_t len;
};

/* The index of gid in mx->groups, or where it would go. */
static size_t raftmux_find(const struct raftmux *mx, uint64_t gid)
{
  size_t lo = 0, hi = mx->ngroups;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (mx->groups[mid]->gid < gid) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static int raftmux_register(struct raftmux *mx, struct raftmux_group *mg)
{
  size_t i = raftmux_find(mx, mg->gid);
  if (i < mx->ngroups && mx->groups[i]->gid == mg->gid) {
    mx->groups[i] = mg; /* a reopened replica replaces the closing one */
    return 0;
  }
  if (mx->ngroups == mx->cap) {
    size_t cap = mx->cap > 0 ? mx->cap * 2 : 64;
    struct raftmux_group **g = realloc(mx->groups, cap * sizeof *g);
    if (g == NULL) {
      return CAIRN_ENOMEM;
    }
    mx->groups = g;
    mx->cap = cap;
  }
  memmove(mx->groups + i + 1, mx->groups + i, (mx->ngroups - i) * sizeof *mx->groups);
  mx->groups[i] = mg;
  mx->ngroups++;
  return 0;
}

static void raftmux_unregister(struct raftmux *mx, struct raftmux_group *mg)
{
  /* A closing group sends nothing more (raftmux_io_send). */
  free(mg->address);
  mg->address = NULL;
  size_t i = raftmux_find(mx, mg->gid);
  if (i >= mx->ngroups || mx->groups[i] != mg) {
    return; /* replaced by a newer attachment of the same gid */
  }
  memmove(mx->groups + i, mx->groups + i + 1, (mx->ngroups - i - 1) * sizeof *mx->groups);
  mx->ngroups--;
}

static void raftmux_on_idle(uv_idle_t *h);

/* Fires the raftmux_defer callbacks queued so far; those they queue wait
 * for the next iteration. */
static void raftmux_run_deferred(struct raftmux *mx)
{
  struct raftmux_group *mg = mx->defer_head;
  mx->defer_head = mx->defer_tail = NULL;
  while (mg != NULL) {
    struct raftmux_group *next = mg->defer_next;
    void (*cb)(struct raftmux_group * mg) = mg->deferred;
    mg->deferred = NULL;
    mg->defer_next = NULL;
    cb(mg); /* may free mg */
    mg = next;
  }
}

void raftmux_defer(struct raftmux_group *mg, void (*cb)(struct raftmux_group *mg))
{
  struct raftmux *mx = mg->mx;
  if (!mx->open) {
    cb(mg);
    return;
  }
  assert(mg->deferred == NULL);
  mg->deferred = cb;
  mg->defer_next = NULL;
  if (mx->defer_tail != NULL) {
    mx->defer_tail->defer_next = mg;
  } else {
    mx->defer_head = mg;
  }
  mx->defer_tail = mg;
  uv_idle_start(&mx->idle, raftmux_on_idle);
}

/* Fires every callback queued before this iteration; a callback's own
 * sends queue behind them and fire next time. */
static void raftmux_on_idle(uv_idle_t *h)
{
  struct raftmux *mx = h->data;
  struct raftmux_send *s = mx->done_head;
  mx->done_head = mx->done_tail = NULL;
  uv_idle_stop(&mx->idle);
  while (s != NULL) {
    struct raftmux_send *next = s->next;
    struct raftmux_group *mg = s->mg;
    s->req->cb = s->cb;
    if (s->cb != NULL) { /* raft 0.15 sends a transfer's TimeoutNow without one */
      s->cb(s->req, s->status);
    }
    free(s);
    mg->pending--;
    if (mg->closing && mg->pending == 0 && mg->close_cb != NULL) {
      raft_io_close_cb cb = mg->close_cb;
      mg->close_cb = NULL;
      mg->uv_close(mg->io, cb);
    }
    s = next;
  }
  raftmux_run_deferred(mx);
}

static int raftmux_on_frame(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload,
                            size_t len, void *data)
{
  (void)nw;
  struct raftmux *mx = data;
  uint64_t gid;
  int rv = raftmux_peek(payload, len, &gid);
  if (rv != 0) {
    mx->malformed++;
    log_warn("raftmux", "node %llu: Raft frame of %zu bytes refused: %s",
             (unsigned long long)sender_id, len, cairn_strerror(rv));
    return rv;
  }
  size_t i = raftmux_find(mx, gid);
  struct raftmux_group *mg = i < mx->ngroups && mx->groups[i]->gid == gid ? mx->groups[i] : NULL;
  if (mg == NULL || mg->closing || mg->recv_cb == NULL) {
    mx->unknown++; /* dropped undecoded: Raft tolerates loss */
    return 0;
  }
  struct raft_message m;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  rv = raftmux_decode(payload, len, &m, &gid, addr);
  if (rv == CAIRN_ENOMEM) {
    mx->unknown++; /* lost as on a full socket; Raft retransmits */
    return 0;
  }
  if (rv != 0) {
    mx->malformed++;
    log_warn("raftmux", "node %llu: malformed Raft frame of %zu bytes for group %llu: %s",
             (unsigned long long)sender_id, len, (unsigned long long)gid, cairn_strerror(rv));
    return rv;
  }
  mx->received++;
  mg->recv_cb(mg->io, &m);
  return 0;
}

int raftmux_init(struct raftmux *mx, uv_loop_t *loop, struct nodewatch *nw)
{
  memset(mx, 0, sizeof *mx);
  mx->loop = loop;
  mx->nw = nw;
  int rv = uv_idle_init(loop, &mx->idle);
  if (rv != 0) {
    return rv;
  }
  mx->idle.data = mx;
  mx->open = true;
  nwatch_set_mux_cb(nw, RAFTMUX_TAG, RAFTMUX_MSG_MAX, raftmux_on_frame, mx);
  return 0;
}

static void raftmux_on_closed(uv_handle_t *h)
{
  struct raftmux *mx = h->data;
  raftmux_run_deferred(mx); /* none should be left: every group closed first */
  free(mx->groups);
  free(mx->scratch);
  mx->groups = NULL;
  mx->scratch = NULL;
  mx->ngroups = mx->cap = mx->scratch_cap = 0;
  if (mx->close_cb != NULL) {
    mx->close_cb(mx);
  }
}

void raftmux_close(struct raftmux *mx, void (*cb)(struct raftmux *mx))
{
  if (!mx->open) {
    if (cb != NULL) {
      cb(mx);
    }
    return;
  }
  mx->open = false;
  mx->close_cb = cb;
  nwatch_set_mux_cb(mx->nw, 0, 0, NULL, NULL);
  uv_close((uv_handle_t *)&mx->idle, raftmux_on_closed);
}

int raftmux_attach(struct raftmux *mx, struct raftmux_group *mg, struct raft_io *io, uint64_t gid,
                   uint64_t self_id, const char *address)
{
  size_t alen = address != NULL ? strlen(address) : 0;
  if (alen == 0 || alen > RAFTMUX_ADDRESS_MAX) {
    return CAIRN_EINVAL;
  }
  memset(mg, 0, sizeof *mg);
  mg->mx = mx;
  mg->io = io;
  mg->gid = gid;
  mg->self_id = self_id;
  mg->address = strdup(address);
  if (mg->address == NULL) {
    return CAIRN_ENOMEM;
  }
  mg->uv_start = io->start;
  mg->uv_close = io->close;
  int rv = raftmux_register(mx, mg);
  if (rv != 0) {
    free(mg->address);
    mg->address = NULL;
  }
  return rv;
}

/* Puts s on the queue of callbacks for the loop's next idle phase. */
static void raftmux_done_push(struct raftmux *mx, struct raftmux_send *s)
{
  s->next = NULL;
  if (mx->done_tail != NULL) {
    mx->done_tail->next = s;
  } else {
    mx->done_head = s;
    uv_idle_start(&mx->idle, raftmux_on_idle);
  }
  mx->done_tail = s;
}

/* Queues req's callback for the loop's next idle phase. */
static int raftmux_complete(struct raftmux_group *mg, struct raft_io_send *req, raft_io_send_cb cb,
                            int status)
{
  struct raftmux_send *s = malloc(sizeof *s);
  if (s == NULL) {
    return RAFT_NOMEM;
  }
  *s = (struct raftmux_send){.req = req, .cb = cb, .status = status, .mg = mg};
  mg->pending++;
  raftmux_done_push(mg->mx, s);
  return 0;
}

/* Encodes m into mx's scratch buffer: its length, or why it could not. */
static long raftmux_encode_scratch(struct raftmux_group *mg, const struct raft_message *m)
{
  struct raftmux *mx = mg->mx;
  size_t need = raftmux_encoded_size(m, strlen(mg->address));
  if (need == 0) {
    return CAIRN_EINVAL;
  }
  if (need > RAFTMUX_MSG_MAX) {
    return CAIRN_ETOOLARGE;
  }
  if (need > mx->scratch_cap) {
    uint8_t *b = realloc(mx->scratch, need);
    if (b == NULL) {
      return CAIRN_ENOMEM;
    }
    mx->scratch = b;
    mx->scratch_cap = need;
  }
  return raftmux_encode(mx->scratch, mx->scratch_cap, mg->gid, mg->self_id, mg->address, m);
}

/* A large scratch buffer is not kept for the rare large message. */
static void raftmux_scratch_trim(struct raftmux *mx, size_t used)
{
  if (mx->scratch_cap > (1u << 20) && used <= (1u << 20)) {
    free(mx->scratch);
    mx->scratch = NULL;
    mx->scratch_cap = 0;
  }
}

/* Queues an encoded frame to node to: 0, or why it was not. */
static int raftmux_put(struct raftmux *mx, uint64_t to, const uint8_t *frame, size_t len)
{
  int rv = nwatch_send_bounded(mx->nw, to, frame, len, RAFTMUX_SENDQ_MAX);
  if (rv == 0) {
    mx->sent++;
    mx->sent_bytes += (uint64_t)len;
  } else {
    mx->dropped++;
  }
  return rv;
}

/* Encodes m and queues it: 0, or why it was not. */
static int raftmux_queue(struct raftmux_group *mg, const struct raft_message *m)
{
  struct raftmux *mx = mg->mx;
  long n = raftmux_encode_scratch(mg, m);
  if (n < 0) {
    mx->dropped++;
    return (int)n;
  }
  int rv = raftmux_put(mx, m->server_id, mx->scratch, (size_t)n);
  raftmux_scratch_trim(mx, (size_t)n);
  return rv;
}

/* Encodes m into a frame of its own and holds it behind the group's
 * earlier held sends: 0, or why it could not (then nothing is held). A
 * group over its held bytes' bound drops the send (Raft retransmits). */
static int raftmux_hold_send(struct raftmux_group *mg, struct raft_io_send *req,
                             const struct raft_message *m, raft_io_send_cb cb)
{
  struct raftmux *mx = mg->mx;
  long n = raftmux_encode_scratch(mg, m);
  if (n >= 0 && mg->held_bytes + (size_t)n > RAFTMUX_SENDQ_MAX) {
    n = CAIRN_EQUEUE_FULL;
  }
  if (n < 0) {
    mx->dropped++;
    return (int)n;
  }
  struct raftmux_send *s = malloc(sizeof *s);
  uint8_t *frame = malloc((size_t)n);
  if (s == NULL || frame == NULL) {
    free(s);
    free(frame);
    mx->dropped++;
    return CAIRN_ENOMEM;
  }
  memcpy(frame, mx->scratch, (size_t)n);
  raftmux_scratch_trim(mx, (size_t)n);
  *s = (struct raftmux_send){
      .req = req, .cb = cb, .mg = mg, .to = m->server_id, .buf = frame, .len = (size_t)n};
  if (mg->held_tail != NULL) {
    mg->held_tail->next = s;
  } else {
    mg->held_head = s;
  }
  mg->held_tail = s;
  mg->held_bytes += (size_t)n;
  mg->pending++;
  mx->held++;
  return 0;
}

static void raftmux_log_drop(struct raftmux_group *mg, const struct raft_message *m, int rv)
{
  struct raftmux *mx = mg->mx;
  uint64_t now = uv_now(mx->loop);
  if (rv != CAIRN_EUNREACHABLE && now - mx->bad_log_ms >= 1000) {
    mx->bad_log_ms = now;
    log_warn("raftmux", "group %llu: Raft message type %u to server %llu dropped: %s",
             (unsigned long long)mg->gid, (unsigned)m->type, (unsigned long long)m->server_id,
             cairn_strerror(rv));
  }
}

int raftmux_io_send(struct raftmux_group *mg, struct raft_io_send *req,
                    const struct raft_message *m, raft_io_send_cb cb)
{
  struct raftmux *mx = mg->mx;
  if (mg->closing || !mx->open) {
    return RAFT_CANCELED;
  }
  if (mg->failed != 0) {
    return raftmux_complete(mg, req, cb, mg->failed);
  }
  int rv;
  if (mg->holds > 0) {
    rv = raftmux_hold_send(mg, req, m, cb);
    if (rv == 0) {
      return 0;
    }
  } else {
    rv = raftmux_queue(mg, m);
  }
  if (rv != 0) {
    raftmux_log_drop(mg, m, rv);
  }
  return raftmux_complete(mg, req, cb, rv != 0 ? RAFT_NOCONNECTION : 0);
}

void raftmux_hold(struct raftmux_group *mg)
{
  mg->holds++;
}

bool raftmux_holding(const struct raftmux_group *mg)
{
  return mg->holds > 0;
}

/* Sends (status 0) or fails every held send, in order; their callbacks
 * fire from the loop's next idle phase. */
static void raftmux_flush_held(struct raftmux_group *mg, int status)
{
  struct raftmux *mx = mg->mx;
  struct raftmux_send *s = mg->held_head;
  mg->held_head = mg->held_tail = NULL;
  mg->held_bytes = 0;
  while (s != NULL) {
    struct raftmux_send *next = s->next;
    s->status = status;
    if (status == 0) {
      s->status = raftmux_put(mx, s->to, s->buf, s->len) == 0 ? 0 : RAFT_NOCONNECTION;
    }
    free(s->buf);
    s->buf = NULL;
    raftmux_done_push(mx, s); /* counted in pending since it was held */
    s = next;
  }
}

void raftmux_release(struct raftmux_group *mg, int status)
{
  assert(mg->holds > 0);
  mg->holds--;
  if (status != 0 && mg->failed == 0) {
    mg->failed = status; /* the record's outcome is unknown: never reveal it */
  }
  if (mg->failed != 0) {
    raftmux_flush_held(mg, mg->failed);
    return;
  }
  if (mg->holds > 0) {
    return;
  }
  raftmux_flush_held(mg, mg->closing || !mg->mx->open ? RAFT_CANCELED : 0);
}

int raftmux_io_start(struct raftmux_group *mg, unsigned msecs, raft_io_tick_cb tick,
                     raft_io_recv_cb recv)
{
  int rv = mg->uv_start(mg->io, msecs, tick, recv);
  if (rv == 0) {
    mg->recv_cb = recv;
  }
  return rv;
}

void raftmux_io_close(struct raftmux_group *mg, raft_io_close_cb cb)
{
  mg->closing = true;
  raftmux_unregister(mg->mx, mg);
  if (mg->pending > 0) {
    mg->close_cb = cb; /* raftmux_on_idle closes it after the last callback */
    return;
  }
  mg->uv_close(mg->io, cb);
}

void raftmux_detach(struct raftmux_group *mg)
{
  mg->closing = true;
  raftmux_unregister(mg->mx, mg);
}
