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

void hbeat_encode_header(uint8_t *buf, const struct hbeat_hdr *h)
{
  buf[0] = HBEAT_VERSION;
  buf[1] = (uint8_t)h->type;
  buf[2] = (uint8_t)h->flags;
  buf[3] = (uint8_t)(h->flags >> 8);
  le_put32(buf + 4, h->n);
  le_put64(buf + 8, h->epoch);
  le_put64(buf + 16, h->seq);
}

int hbeat_decode(const uint8_t *p, size_t len, struct hbeat_hdr *h)
{
  if (len < HBEAT_HEADER) {
    return CAIRN_EBADLEN;
  }
  if (p[0] != HBEAT_VERSION || p[1] < HBEAT_BEAT || p[1] > HBEAT_NACK) {
    return CAIRN_EUNSUPPORTED;
  }
  uint32_t count = le_get32(p + 4);
  if (count > HBEAT_MAX_GROUPS || len != HBEAT_HEADER + (size_t)count * HBEAT_ENTRY) {
    return CAIRN_EBADLEN;
  }
  h->type = (enum hbeat_type)p[1];
  h->flags = (uint16_t)(p[2] | (p[3] << 8));
  h->n = count;
  h->epoch = le_get64(p + 8);
  h->seq = le_get64(p + 16);
  return 0;
}

void hbeat_entry(const uint8_t *p, uint32_t i, uint64_t *group_id, uint64_t *term, uint64_t *index)
{
  const uint8_t *e = p + HBEAT_HEADER + (size_t)i * HBEAT_ENTRY;
  *group_id = le_get64(e);
  *term = le_get64(e + 8);
  *index = le_get64(e + 16);
}

int hbeat_list_reserve(struct hbeat_list *l, size_t n)
{
  if (l->buf != NULL && n <= l->cap) {
    return 0;
  }
  size_t cap = l->cap > 0 ? l->cap : 64;
  while (cap < n) {
    cap *= 2;
  }
  uint8_t *b = realloc(l->buf, HBEAT_HEADER + cap * HBEAT_ENTRY);
  if (b == NULL) {
    return CAIRN_ENOMEM;
  }
  l->buf = b;
  l->cap = cap;
  return 0;
}

int hbeat_list_add(struct hbeat_list *l, uint64_t group_id, uint64_t term, uint64_t index)
{
  if (hbeat_list_reserve(l, l->n + 1) != 0) {
    return CAIRN_ENOMEM;
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
    if (index == VOUCH_REVOKED) {
      continue;
    }
    struct part *pt = parts_get_next(hb->ps, gid, &hint);
    if (pt != NULL && pt->state == PART_OPEN && pt->rg.coal_quiet) {
      rgroup_coal_refused(&pt->rg, term);
      hb->woken++;
    }
  }
}

/* Sends l to node_id as frames of h's type, HBEAT_MAX_GROUPS entries at
 * most each, at least one frame even with no entry (a beat vouches, an
 * answer says the beat arrived). Each frame's header goes in the
 * HBEAT_HEADER bytes before its first entry (the tail of an entry already
 * sent: nwatch_send copies). A beat's frames take consecutive sequence
 * numbers from *seq. Returns the number of entries sent, or -1 when not
 * even the first frame went. */
static long hbeat_send_list(struct hbeat *hb, uint64_t node_id, struct hbeat_hdr h,
                            struct hbeat_list *l, uint64_t *seq)
{
  size_t sent = 0;
  bool first = true;
  while (first || sent < l->n) {
    size_t k = l->n - sent < HBEAT_MAX_GROUPS ? l->n - sent : HBEAT_MAX_GROUPS;
    if (l->buf == NULL && hbeat_list_reserve(l, 0) != 0) {
      return first ? -1 : (long)sent;
    }
    uint8_t *buf = l->buf + sent * HBEAT_ENTRY;
    h.n = (uint32_t)k;
    if (seq != NULL) {
      h.seq = ++*seq;
    }
    hbeat_encode_header(buf, &h);
    if (nwatch_send_bounded(hb->nw, node_id, buf, HBEAT_HEADER + k * HBEAT_ENTRY,
                            HBEAT_SENDQ_MAX) != 0) {
      hb->unsent++;
      return first ? -1 : (long)sent;
    }
    sent += k;
    first = false;
  }
  return (long)sent;
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
    p->unanswered = 0;
    return false;
  }
  if (p->waiting_ms != 0 && p->unanswered > HBEAT_ANSWER_PERIODS &&
      now - p->waiting_ms > HBEAT_ANSWER_PERIODS * hb->period_ms) {
    hb->silent_peers++;
    log_info("hbeat",
             "node %llu has not answered coalesced heartbeats for %llu ms: its "
             "groups go back to Raft's heartbeats",
             (unsigned long long)p->id, (unsigned long long)(now - p->waiting_ms));
    p->waiting_ms = 0;
    p->unanswered = 0;
    return false;
  }
  return true;
}

