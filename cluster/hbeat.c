/* hbeat.c - coalesced heartbeats: one frame per node pair per beat period
 * for every idle group this node leads, and the answers (hbeat.h). */
#include "cluster/hbeat.h"

#include "cluster/rgroup_pace.h"
#include "common/err.h"
#include "common/log.h"
#include "format/endian.h"

#include <stdlib.h>
#include <string.h>

/* ---- the payload ---- */

unsigned hbeat_period_ms(unsigned heartbeat_ms, unsigned idle_ms)
{
  if (idle_ms == 0) {
    return 0;
  }
  return idle_ms / 2 > heartbeat_ms ? idle_ms / 2 : heartbeat_ms;
}

void hbeat_encode_header(uint8_t *buf, enum hbeat_type type, uint32_t n)
{
  buf[0] = HBEAT_VERSION;
  buf[1] = (uint8_t)type;
  buf[2] = 0;
  buf[3] = 0;
  le_put32(buf + 4, n);
}

int hbeat_decode(const uint8_t *p, size_t len, enum hbeat_type *type, uint32_t *n)
{
  if (len < HBEAT_HEADER) {
    return CAIRN_EBADLEN;
  }
  if (p[0] != HBEAT_VERSION || p[1] < HBEAT_BEAT || p[1] > HBEAT_NACK) {
    return CAIRN_EUNSUPPORTED;
  }
  uint32_t count = le_get32(p + 4);
  if (count == 0 || count > HBEAT_MAX_GROUPS || len != HBEAT_HEADER + (size_t)count * HBEAT_ENTRY) {
    return CAIRN_EBADLEN;
  }
  *type = (enum hbeat_type)p[1];
  *n = count;
  return 0;
}

void hbeat_entry(const uint8_t *p, uint32_t i, uint64_t *group_id, uint64_t *term, uint64_t *index)
{
  const uint8_t *e = p + HBEAT_HEADER + (size_t)i * HBEAT_ENTRY;
  *group_id = le_get64(e);
  *term = le_get64(e + 8);
  *index = le_get64(e + 16);
}

int hbeat_list_add(struct hbeat_list *l, uint64_t group_id, uint64_t term, uint64_t index)
{
  if (l->n == l->cap) {
    size_t cap = l->cap > 0 ? l->cap * 2 : 64;
    uint8_t *b = realloc(l->buf, HBEAT_HEADER + cap * HBEAT_ENTRY);
    if (b == NULL) {
      return CAIRN_ENOMEM;
    }
    l->buf = b;
    l->cap = cap;
  }
  uint8_t *e = l->buf + HBEAT_HEADER + l->n * HBEAT_ENTRY;
  le_put64(e, group_id);
  le_put64(e + 8, term);
  le_put64(e + 16, index);
  l->n++;
  return 0;
}

/* The groups of l's entries [from, to) that this node leads go back to
 * Raft's heartbeats (their beat was refused or could not go). */
static void hbeat_wake(struct hbeat *hb, const struct hbeat_list *l, size_t from, size_t to)
{
  size_t hint = 0;
  for (size_t i = from; i < to; i++) {
    uint64_t gid, term, index;
    hbeat_entry(l->buf, (uint32_t)i, &gid, &term, &index);
    struct part *pt = parts_get_next(hb->ps, gid, &hint);
    if (pt != NULL && pt->state == PART_OPEN && pt->rg.coal_quiet) {
      rgroup_coal_refused(&pt->rg, term);
      hb->woken++;
    }
  }
}

/* Sends l to node_id as frames of type, HBEAT_MAX_GROUPS entries at most
 * each. Each frame's header goes in the 8 bytes before its first entry
 * (the tail of an entry already sent: nwatch_send copies). Returns the
 * number of entries sent; those after are not. */
static size_t hbeat_send_list(struct hbeat *hb, uint64_t node_id, enum hbeat_type type,
                              struct hbeat_list *l)
{
  size_t sent = 0;
  while (sent < l->n) {
    size_t k = l->n - sent < HBEAT_MAX_GROUPS ? l->n - sent : HBEAT_MAX_GROUPS;
    uint8_t *h = l->buf + sent * HBEAT_ENTRY;
    hbeat_encode_header(h, type, (uint32_t)k);
    if (nwatch_send(hb->nw, node_id, h, HBEAT_HEADER + k * HBEAT_ENTRY) != 0) {
      break;
    }
    sent += k;
  }
  return sent;
}

/* ---- the beating side ---- */

static struct hbeat_peer *hbeat_peer_get(struct hbeat *hb, uint64_t id)
{
  for (size_t i = 0; i < hb->npeers; i++) {
    if (hb->peers[i].id == id) {
      return &hb->peers[i];
    }
  }
  return NULL;
}

