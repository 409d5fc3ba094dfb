/* wal.c - the node-wide write-ahead log: in-memory index, record encoding
 * and the group-commit write path. See wal.h for the contract and
 * wal_internal.h for the byte layout; replay at open is wal_recover.c. */
#include "cluster/wal_internal.h"

#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void wal_fmt(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

/* Makes room for one more element in a growing array (doubling). Returns
 * 0 or CAIRN_ENOMEM (the array is unchanged). */
int wal_grow(void *arrp, size_t *cap, size_t n, size_t elem)
{
  if (n < *cap) {
    return 0;
  }
  size_t c = *cap ? *cap * 2 : 2; /* a group's locations: a quiet one holds few */
  void **arr = arrp;
  void *nv = realloc(*arr, c * elem);
  if (nv == NULL) {
    return CAIRN_ENOMEM;
  }
  *arr = nv;
  *cap = c;
  return 0;
}

/* ---- names and headers ---- */

void wal_seg_name(uint64_t seq, char *buf, size_t len)
{
  snprintf(buf, len, "wal-%016" PRIx64 ".log", seq);
}

void wal_seg_path(const struct wal *w, uint64_t seq, char *buf, size_t len)
{
  char name[32];
  wal_seg_name(seq, name, sizeof name);
  snprintf(buf, len, "%s/%s", w->dir, name);
}

void wal_spare_name(uint64_t id, char *buf, size_t len)
{
  snprintf(buf, len, "spare-%016" PRIx64 ".log", id);
}

void wal_seg_header_put(uint8_t *p, uint64_t seq)
{
  memcpy(p, WAL_MAGIC, 8);
  le_put64(p + 8, seq);
  le_put32(p + 16, WAL_FORMAT_VERSION);
  le_put32(p + 20, crc32c(p, 20));
}

uint32_t wal_seg_header_ok(const uint8_t *buf, size_t len, uint64_t seq)
{
  if (len < WAL_SEG_HEADER || memcmp(buf, WAL_MAGIC, 8) != 0 || le_get64(buf + 8) != seq ||
      le_get32(buf + 20) != crc32c(buf, 20)) {
    return 0;
  }
  uint32_t v = le_get32(buf + 16);
  return v == 1 || v == WAL_FORMAT_VERSION ? v : 0;
}

/* Version 1 records carry a plain CRC-32C. Version 2 seeds it with the
 * sequence, so a recycled file's stale records fail under the new one. */
uint32_t wal_seg_seed(uint32_t version, uint64_t seq)
{
  if (version < 2) {
    return 0;
  }
  uint8_t b[8];
  le_put64(b, seq);
  return crc32c(b, sizeof b);
}

bool wal_rec_decode(const struct wal_seg *s, const uint8_t *buf, size_t len, size_t off,
                    struct wal_rec *r, char *why, size_t why_len)
{
  if (len - off < WAL_REC_HEADER) {
    snprintf(why, why_len, "only %zu bytes left for a %d-byte record header", len - off,
             WAL_REC_HEADER);
    return false;
  }
  const uint8_t *p = buf + off;
  r->len = le_get32(p + 4);
  r->type = p[8];
  r->etype = p[9];
  r->job_back = le_get32(p + 12);
  r->gid = le_get64(p + 16);
  r->index = le_get64(p + 24);
  r->term = le_get64(p + 32);
  r->payload = p + WAL_REC_HEADER;
  if (r->len > WAL_MAX_PAYLOAD || r->len > len - off - WAL_REC_HEADER) {
    snprintf(why, why_len, "payload length %" PRIu32 " runs past the end of the file", r->len);
    return false;
  }
  if (le_get32(p) != crc32c_extend(s->seed, p + 4, WAL_REC_HEADER - 4 + (size_t)r->len)) {
    snprintf(why, why_len, "checksum mismatch");
    return false;
  }
  /* A record that passes its checksum but breaks the layout was written by
   * something else: damage, not a torn write. */
  uint8_t last_type = s->version >= 2 ? WAL_REC_END : WAL_REC_MOVE;
  bool ok_type = r->type >= WAL_REC_ENTRY && r->type <= last_type &&
                 (r->type != WAL_REC_META || r->etype <= WAL_META_RESET);
  bool ok_len = r->type == WAL_REC_ENTRY || r->type == WAL_REC_MOVE ||
                (r->type == WAL_REC_META ? r->len == WAL_META_PAYLOAD : r->len == 0);
  bool ok_end =
      r->type != WAL_REC_END || (r->etype == 0 && r->gid == 0 && r->index == 0 && r->term == 0);
  /* Raft indexes start at 1 and never near the top of the range, where
   * index + 1 (a group's next) would wrap. */
  bool ok_index = r->index < WAL_MAX_INDEX;
  if (r->type == WAL_REC_META && r->len == WAL_META_PAYLOAD) {
    ok_index =
        le_get64(r->payload + 16) < WAL_MAX_INDEX && le_get64(r->payload + 32) < WAL_MAX_INDEX;
  }
  if (!ok_type || !ok_len || !ok_end || !ok_index || le_get16(p + 10) != 0) {
    snprintf(why, why_len, "record type %u of length %" PRIu32 " does not fit the format", r->type,
             r->len);
    return false;
  }
  return true;
}

/* ---- groups ---- */