/* Puts a coalesced group's beat in the list of each follower that has not
 * accepted it in its current epoch (every follower when all), or wakes it
 * when a follower's node cannot be reached this way. Returns true when
 * every follower has accepted it already (nothing left to name). */
static bool hbeat_group(struct hbeat *hb, struct rgroup *rg, uint64_t term, uint64_t index,
                        bool all)
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
      return false;
    }
  }
  bool accepted = true;
  for (unsigned i = 0; i < cf->n; i++) {
    uint64_t id = cf->servers[i].id;
    if (id == hb->self_id) {
      continue;
    }
    bool acked = rgroup_coal_acked_by(rg, id);
    accepted = accepted && acked;
    if (acked && !all) {
      continue; /* vouched for by the node's beat */
    }
    if (hbeat_list_add(&hbeat_peer_get(hb, id)->out, rg->group_id, term, index) != 0) {
      rgroup_coal_refused(rg, term); /* the followers listed so far are merely beaten */
      hb->woken++;
      return false;
    }
  }
  return accepted;
}

/* The part of group gid if it is a coalesced leader whose beat goes out
 * (rgroup_coal_beat), else NULL. */
static struct part *hbeat_beating(struct hbeat *hb, uint64_t gid, size_t *hint, uint64_t *term,
                                  uint64_t *index)
{
  struct part *pt = parts_get_next(hb->ps, gid, hint);
  raft_term t;
  raft_index i;
  if (pt == NULL || pt->state != PART_OPEN || !rgroup_coal_beat(&pt->rg, &t, &i)) {
    return NULL;
  }
  *term = t;
  *index = i;
  return pt;
}

/* Every coalesced group this node leads: named to every follower (all),
 * or to those that have not accepted it in their current epoch. */
static void hbeat_scan(struct hbeat *hb, bool all)
{
  struct parts *ps = hb->ps;
  for (size_t i = 0; i < ps->n; i++) {
    struct part *pt = ps->v[i];
    raft_term term;
    raft_index index;
    if (pt->state == PART_OPEN && rgroup_coal_beat(&pt->rg, &term, &index)) {
      (void)hbeat_group(hb, &pt->rg, term, index, all);
    }
  }
}

/* The groups that quiesced lately (vouch_table.to_name): named to the
 * followers that have not accepted them yet (unless the scan just did),
 * and taken off the list once every follower has, or once they are no
 * longer coalesced. */
static void hbeat_name_new(struct hbeat *hb, bool scanned)
{
  struct vouch_table *t = &hb->ps->vouch;
  size_t kept = 0, hint = 0;
  for (size_t i = 0; i < t->nto_name; i++) {
    uint64_t gid = t->to_name[i], term = 0, index = 0;
    struct part *pt = hbeat_beating(hb, gid, &hint, &term, &index);
    bool done = true;
    if (pt != NULL) {
      done =
          scanned ? rgroup_coal_all_acked(&pt->rg) : hbeat_group(hb, &pt->rg, term, index, false);
    }
    if (done) {
      pt = parts_get(hb->ps, gid);
      if (pt != NULL) {
        pt->rg.coal_to_name = false;
      }
      continue;
    }
    t->to_name[kept++] = gid;
  }
  t->nto_name = kept;
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
    if (p->beat_ms == 0) {
      continue;
    }
    /* Counted in checks too: beats waiting unread while this loop stalled
     * are not a silence (hbeat.h). */
    p->quiet_checks++;
    if (p->quiet_checks <= HBEAT_ANSWER_PERIODS ||
        now - p->beat_ms <= HBEAT_ANSWER_PERIODS * hb->check_ms) {
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
    p->quiet_checks = 0;
  }
}

/* Sends p its beat: the revocations queued for it, then the groups named
 * (p->out). A beat that could not go starts a new epoch for p (the
 * follower sees it and drops what this node vouched for) and wakes the
 * groups it named. */