/* The peer id, added if new (healthy if connected). */
static struct hbeat_peer *hbeat_peer_add(struct hbeat *hb, uint64_t id)
{
  struct hbeat_peer *p = hbeat_peer_get(hb, id);
  if (p != NULL) {
    return p;
  }
  if (hb->npeers == hb->cap) {
    size_t cap = hb->cap > 0 ? hb->cap * 2 : 8;
    struct hbeat_peer *v = realloc(hb->peers, cap * sizeof *v);
    if (v == NULL) {
      return NULL;
    }
    hb->peers = v;
    hb->cap = cap;
  }
  p = &hb->peers[hb->npeers++];
  memset(p, 0, sizeof *p);
  p->id = id;
  p->healthy = nwatch_peer_state(hb->nw, id) == NWATCH_UP;
  return p;
}

/* Is p connected and answering? A peer silent for HBEAT_ANSWER_PERIODS
 * periods is not, this once; its clock restarts with the next beat. */
static bool hbeat_peer_check(struct hbeat *hb, struct hbeat_peer *p, uint64_t now)
{
  if (nwatch_peer_state(hb->nw, p->id) != NWATCH_UP) {
    p->waiting_ms = 0;
    return false;
  }
  if (p->waiting_ms != 0 && now - p->waiting_ms > HBEAT_ANSWER_PERIODS * hb->period_ms) {
    hb->silent_peers++;
    log_info("hbeat",
             "node %llu has not answered coalesced heartbeats for %llu ms: its "
             "groups go back to Raft's heartbeats",
             (unsigned long long)p->id, (unsigned long long)(now - p->waiting_ms));
    p->waiting_ms = 0;
    return false;
  }
  return true;
}

/* Puts a coalesced group's beat in each follower's list, or wakes it when
 * a follower's node cannot be reached this way. */
static void hbeat_group(struct hbeat *hb, struct rgroup *rg, uint64_t term, uint64_t index)
{
  const struct raft_configuration *cf = &rg->raft.configuration;
  for (unsigned i = 0; i < cf->n; i++) {
    uint64_t id = cf->servers[i].id;
    if (id == hb->self_id) {
      continue;
    }
    struct hbeat_peer *p = hbeat_peer_add(hb, id);
    if (p == NULL || !p->healthy) {
      rgroup_coal_refused(rg, term);
      hb->woken++;
      return;
    }
  }
  for (unsigned i = 0; i < cf->n; i++) {
    uint64_t id = cf->servers[i].id;
    if (id == hb->self_id) {
      continue;
    }
    if (hbeat_list_add(&hbeat_peer_get(hb, id)->out, rg->group_id, term, index) != 0) {
      rgroup_coal_refused(rg, term); /* the followers listed so far are merely beaten */
      hb->woken++;
      return;
    }
  }
}

/* ---- nodes that stopped beating this one ---- */

/* Every check period: a node that beat this one and has been silent for
 * HBEAT_ANSWER_PERIODS periods gets the asleep groups following it woken
 * (once per silence), so their election timers are looked at on the fast
 * tick again (hbeat.h, "Asleep followers"). */
static void hbeat_check_leaders(struct hbeat *hb, uint64_t now)
{
  for (size_t i = 0; i < hb->npeers; i++) {
    struct hbeat_peer *p = &hb->peers[i];
    if (p->beat_ms == 0 || now - p->beat_ms <= HBEAT_ANSWER_PERIODS * hb->check_ms) {
      continue;
    }
    size_t woken = rgroup_ticker_wake_following(&hb->ps->ticker, p->id);
    hb->silent_leaders++;
    hb->sleepers_woken += woken;
    log_info("hbeat",
             "node %llu has not beaten this node for %llu ms: %zu asleep groups "
             "following it woken",
             (unsigned long long)p->id, (unsigned long long)(now - p->beat_ms), woken);
    p->beat_ms = 0;
  }
}

static void hbeat_on_timer(uv_timer_t *t)
{
  struct hbeat *hb = t->data;
  struct parts *ps = hb->ps;
  uint64_t now = uv_now(hb->loop);
  hbeat_check_leaders(hb, now);
  if (hb->period_ms == 0) {
    return; /* this node only answers */
  }
  for (size_t i = 0; i < hb->npeers; i++) {
    struct hbeat_peer *p = &hb->peers[i];
    p->out.n = 0;
    p->healthy = hbeat_peer_check(hb, p, now);
  }
  if (ps->closing) {
    return;
  }
  for (size_t i = 0; i < ps->n; i++) {
    struct part *pt = ps->v[i];
    raft_term term;
    raft_index index;
    if (pt->state == PART_OPEN && rgroup_coal_beat(&pt->rg, &term, &index)) {
      hbeat_group(hb, &pt->rg, term, index);
    }
  }
  for (size_t i = 0; i < hb->npeers; i++) {
    struct hbeat_peer *p = &hb->peers[i];
    if (p->out.n == 0) {
      continue;
    }
    size_t sent = hbeat_send_list(hb, p->id, HBEAT_BEAT, &p->out);
    if (sent > 0) {
      hb->beats_sent++;
      hb->entries_sent += sent;
      if (p->waiting_ms == 0) {
        p->waiting_ms = now;
      }
    }
    hbeat_wake(hb, &p->out, sent, p->out.n);
  }
}

/* ---- the answering side ---- */