static size_t wal_group_slot(const struct wal *w, uint64_t gid)
{
  size_t lo = 0, hi = w->ngroups;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (w->groups[mid]->id < gid) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

struct wal_group *wal_group_find(const struct wal *w, uint64_t gid)
{
  size_t i = wal_group_slot(w, gid);
  return i < w->ngroups && w->groups[i]->id == gid ? w->groups[i] : NULL;
}

struct wal_group *wal_group_get(struct wal *w, uint64_t gid, uint64_t first)
{
  size_t i = wal_group_slot(w, gid);
  if (i < w->ngroups && w->groups[i]->id == gid) {
    return w->groups[i];
  }
  if (wal_grow(&w->groups, &w->groups_cap, w->ngroups, sizeof *w->groups) != 0) {
    return NULL;
  }
  struct wal_group *g = calloc(1, sizeof *g);
  if (g == NULL) {
    return NULL;
  }
  g->id = gid;
  g->first = first;
  memmove(w->groups + i + 1, w->groups + i, (w->ngroups - i) * sizeof *w->groups);
  w->groups[i] = g;
  w->ngroups++;
  return g;
}

struct wal_seg *wal_seg_find(const struct wal *w, uint64_t seq)
{
  if (w->nsegs == 0 || seq < w->segs[0].seq || seq - w->segs[0].seq >= w->nsegs) {
    return NULL;
  }
  return &w->segs[seq - w->segs[0].seq];
}

/* The bytes of a record with len bytes of payload. */
static uint64_t wal_rec_bytes(uint32_t len)
{
  return WAL_REC_HEADER + (uint64_t)len;
}

/* Drops one reference to segment seq (a hole's seq 0 names none): the
 * record of bytes there is no longer needed from lsn on. */
static void wal_unref(struct wal *w, uint64_t seq, bool meta, uint64_t bytes, uint64_t lsn)
{
  struct wal_seg *s = wal_seg_find(w, seq);
  if (s == NULL) {
    return; /* replay: a record whose segment was not loaded yet cannot exist */
  }
  uint64_t *refs = meta ? &s->meta_refs : &s->entry_refs;
  if (*refs > 0) {
    (*refs)--;
    s->live_bytes -= bytes <= s->live_bytes ? bytes : s->live_bytes;
  }
  if (lsn > s->release_lsn) {
    s->release_lsn = lsn;
  }
  s->dropped_ms = uv_now(w->loop);
}

static void wal_ref(struct wal *w, uint64_t seq, bool meta, uint64_t bytes)
{
  struct wal_seg *s = wal_seg_find(w, seq);
  if (s != NULL) {
    if (meta) {
      s->meta_refs++;
    } else {
      s->entry_refs++;
    }
    s->live_bytes += bytes;
  }
}

static void wal_loc_unref(struct wal *w, const struct wal_loc *l, uint64_t lsn)
{
  wal_unref(w, l->seq, false, wal_rec_bytes(l->len), lsn);
}

/* Replay may leave holes at either end after a drop: the range is kept
 * between entries it has seen. */
static void wal_group_trim(struct wal_group *g)
{
  while (g->n > 0 && g->locs[g->head].seq == 0) {
    g->head++;
    g->n--;
    g->first++;
  }
  while (g->n > 0 && g->locs[g->head + g->n - 1].seq == 0) {
    g->n--;
  }
  if (g->n == 0) {
    g->head = 0;
  }
}

/* Drops entries [from, next) of g, releasing their segments at lsn. */
static void wal_group_drop_tail(struct wal *w, struct wal_group *g, uint64_t from, uint64_t lsn)
{
  while (g->n > 0 && g->first + g->n - 1 >= from) {
    wal_loc_unref(w, &g->locs[g->head + g->n - 1], lsn);
    g->n--;
  }
  wal_group_trim(g);
}

/* Drops entries below before, releasing their segments at lsn. */
static void wal_group_drop_head(struct wal *w, struct wal_group *g, uint64_t before, uint64_t lsn)
{
  while (g->n > 0 && g->first < before) {
    wal_loc_unref(w, &g->locs[g->head], lsn);
    g->head++;
    g->n--;
    g->first++;
  }
  wal_group_trim(g);
}

/* Room for one more loc at the end of g. Returns 0 or CAIRN_ENOMEM. */
static int wal_group_room(struct wal_group *g)
{
  if (g->head + g->n < g->cap) {
    return 0;
  }
  if (g->head > g->n) { /* compact rather than grow */
    memmove(g->locs, g->locs + g->head, g->n * sizeof *g->locs);
    g->head = 0;
    return 0;
  }
  return wal_grow(&g->locs, &g->cap, g->head + g->n, sizeof *g->locs);
}

/* Appends l at index first+n of g (holes before it up to index, replay
 * only). Returns 0 or CAIRN_ENOMEM. */
static int wal_group_push(struct wal *w, struct wal_group *g, uint64_t index,
                          const struct wal_loc *l)
{
  if (g->n == 0) {
    g->first = index;
    g->head = 0;
  }
  while (index - g->first >= g->n) { /* index >= first: no overflow near UINT64_MAX */
    if (wal_group_room(g) != 0) {
      wal_group_trim(g); /* holes pushed so far go again */
      return CAIRN_ENOMEM;
    }
    g->locs[g->head + g->n] = g->first + g->n == index ? *l : (struct wal_loc){0};
    g->n++;
  }
  wal_ref(w, l->seq, false, wal_rec_bytes(l->len));
  return 0;
}

/* Puts l at index, below first, of g (holes between), replay only.
 * Returns 0 or CAIRN_ENOMEM. */
static int wal_group_prepend(struct wal *w, struct wal_group *g, uint64_t index,
                             const struct wal_loc *l)
{
  size_t k = (size_t)(g->first - index);
  if (g->head < k) {
    size_t cap = g->n + k;
    struct wal_loc *nl = malloc(cap * sizeof *nl);
    if (nl == NULL) {
      return CAIRN_ENOMEM;
    }
    memcpy(nl + k, g->locs + g->head, g->n * sizeof *nl);
    free(g->locs);
    g->locs = nl;
    g->cap = cap;
    g->head = k;
  }
  g->head -= k;
  g->n += k;
  g->first = index;
  g->locs[g->head] = *l;
  for (size_t i = 1; i < k; i++) {
    g->locs[g->head + i] = (struct wal_loc){0};
  }
  wal_ref(w, l->seq, false, wal_rec_bytes(l->len));
  return 0;
}

/* Whether a replayed record may leave k index slots unfilled: at most
 * WAL_MAX_HOLES (wal_internal.h). The writer never leaves any (k == 0). */
static bool wal_holes_ok(uint64_t k)
{
  return k <= WAL_MAX_HOLES;
}

int wal_apply_entry(struct wal *w, uint64_t gid, uint64_t index, uint64_t term, uint8_t type,
                    uint64_t seq, uint64_t off, uint32_t len, uint64_t lsn)
{
  (void)lsn;
  struct wal_group *g = wal_group_get(w, gid, index);
  if (g == NULL) {
    return CAIRN_ENOMEM;
  }
  /* A group holding no entries starts wherever its first append says
   * (after a snapshot install; or, at replay, where deleted segments held
   * its earlier history). */
  /* An entry past next leaves holes (replay only: the entries between
   * were in deleted segments and MOVE records bring them later); one
   * below next never follows. */
  if (g->n > 0 && (index < g->first + g->n || !wal_holes_ok(index - (g->first + g->n)))) {
    return CAIRN_EINDEX;
  }
  struct wal_loc l = {term, seq, off, len, type};
  return wal_group_push(w, g, index, &l);
}

int wal_apply_move(struct wal *w, uint64_t gid, uint64_t index, uint64_t term, uint8_t type,
                   uint64_t seq, uint64_t off, uint32_t len, uint64_t lsn)
{
  struct wal_group *g = wal_group_get(w, gid, index);
  if (g == NULL) {
    return CAIRN_ENOMEM;
  }
  struct wal_loc l = {term, seq, off, len, type};
  if (g->n > 0 && index >= g->first && index < g->first + g->n) {
    struct wal_loc *at = &g->locs[g->head + (index - g->first)];
    wal_loc_unref(w, at, lsn);
    *at = l;
    wal_ref(w, seq, false, wal_rec_bytes(len));
    return 0;
  }
  if (g->n == 0 || index >= g->first + g->n) {
    if (g->n > 0 && !wal_holes_ok(index - (g->first + g->n))) {
      return CAIRN_EINDEX;
    }
    return wal_group_push(w, g, index, &l);
  }
  if (!wal_holes_ok(g->first - index)) {
    return CAIRN_EINDEX;
  }
  return wal_group_prepend(w, g, index, &l);
}

int wal_check_holes(struct wal *w)
{
  for (size_t i = 0; i < w->ngroups; i++) {
    const struct wal_group *g = w->groups[i];
    for (size_t k = 0; k < g->n; k++) {
      if (g->locs[g->head + k].seq == 0) {
        wal_fmt(w->errmsg, sizeof w->errmsg,
                "%s: group %" PRIu64 " entry %" PRIu64 " has no record (between entries %" PRIu64
                " and %" PRIu64 ")",
                w->dir, g->id, g->first + k, g->first, g->first + g->n - 1);
        return CAIRN_ECORRUPT;
      }
    }
  }
  return 0;
}

int wal_apply_truncate(struct wal *w, uint64_t gid, uint64_t index, uint64_t lsn)
{
  struct wal_group *g = wal_group_get(w, gid, index);
  if (g == NULL) {
    return CAIRN_ENOMEM;
  }
  wal_group_drop_tail(w, g, index, lsn);
  if (g->n == 0) {
    g->first = index; /* next == index */
  }
  return 0;
}

int wal_apply_meta(struct wal *w, uint64_t gid, const uint64_t meta[5], bool reset, uint64_t seq,
                   uint64_t lsn)
{
  struct wal_group *g = wal_group_get(w, gid, meta[4]);
  if (g == NULL) {
    return CAIRN_ENOMEM;
  }
  if (g->has_meta) {
    wal_unref(w, g->meta_seq, true, wal_rec_bytes(WAL_META_PAYLOAD), lsn);
  }
  g->term = meta[0];
  g->vote = meta[1];
  g->snap_index = meta[2];
  g->snap_term = meta[3];
  uint64_t first = meta[4];
  if (reset || first >= g->first + g->n) {
    wal_group_drop_tail(w, g, g->first, lsn);
    g->first = first;
  } else {
    wal_group_drop_head(w, g, first, lsn);
  }
  g->has_meta = true;
  g->meta_seq = seq;
  wal_ref(w, seq, true, wal_rec_bytes(WAL_META_PAYLOAD));
  return 0;
}

void wal_apply_remove(struct wal *w, uint64_t gid, uint64_t lsn)
{
  size_t i = wal_group_slot(w, gid);
  if (i >= w->ngroups || w->groups[i]->id != gid) {
    return;
  }
  struct wal_group *g = w->groups[i];
  wal_group_drop_tail(w, g, g->first, lsn);
  if (g->has_meta) {
    wal_unref(w, g->meta_seq, true, wal_rec_bytes(WAL_META_PAYLOAD), lsn);
  }
  free(g->locs);
  free(g);
  memmove(w->groups + i, w->groups + i + 1, (w->ngroups - i - 1) * sizeof *w->groups);
  w->ngroups--;
}

/* ---- encoding into the pending buffer ---- */

int wal_seg_push(struct wal *w, uint64_t seq)
{
  if (wal_grow(&w->segs, &w->segs_cap, w->nsegs, sizeof *w->segs) != 0) {
    return CAIRN_ENOMEM;
  }
  w->segs[w->nsegs++] = (struct wal_seg){.seq = seq,
                                         .fd = -1,
                                         .version = WAL_FORMAT_VERSION,
                                         .seed = wal_seg_seed(WAL_FORMAT_VERSION, seq),
                                         .size = WAL_SEG_HEADER,
                                         .dropped_ms = uv_now(w->loop)};
  w->st.last_seq = seq;
  if (w->nsegs == 1) {
    w->st.first_seq = seq;
  }
  return 0;
}

/* The pending chunk of segment seq (the newest), created if needed. */
static struct wal_chunk *wal_chunk_for(struct wal *w, struct wal_seg *s, bool create)
{
  if (w->npend > 0 && w->pend[w->npend - 1].seq == s->seq) {
    return &w->pend[w->npend - 1];
  }
  if (wal_grow(&w->pend, &w->pend_cap, w->npend, sizeof *w->pend) != 0) {
    return NULL;
  }
  struct wal_chunk *c = &w->pend[w->npend++];
  *c =
      (struct wal_chunk){.seq = s->seq, .off = create ? 0 : s->size, .create = create, .fd = s->fd};
  if (create) {
    c->cap = WAL_CHUNK_MIN;
    c->buf = malloc(c->cap);
    if (c->buf == NULL) {
      w->npend--;
      return NULL;
    }
    wal_seg_header_put(c->buf, s->seq);
    c->len = WAL_SEG_HEADER;
    if (w->nspares > 0) { /* its bytes overwrite a spare's (wal.h, "Recycling") */
      const struct wal_spare *sp = &w->spares[--w->nspares];
      c->spare = sp->id;
      s->file_bytes = sp->bytes;
      w->st.segments_recycled++;
    }
  }
  return c;
}

/* Room for more bytes in c. An empty chunk starts at hint bytes (the
 * last job's largest chunk): doubling from 4 KiB to a loop turn's few
 * hundred KiB under load copied each byte about twice more (realloc was
 * 5 % of a node's CPU at 10,000 partitions). */
static int wal_chunk_reserve(struct wal_chunk *c, size_t more, size_t hint)
{
  if (c->cap - c->len >= more) {
    return 0;
  }
  size_t cap = c->cap ? c->cap : hint < WAL_CHUNK_MIN ? WAL_CHUNK_MIN : hint;
  while (cap - c->len < more) {
    cap *= 2;
  }
  uint8_t *b = realloc(c->buf, cap);
  if (b == NULL) {
    return CAIRN_ENOMEM;
  }
  c->buf = b;
  c->cap = cap;
  return 0;
}

/* Writes one record's bytes at the end of chunk c of segment s (room
 * reserved) and accounts for them; returns where it starts. */
static uint64_t wal_rec_put(struct wal *w, struct wal_seg *s, struct wal_chunk *c, uint8_t type,
                            uint8_t etype, uint64_t gid, uint64_t index, uint64_t term,
                            const void *payload, uint32_t len)
{
  size_t rec_len = WAL_REC_HEADER + (size_t)len;
  uint8_t *p = c->buf + c->len;
  uint64_t at = c->off + c->len;
  le_put32(p + 4, len);
  p[8] = type;
  p[9] = etype;
  le_put16(p + 10, 0);
  le_put32(p + 12, (uint32_t)(at - c->off));
  le_put64(p + 16, gid);
  le_put64(p + 24, index);
  le_put64(p + 32, term);
  if (len > 0) {
    memcpy(p + WAL_REC_HEADER, payload, len);
  }
  le_put32(p, crc32c_extend(s->seed, p + 4, rec_len - 4));
  c->len += rec_len;
  s->size += rec_len;
  w->lsn += rec_len;
  w->st.records++;
  w->st.bytes += rec_len;
  return at;
}

int wal_seal(struct wal *w, struct wal_seg *s)
{
  struct wal_chunk *c = wal_chunk_for(w, s, false);
  if (c == NULL || wal_chunk_reserve(c, WAL_REC_HEADER, w->chunk_hint) != 0) {
    return CAIRN_ENOMEM;
  }
  (void)wal_rec_put(w, s, c, WAL_REC_END, 0, 0, 0, 0, NULL, 0);
  s->sealed = true;
  wal_kick(w);
  return 0;
}

/* Whether the next record of rec_len bytes needs a new segment: there is
 * none, the newest is closed or of an older format, or full (room is kept
 * for its END record). */
static bool wal_must_roll(const struct wal *w, const struct wal_seg *s, size_t rec_len)
{
  if (s == NULL || s->sealed || s->version != WAL_FORMAT_VERSION) {
    return true;
  }
  return s->size > WAL_SEG_HEADER && s->size + rec_len + WAL_REC_HEADER > w->segment_bytes;
}

/* Where the next record of rec_len bytes goes: the newest segment, or a
 * new one when it is full. */
static int wal_place(struct wal *w, size_t rec_len, struct wal_seg **out, struct wal_chunk **cout)
{
  struct wal_seg *s = w->nsegs ? &w->segs[w->nsegs - 1] : NULL;
  bool roll = wal_must_roll(w, s, rec_len);
  if (roll) {
    if (s != NULL && !s->sealed && s->version == WAL_FORMAT_VERSION) {
      int rv = wal_seal(w, s);
      if (rv != 0) {
        return rv;
      }
    }
    int rv = wal_seg_push(w, s ? s->seq + 1 : w->next_seq);
    if (rv != 0) {
      return rv;
    }
    s = &w->segs[w->nsegs - 1];
  }
  struct wal_chunk *c = wal_chunk_for(w, s, roll);
  if (c == NULL || wal_chunk_reserve(c, rec_len, w->chunk_hint) != 0) {
    return CAIRN_ENOMEM;
  }
  *out = s;
  *cout = c;
  return 0;
}

int wal_emit(struct wal *w, uint8_t type, uint8_t etype, uint64_t gid, uint64_t index,
             uint64_t term, const void *payload, uint32_t len, uint64_t *seq, uint64_t *off)
{
  struct wal_seg *s;
  struct wal_chunk *c;
  int rv = wal_place(w, WAL_REC_HEADER + (size_t)len, &s, &c);
  if (rv != 0) {
    return rv;
  }
  *off = wal_rec_put(w, s, c, type, etype, gid, index, term, payload, len);
  *seq = s->seq;
  wal_kick(w);
  return 0;
}

static void wal_queue_req(struct wal *w, struct wal_req *req, wal_cb cb)
{
  if (cb == NULL) {
    return;
  }
  req->cb = cb;
  req->lsn = w->lsn;
  req->next = NULL;
  if (w->req_tail) {
    w->req_tail->next = req;
  } else {
    w->req_head = req;
  }
  w->req_tail = req;
}

/* Whether a write call may go ahead: the log is open and not fatal, and
 * a callback comes with its request. */
static int wal_usable(const struct wal *w, const struct wal_req *req, wal_cb cb)
{
  if (w->fatal != 0) {
    return CAIRN_EFATAL;
  }
  if (w->closing) {
    return CAIRN_ECLOSED;
  }
  return cb != NULL && req == NULL ? CAIRN_EINVAL : 0;
}

int wal_emit_meta(struct wal *w, bool reset, uint64_t gid, uint64_t term, uint64_t vote,
                  uint64_t snap_index, uint64_t snap_term, uint64_t first)
{
  uint64_t m[5] = {term, vote, snap_index, snap_term, first};
  uint8_t p[WAL_META_PAYLOAD];
  for (int i = 0; i < 5; i++) {
    le_put64(p + 8 * i, m[i]);
  }
  uint64_t seq, off;
  int rv =
      wal_emit(w, WAL_REC_META, reset ? WAL_META_RESET : 0, gid, 0, 0, p, sizeof p, &seq, &off);
  if (rv != 0) {
    return rv;
  }
  return wal_apply_meta(w, gid, m, reset, seq, w->lsn);
}

/* ---- the public write calls ---- */

int wal_append(struct wal *w, struct wal_req *req, uint64_t gid, uint64_t index,
               const struct wal_entry *entries, unsigned n, wal_cb cb)
{
  int rv = wal_usable(w, req, cb);
  if (rv != 0) {
    return rv;
  }
  if (n == 0 || index >= WAL_MAX_INDEX || n >= WAL_MAX_INDEX - index) {
    return CAIRN_EINVAL;
  }
  w->append_ms = uv_now(w->loop);
  const struct wal_group *g = wal_group_find(w, gid);
  if (g != NULL && g->n > 0 && index != g->first + g->n) {
    return CAIRN_EINDEX;
  }
  for (unsigned i = 0; i < n; i++) {
    if (entries[i].len > WAL_MAX_PAYLOAD) {
      return CAIRN_ETOOLARGE;
    }
  }
  for (unsigned i = 0; i < n; i++) {
    uint64_t seq, off;
    const struct wal_entry *e = &entries[i];
    rv = wal_emit(w, WAL_REC_ENTRY, e->type, gid, index + i, e->term, e->buf, e->len, &seq, &off);
    if (rv == 0) {
      rv = wal_apply_entry(w, gid, index + i, e->term, e->type, seq, off, e->len, w->lsn);
    }
    if (rv != 0) {
      /* Entries before i are encoded already: the log and its index no
       * longer agree on what was asked, so nothing more is written. */
      w->fatal = rv;
      wal_fmt(w->errmsg, sizeof w->errmsg, "append of group %" PRIu64 " index %" PRIu64 ": %s", gid,
              index + i, cairn_strerror(rv));
      return rv;
    }
  }
  wal_queue_req(w, req, cb);
  return 0;
}

int wal_truncate(struct wal *w, struct wal_req *req, uint64_t gid, uint64_t index, wal_cb cb)
{
  int rv = wal_usable(w, req, cb);
  if (rv != 0) {
    return rv;
  }
  if (index >= WAL_MAX_INDEX) {
    return CAIRN_EINVAL;
  }
  const struct wal_group *g = wal_group_find(w, gid);
  if (g == NULL) {
    return CAIRN_ENOTFOUND;
  }
  if (index < g->first) {
    return CAIRN_EINDEX;
  }
  uint64_t seq, off;
  rv = wal_emit(w, WAL_REC_TRUNCATE, 0, gid, index, 0, NULL, 0, &seq, &off);
  if (rv == 0) {
    rv = wal_apply_truncate(w, gid, index, w->lsn);
  }
  /* A group left with no entry and no metadata would be held by nothing
   * once the segments of its records go (and the cleaner makes that
   * soon): a replay would not know it. Its metadata, written now, holds
   * it (and its next index) as a current record. */
  g = wal_group_find(w, gid);
  if (rv == 0 && g != NULL && g->n == 0 && !g->has_meta) {
    rv = wal_emit_meta(w, false, gid, 0, 0, 0, 0, index);
  }
  if (rv == 0) {
    wal_queue_req(w, req, cb);
  }
  return rv;
}

int wal_set_meta(struct wal *w, struct wal_req *req, uint64_t gid, uint64_t term, uint64_t vote,
                 wal_cb cb)
{
  int rv = wal_usable(w, req, cb);
  if (rv != 0) {
    return rv;
  }
  const struct wal_group *g = wal_group_find(w, gid);
  uint64_t si = g ? g->snap_index : 0, st = g ? g->snap_term : 0, first = g ? g->first : 1;
  rv = wal_emit_meta(w, false, gid, term, vote, si, st, first);
  if (rv == 0) {
    wal_queue_req(w, req, cb);
  }
  return rv;
}

int wal_snapshot(struct wal *w, struct wal_req *req, uint64_t gid, uint64_t snap_index,
                 uint64_t snap_term, uint64_t first, wal_cb cb)
{
  int rv = wal_usable(w, req, cb);
  if (rv != 0) {
    return rv;
  }
  if (snap_index >= WAL_MAX_INDEX || first >= WAL_MAX_INDEX) {
    return CAIRN_EINVAL;
  }
  const struct wal_group *g = wal_group_find(w, gid);
  if (g != NULL && first < g->first) {
    first = g->first; /* what is dropped already stays dropped */
  }
  rv = wal_emit_meta(w, false, gid, g ? g->term : 0, g ? g->vote : 0, snap_index, snap_term, first);
  if (rv == 0) {
    wal_queue_req(w, req, cb);
  }
  return rv;
}

int wal_reset(struct wal *w, struct wal_req *req, uint64_t gid, uint64_t snap_index,
              uint64_t snap_term, wal_cb cb)
{
  int rv = wal_usable(w, req, cb);
  if (rv != 0) {
    return rv;
  }
  if (snap_index >= WAL_MAX_INDEX - 1) {
    return CAIRN_EINVAL;
  }
  const struct wal_group *g = wal_group_find(w, gid);
  rv = wal_emit_meta(w, true, gid, g ? g->term : 0, g ? g->vote : 0, snap_index, snap_term,
                     snap_index + 1);
  if (rv == 0) {
    wal_queue_req(w, req, cb);
  }
  return rv;
}

int wal_remove(struct wal *w, struct wal_req *req, uint64_t gid, wal_cb cb)
{
  int rv = wal_usable(w, req, cb);
  if (rv != 0) {
    return rv;
  }
  if (wal_group_find(w, gid) == NULL) {
    return CAIRN_ENOTFOUND;
  }
  uint64_t seq, off;
  rv = wal_emit(w, WAL_REC_REMOVE, 0, gid, 0, 0, NULL, 0, &seq, &off);
  if (rv == 0) {
    wal_apply_remove(w, gid, w->lsn);
    wal_queue_req(w, req, cb);
  }
  return rv;
}

/* ---- open and close ---- */

int wal_open(uv_loop_t *loop, const char *dir, const struct wal_opts *opts, struct wal **out,
             char *errmsg)
{
  errmsg[0] = '\0';
  struct wal *w = calloc(1, sizeof *w);
  if (w == NULL || (w->dir = strdup(dir)) == NULL) {
    free(w);
    snprintf(errmsg, WAL_ERRMSG_SIZE, "%s: out of memory", dir);
    return CAIRN_ENOMEM;
  }
  w->loop = loop;
  w->segment_bytes = opts && opts->segment_bytes ? opts->segment_bytes : WAL_DEFAULT_SEGMENT_BYTES;
  w->clean_mode = opts ? opts->clean : WAL_CLEAN_AUTO;
  w->next_seq = 1;
  int rv = fs_mkdir_p(dir);
  if (rv != 0) {
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s: mkdir: %s", dir, cairn_strerror(rv));
  } else {
    rv = wal_recover(w);
  }
  if (rv == 0) {
    rv = uv_prepare_init(loop, &w->prepare);
  }
  if (rv != 0) {
    wal_fmt(errmsg, WAL_ERRMSG_SIZE, "%s", w->errmsg);
    w->closing = true;
    wal_finish_close(w); /* the prepare handle was never initialized */
    return rv;
  }
  w->prepare.data = w;
  w->handles_open = 1;
  rv = wal_clean_init(w);
  if (rv != 0) {
    wal_fmt(errmsg, WAL_ERRMSG_SIZE, "%s: cleaner: %s", dir, cairn_strerror(rv));
    w->closing = true;
    wal_finish_close(w);
    return rv;
  }
  *out = w;
  return 0;
}

/* Drops the in-memory index, the pending bytes and the open files. */
static void wal_forget(struct wal *w)
{
  for (size_t i = 0; i < w->ngroups; i++) {
    free(w->groups[i]->locs);
    free(w->groups[i]);
  }
  for (size_t i = 0; i < w->nsegs; i++) {
    if (w->segs[i].fd >= 0) {
      close(w->segs[i].fd);
    }
  }
  for (size_t i = 0; i < w->npend; i++) {
    free(w->pend[i].buf);
  }
  for (size_t i = 0; i < w->ndrops; i++) {
    free(w->drops[i].path);
  }
  free(w->drops);
  free(w->pend);
  free(w->segs);
  free(w->groups);
  w->drops = NULL;
  w->pend = NULL;
  w->segs = NULL;
  w->groups = NULL;
  w->ndrops = w->drops_cap = w->npend = w->pend_cap = 0;
  w->nspares = w->spares_coming = 0; /* a replay lists the spares on disk */
  w->nsegs = w->segs_cap = w->ngroups = w->groups_cap = 0;
}

static void wal_free(struct wal *w)
{
  wal_forget(w);
  free(w->clean);
  free(w->dir);
  free(w);
}

int wal_revive(struct wal *w, char *errmsg)
{
  errmsg[0] = '\0';
  if (w->fatal == 0 || w->job != NULL || w->closing || w->req_head != NULL || wal_clean_busy(w)) {
    return w->fatal == 0 ? 0 : CAIRN_EFATAL;
  }
  wal_forget(w);
  wal_clean_reset(w);
  w->next_seq = 1;
  w->lsn = w->durable_lsn = 0;
  int rv = wal_recover(w);
  if (rv != 0) {
    /* What is on disk cannot be read back: stay fatal. */
    wal_fmt(errmsg, WAL_ERRMSG_SIZE, "%s", w->errmsg);
    wal_forget(w);
    return rv;
  }
  log_warn("wal", "%s: reopened after: log was fatal (%s)", w->dir, cairn_strerror(w->fatal));
  w->fatal = 0;
  w->errmsg[0] = '\0';
  return 0;
}

static void wal_on_closed(uv_handle_t *h)
{
  struct wal *w = h->data;
  if (--w->handles_open > 0) {
    return; /* the other handle's callback frees */
  }
  wal_close_cb cb = w->close_cb;
  void *data = w->close_data;
  wal_free(w);
  if (cb) {
    cb(data);
  }
}

void wal_finish_close(struct wal *w)
{
  wal_fire(wal_take_reqs(w), CAIRN_ECLOSED);
  if (w->prepare.data == NULL) { /* wal_open failed before the handle */
    wal_free(w);
    return;
  }
  wal_clean_close(w, wal_on_closed);
  uv_close((uv_handle_t *)&w->prepare, wal_on_closed);
}

void wal_close_if_drained(struct wal *w)
{
  if (w->closing && w->job == NULL && !w->in_done && !wal_clean_busy(w)) {
    wal_finish_close(w);
  }
}

void wal_close(struct wal *w, wal_close_cb cb, void *data)
{
  if (w->closing) {
    return;
  }
  w->closing = true;
  w->close_cb = cb;
  w->close_data = data;
  wal_close_if_drained(w);
}

/* ---- reads and introspection ---- */

int wal_group_info(const struct wal *w, uint64_t gid, struct wal_group_info *info)
{
  const struct wal_group *g = wal_group_find(w, gid);
  if (g == NULL) {
    return CAIRN_ENOTFOUND;
  }
  *info = (struct wal_group_info){g->term,      g->vote,  g->snap_index,
                                  g->snap_term, g->first, g->first + g->n};
  return 0;
}

/* The pending or in-flight bytes holding [off, off+len) of segment seq. */
static const uint8_t *wal_find_buffered(const struct wal *w, uint64_t seq, uint64_t off, size_t len)
{
  const struct wal_chunk *lists[2] = {w->job ? w->job->chunks : NULL, w->pend};
  size_t counts[2] = {w->job ? w->job->nchunks : 0, w->npend};
  for (int l = 0; l < 2; l++) {
    for (size_t i = 0; i < counts[l]; i++) {
      const struct wal_chunk *c = &lists[l][i];
      if (c->seq == seq && off >= c->off && off + len <= c->off + c->len) {
        return c->buf + (off - c->off);
      }
    }
  }
  return NULL;
}

int wal_read(struct wal *w, uint64_t gid, uint64_t index, struct wal_entry *e)
{
  const struct wal_group *g = wal_group_find(w, gid);
  if (g == NULL) {
    return CAIRN_ENOTFOUND;
  }
  if (index < g->first || index >= g->first + g->n) {
    return CAIRN_EOFFSET;
  }
  const struct wal_loc *l = &g->locs[g->head + (index - g->first)];
  size_t rec_len = WAL_REC_HEADER + (size_t)l->len;
  uint8_t *rec = malloc(rec_len);
  if (rec == NULL) {
    return CAIRN_ENOMEM;
  }
  const uint8_t *buffered = wal_find_buffered(w, l->seq, l->off, rec_len);
  const struct wal_seg *s = wal_seg_find(w, l->seq);
  int rv = 0;
  if (buffered != NULL) {
    memcpy(rec, buffered, rec_len);
  } else if (s == NULL || s->fd < 0) {
    rv = CAIRN_ECORRUPT;
  } else {
    size_t got;
    rv = fs_pread_full(s->fd, rec, rec_len, (off_t)l->off, &got);
    if (rv == 0 && got != rec_len) {
      rv = CAIRN_ECORRUPT;
    }
  }
  struct wal_rec r;
  char why[128];
  if (rv == 0 && (s == NULL || !wal_rec_decode(s, rec, rec_len, 0, &r, why, sizeof why) ||
                  r.gid != gid || r.index != index)) {
    rv = CAIRN_ECORRUPT;
  }
  if (rv != 0) {
    free(rec);
    return rv;
  }
  /* The payload moves to the front so the caller frees one pointer. */
  memmove(rec, rec + WAL_REC_HEADER, l->len);
  *e = (struct wal_entry){
      .term = l->term, .type = l->type, .buf = l->len ? rec : NULL, .len = l->len};
  if (l->len == 0) {
    free(rec);
  }
  return 0;
}

size_t wal_groups(const struct wal *w, uint64_t *ids, size_t max)
{
  for (size_t i = 0; i < w->ngroups && i < max; i++) {
    ids[i] = w->groups[i]->id;
  }
  return w->ngroups;
}

int wal_fatal(const struct wal *w)
{
  return w->fatal;
}

const char *wal_errmsg(const struct wal *w)
{
  return w->errmsg;
}

void wal_get_stats(const struct wal *w, struct wal_stats *st)
{
  *st = w->st;
  st->groups = w->ngroups;
  st->durable_lsn = w->durable_lsn;
  st->total_bytes = st->live_bytes = 0;
  for (size_t i = 0; i < w->nsegs; i++) {
    st->total_bytes += w->segs[i].size;
    st->live_bytes += w->segs[i].live_bytes;
  }
}

uint64_t wal_seg_durable(const struct wal *w, uint64_t seq)
{
  const struct wal_seg *s = wal_seg_find(w, seq);
  return s ? s->written : 0;
}

int wal_check(const struct wal *w, char *errmsg, size_t len)
{
  uint64_t *entry = calloc(w->nsegs + 1, sizeof *entry);
  uint64_t *meta = calloc(w->nsegs + 1, sizeof *meta);
  uint64_t *live = calloc(w->nsegs + 1, sizeof *live);
  int rv = entry && meta && live ? 0 : -1;
  snprintf(errmsg, len, "out of memory");
  for (size_t i = 0; rv == 0 && i < w->ngroups; i++) {
    const struct wal_group *g = w->groups[i];
    if (i > 0 && w->groups[i - 1]->id >= g->id) {
      snprintf(errmsg, len, "groups out of order at %zu", i);
      rv = -1;
    }
    for (size_t k = 0; rv == 0 && k < g->n; k++) {
      const struct wal_loc *l = &g->locs[g->head + k];
      const struct wal_seg *s = wal_seg_find(w, l->seq);
      if (s == NULL) {
        snprintf(errmsg, len,
                 "group %" PRIu64 " entry %" PRIu64 " in a dropped segment (%" PRIu64
                 ", 0: a hole)",
                 g->id, g->first + k, l->seq);
        rv = -1;
      } else {
        entry[s - w->segs]++;
        live[s - w->segs] += wal_rec_bytes(l->len);
      }
    }
    if (rv == 0 && g->has_meta) {
      const struct wal_seg *s = wal_seg_find(w, g->meta_seq);
      if (s == NULL) {
        snprintf(errmsg, len, "group %" PRIu64 " metadata in a dropped segment", g->id);
        rv = -1;
      } else {
        meta[s - w->segs]++;
        live[s - w->segs] += wal_rec_bytes(WAL_META_PAYLOAD);
      }
    }
  }
  for (size_t i = 0; rv == 0 && i < w->nsegs; i++) {
    const struct wal_seg *s = &w->segs[i];
    if ((i > 0 && s->seq != w->segs[i - 1].seq + 1) || s->entry_refs != entry[i] ||
        s->meta_refs != meta[i] || s->live_bytes != live[i]) {
      snprintf(errmsg, len,
               "segment %" PRIu64 ": refs %" PRIu64 "+%" PRIu64 ", counted %" PRIu64 "+%" PRIu64
               ", live bytes %" PRIu64 ", counted %" PRIu64,
               s->seq, s->entry_refs, s->meta_refs, entry[i], meta[i], s->live_bytes, live[i]);
      rv = -1;
    }
  }
  free(entry);
  free(meta);
  free(live);
  return rv;
}