static void hbeat_beat_peer(struct hbeat *hb, struct hbeat_peer *p, struct vouch_peer *vp,
                            uint64_t now)
{
  struct hbeat_hdr h = {.type = HBEAT_BEAT, .epoch = vp->out_epoch};
  long sent = hbeat_send_list(hb, p->id, h, &p->out, &vp->out_seq);
  if (sent < 0) {
    vouch_bump(vp);
    hbeat_wake(hb, &p->out, 0, p->out.n);
    return;
  }
  hb->beats_sent++;
  hb->entries_sent += (uint64_t)sent;
  if (p->waiting_ms == 0) {
    p->waiting_ms = now;
  }
  p->unanswered++;
  if ((size_t)sent < p->out.n) {
    vouch_bump(vp);
    hbeat_wake(hb, &p->out, (size_t)sent, p->out.n);
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
  /* Every HBEAT_FULL_PERIODS periods, and whenever a follower is out of
   * reach or an epoch changed, every coalesced group is looked at. */
  bool all = ++hb->periods % HBEAT_FULL_PERIODS == 0;
  bool scan = all;
  for (size_t i = 0; i < hb->npeers; i++) {
    struct hbeat_peer *p = &hb->peers[i];
    p->out.n = 0;
    p->healthy = hbeat_peer_check(hb, p, now);
    struct vouch_peer *vp = vouch_add(&ps->vouch, p->id);
    if (vp == NULL || !p->healthy) {
      scan = true; /* its groups are woken (hbeat_group) */
      if (vp != NULL) {
        vouch_bump(vp);
      }
      continue;
    }
    scan = scan || vp->out_bumped;
    /* Revocations first: a group revoked and named again in one beat ends
     * accepted. */
    for (size_t k = 0; k < vp->revokes.n; k++) {
      const struct vouch_entry *e = &vp->revokes.v[k];
      if (hbeat_list_add(&p->out, e->group_id, e->term, VOUCH_REVOKED) != 0) {
        vouch_bump(vp); /* nothing vouched for at the new epoch */
        break;
      }
    }
    vp->revokes.n = 0;
  }
  if (ps->closing) {
    return;
  }
  if (scan) {
    hb->scans++;
    hbeat_scan(hb, all);
  }
  hbeat_name_new(hb, scan);
  for (size_t i = 0; i < hb->npeers; i++) {
    struct hbeat_peer *p = &hb->peers[i];
    struct vouch_peer *vp = vouch_get(&ps->vouch, p->id);
    if (vp == NULL || !p->healthy) {
      continue;
    }
    if (scan) {
      vp->out_bumped = false;
    }
    hbeat_beat_peer(hb, p, vp, now);
  }
}

/* ---- the answering side ---- */

/* A beat from leader_id in sequence with the last one? If not (a frame
 * missed, or a new epoch), nothing that node vouched for before holds. */
static void hbeat_follow_sequence(struct hbeat *hb, struct vouch_peer *vp,
                                  const struct hbeat_hdr *h)
{
  if (h->epoch != vp->in_epoch || h->seq != vp->in_next_seq) {
    /* A gap in one epoch, or the first beat this process sees from that
     * node (it may hold acceptances from this node's previous run, made
     * before a restart it did not see): ask for everything again. A new
     * epoch alone does not ask: the leader renames everything after
     * starting one, and asking would start another. */
    bool gap = h->epoch == vp->in_epoch && vp->in_next_seq != 0;
    if (gap || vp->in_next_seq == 0) {
      vp->in_reset = true;
      hb->gaps += gap ? 1 : 0;
    }
    vp->in_gen++;
  }
  vp->in_epoch = h->epoch;
  vp->in_next_seq = h->seq + 1;
  vp->in_ms = uv_now(hb->loop);
}

/* One named group of a beat: revoked, accepted or refused. */
static void hbeat_beat_entry(struct hbeat *hb, uint64_t leader_id, uint64_t gen, uint64_t gid,
                             uint64_t term, uint64_t index, size_t *hint)
{
  struct part *pt = parts_get_next(hb->ps, gid, hint);
  bool open = pt != NULL && pt->state == PART_OPEN && !hb->ps->closing;
  if (index == VOUCH_REVOKED) {
    if (open && pt->rg.coal_vouch_node == leader_id && pt->rg.coal_vouch_term == term) {
      pt->rg.coal_vouch_node = 0;
    }
    return;
  }
  bool ok = open && rgroup_coal_follow(&pt->rg, leader_id, gen, term, index);
  struct hbeat_list *l = ok ? &hb->ack : &hb->nack;
  if (hbeat_list_add(l, gid, term, index) != 0) {
    return; /* out of memory: unanswered, the leader's timeout covers it */
  }
  if (ok) {
    hb->accepted++;
  } else {
    hb->refused++;
  }
}

static void hbeat_on_beat(struct hbeat *hb, uint64_t leader_id, const uint8_t *payload,
                          const struct hbeat_hdr *h)
{
  hb->beats_received++;
  struct hbeat_peer *p = hbeat_peer_add(hb, leader_id);
  if (p != NULL) {
    p->beat_ms = uv_now(hb->loop);
    p->quiet_checks = 0;
  }
  struct vouch_peer *vp = vouch_add(&hb->ps->vouch, leader_id);
  uint64_t gen = 0;
  if (vp != NULL) {
    hbeat_follow_sequence(hb, vp, h);
    gen = vp->in_gen;
  }
  hb->ack.n = 0;
  hb->nack.n = 0;
  size_t hint = 0; /* the beat names its groups in increasing order */
  for (uint32_t i = 0; i < h->n; i++) {
    uint64_t gid, term, index;
    hbeat_entry(payload, i, &gid, &term, &index);
    if (vp == NULL && hbeat_list_add(&hb->nack, gid, term, index) != 0) {
      break; /* out of memory: unanswered, the leader's timeout covers it */
    }
    if (vp == NULL) {
      continue; /* out of memory for the peer's table: refused */
    }
    hbeat_beat_entry(hb, leader_id, gen, gid, term, index, &hint);
  }
  struct hbeat_hdr a = {.type = HBEAT_ACK, .epoch = h->epoch, .seq = h->seq};
  if (vp != NULL) {
    for (size_t k = 0; k < vp->nacks.n; k++) {
      const struct vouch_entry *e = &vp->nacks.v[k];
      if (hbeat_list_add(&hb->nack, e->group_id, e->term, e->index) != 0) {
        break; /* out of memory: the next full beat names them, and they are refused then */
      }
    }
    vp->nacks.n = 0;
    if (vp->in_reset) {
      a.flags |= HBEAT_F_RESET;
      vp->in_reset = false;
    }
  }
  /* Lost answers are covered by the leader's timeout (hbeat.h). */
  (void)hbeat_send_list(hb, leader_id, a, &hb->ack, NULL);
  if (hb->nack.n > 0) {
    a.type = HBEAT_NACK;
    a.flags = 0;
    (void)hbeat_send_list(hb, leader_id, a, &hb->nack, NULL);
  }
}

static void hbeat_on_answer(struct hbeat *hb, uint64_t follower_id, const uint8_t *payload,
                            const struct hbeat_hdr *h)
{
  struct hbeat_peer *p = hbeat_peer_get(hb, follower_id);
  if (p != NULL) {
    p->waiting_ms = 0;
    p->unanswered = 0;
  }
  struct vouch_peer *vp = vouch_get(&hb->ps->vouch, follower_id);
  if (vp == NULL || h->epoch != vp->out_epoch) {
    return; /* an answer to a beat of an epoch that has ended */
  }
  if (h->type == HBEAT_ACK) {
    vp->answered_ms = uv_now(hb->loop);
  }
  size_t hint = 0; /* answers keep the beat's order */
  for (uint32_t i = 0; i < h->n; i++) {
    uint64_t gid, term, index;
    hbeat_entry(payload, i, &gid, &term, &index);
    struct part *pt = parts_get_next(hb->ps, gid, &hint);
    if (pt == NULL || pt->state != PART_OPEN) {
      continue;
    }
    if (h->type == HBEAT_ACK) {
      rgroup_coal_acked(&pt->rg, follower_id, term, index, h->epoch);
    } else if (pt->rg.coal_quiet && rgroup_coal_names(&pt->rg, term, index)) {
      log_debug("hbeat", "group %llu: node %llu refused the coalesced beat of term %llu",
                (unsigned long long)gid, (unsigned long long)follower_id, (unsigned long long)term);
      rgroup_coal_refused(&pt->rg, term);
      hb->woken++;
    }
  }
  if (h->flags & HBEAT_F_RESET) {
    hb->resets++;
    vouch_bump(vp);
  }
}

void hbeat_frame(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload, size_t len,
                 void *data)
{
  (void)nw;
  struct hbeat *hb = data;
  struct hbeat_hdr h;
  int rv = hbeat_decode(payload, len, &h);
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
  if (h.type == HBEAT_BEAT) {
    hbeat_on_beat(hb, sender_id, payload, &h);
  } else {
    hbeat_on_answer(hb, sender_id, payload, &h);
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