static void hbeat_on_beat(struct hbeat *hb, uint64_t leader_id, const uint8_t *payload, uint32_t n)
{
  hb->beats_received++;
  struct hbeat_peer *p = hbeat_peer_add(hb, leader_id);
  if (p != NULL) {
    p->beat_ms = uv_now(hb->loop);
  }
  hb->ack.n = 0;
  hb->nack.n = 0;
  size_t hint = 0; /* the beat names its groups in increasing order */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t gid, term, index;
    hbeat_entry(payload, i, &gid, &term, &index);
    struct part *pt = parts_get_next(hb->ps, gid, &hint);
    bool ok = pt != NULL && pt->state == PART_OPEN && !hb->ps->closing &&
              rgroup_coal_follow(&pt->rg, leader_id, term, index);
    struct hbeat_list *l = ok ? &hb->ack : &hb->nack;
    if (hbeat_list_add(l, gid, term, 0) != 0) {
      continue; /* out of memory: unanswered, the leader's timeout covers it */
    }
    if (ok) {
      hb->accepted++;
    } else {
      hb->refused++;
    }
  }
  /* Lost answers are covered by the leader's timeout (hbeat.h). */
  (void)hbeat_send_list(hb, leader_id, HBEAT_ACK, &hb->ack);
  (void)hbeat_send_list(hb, leader_id, HBEAT_NACK, &hb->nack);
}

static void hbeat_on_answer(struct hbeat *hb, uint64_t follower_id, enum hbeat_type type,
                            const uint8_t *payload, uint32_t n)
{
  struct hbeat_peer *p = hbeat_peer_get(hb, follower_id);
  if (p != NULL) {
    p->waiting_ms = 0;
  }
  size_t hint = 0; /* answers keep the beat's order */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t gid, term, index;
    hbeat_entry(payload, i, &gid, &term, &index);
    struct part *pt = parts_get_next(hb->ps, gid, &hint);
    if (pt == NULL || pt->state != PART_OPEN) {
      continue;
    }
    if (type == HBEAT_ACK) {
      rgroup_coal_acked(&pt->rg, follower_id, term);
    } else if (pt->rg.coal_quiet) {
      log_debug("hbeat", "group %llu: node %llu refused the coalesced beat of term %llu",
                (unsigned long long)gid, (unsigned long long)follower_id, (unsigned long long)term);
      rgroup_coal_refused(&pt->rg, term);
      hb->woken++;
    }
  }
}

void hbeat_frame(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload, size_t len,
                 void *data)
{
  (void)nw;
  struct hbeat *hb = data;
  enum hbeat_type type;
  uint32_t n;
  int rv = hbeat_decode(payload, len, &type, &n);
  if (rv != 0) {
    hb->bad++;
    uint64_t now = uv_now(hb->loop);
    if (now - hb->bad_log_ms >= 1000) {
      hb->bad_log_ms = now;
      log_warn("hbeat", "node %llu: dropped a coalesced heartbeat payload of %zu bytes: %s",
               (unsigned long long)sender_id, len, cairn_strerror(rv));
    }
    return;
  }
  if (type == HBEAT_BEAT) {
    hbeat_on_beat(hb, sender_id, payload, n);
  } else {
    hbeat_on_answer(hb, sender_id, type, payload, n);
  }
}

/* ---- lifecycle ---- */

void hbeat_init(struct hbeat *hb, uv_loop_t *loop, struct parts *ps, struct nodewatch *nw,
                uint64_t self_id, unsigned period_ms)
{
  memset(hb, 0, sizeof *hb);
  hb->loop = loop;
  hb->ps = ps;
  hb->nw = nw;
  hb->self_id = self_id;
  hb->period_ms = period_ms;
  hb->check_ms = period_ms > 0 ? period_ms : HBEAT_CHECK_MS;
  hb->open = true;
  uv_timer_init(loop, &hb->timer);
  hb->timer.data = hb;
  uv_timer_start(&hb->timer, hbeat_on_timer, hb->check_ms, hb->check_ms);
  nwatch_set_frame_cb(nw, hbeat_frame, hb);
}

static void hbeat_on_closed(uv_handle_t *h)
{
  struct hbeat *hb = h->data;
  for (size_t i = 0; i < hb->npeers; i++) {
    free(hb->peers[i].out.buf);
  }
  free(hb->peers);
  free(hb->ack.buf);
  free(hb->nack.buf);
  hb->peers = NULL;
  hb->npeers = hb->cap = 0;
  hb->ack = (struct hbeat_list){0};
  hb->nack = (struct hbeat_list){0};
  if (hb->close_cb != NULL) {
    hb->close_cb(hb);
  }
}

void hbeat_close(struct hbeat *hb, hbeat_close_cb cb)
{
  if (!hb->open) {
    cb(hb);
    return;
  }
  hb->open = false;
  hb->close_cb = cb;
  nwatch_set_frame_cb(hb->nw, NULL, NULL);
  uv_timer_stop(&hb->timer);
  uv_close((uv_handle_t *)&hb->timer, hbeat_on_closed);
}
