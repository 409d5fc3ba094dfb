/* rgroup_ticker.c - the node's driver of its replicas' Raft ticks: awake
 * groups every heartbeat, asleep ones every slow period (rgroup_ticker.h). */
#include "cluster/rgroup_ticker.h"

#include "cluster/rgroup.h"
#include "cluster/rgroup_pace.h"
#include "cluster/rgroup_raft.h"
#include "common/err.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

/* ---- the lists ---- */

/* Room for n entries. Returns 0 or CAIRN_ENOMEM. */
static int rgroup_tick_list_reserve(struct rgroup_tick_list *l, size_t n)
{
  if (n <= l->cap) {
    return 0;
  }
  size_t cap = l->cap > 0 ? l->cap : 64;
  while (cap < n) {
    cap *= 2;
  }
  struct rgroup **v = realloc(l->v, cap * sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  l->v = v;
  l->cap = cap;
  return 0;
}

static struct rgroup_tick_list *rgroup_ticker_list(struct rgroup_ticker *t, bool asleep)
{
  return asleep ? &t->asleep : &t->awake;
}

/* Appends rg to the list asleep or awake. Returns 0 or CAIRN_ENOMEM. */
static int rgroup_ticker_push(struct rgroup_ticker *t, struct rgroup *rg, bool asleep)
{
  struct rgroup_tick_list *l = rgroup_ticker_list(t, asleep);
  int rv = rgroup_tick_list_reserve(l, l->n + 1);
  if (rv != 0) {
    return rv;
  }
  rg->ticker_slot = l->n;
  rg->ticker_asleep = asleep;
  l->v[l->n++] = rg;
  return 0;
}

/* Takes rg out of its list: a hole while that list is being ticked, else
 * the last entry moves into its slot. */
static void rgroup_ticker_pull(struct rgroup_ticker *t, struct rgroup *rg)
{
  struct rgroup_tick_list *l = rgroup_ticker_list(t, rg->ticker_asleep);
  size_t i = rg->ticker_slot;
  rg->ticker_slot = SIZE_MAX;
  if (l->ticking) {
    l->v[i] = NULL;
    l->holes = true;
    return;
  }
  l->v[i] = l->v[--l->n];
  if (i < l->n) {
    l->v[i]->ticker_slot = i;
  }
}

/* Moves rg to the other list; it stays where it is if that list cannot
 * grow (awake stays awake; an asleep group is still ticked slowly). */
static void rgroup_ticker_move(struct rgroup_ticker *t, struct rgroup *rg, bool asleep)
{
  struct rgroup_tick_list *to = rgroup_ticker_list(t, asleep);
  if (rgroup_tick_list_reserve(to, to->n + 1) != 0) {
    log_warn("ticker", "group %llu: out of memory moving it to the %s ticks",
             (unsigned long long)rg->group_id, asleep ? "slow" : "fast");
    return;
  }
  rgroup_ticker_pull(t, rg);
  int rv = rgroup_ticker_push(t, rg, asleep); /* room reserved above */
  (void)rv;
  if (asleep) {
    /* Idle from here on: what raft's log grew to while busy goes back. */
    rgroup_raft_trim(rg);
    t->sleeps++;
  } else {
    t->wakes++;
  }
}

/* After a tick of list l: closes its holes. */
static void rgroup_tick_list_compact(struct rgroup_tick_list *l)
{
  l->ticking = false;
  if (!l->holes) {
    return;
  }
  size_t w = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (l->v[i] != NULL) {
      l->v[i]->ticker_slot = w;
      l->v[w++] = l->v[i];
    }
  }
  l->n = w;
  l->holes = false;
}

/* ---- the two timers ---- */

static bool rgroup_ticker_tickable(const struct rgroup *rg)
{
  return rg != NULL && rg->raft_open && !rg->raft_closing;
}

/* Ticks each group of the awake (asleep: false) or asleep list, then
 * moves to the other list those whose fitness to sleep changed
 * (rgroup_pace_may_sleep): an awake group that may sleep now, an asleep one
 * that may no longer. An asleep group's tick runs its election timer, a
 * leader's majority check and rgroup's own tick on the running clock. */
static void rgroup_ticker_walk(struct rgroup_ticker *t, bool asleep)
{
  struct rgroup_tick_list *l = rgroup_ticker_list(t, asleep);
  l->ticking = true;
  for (size_t i = 0; i < l->n; i++) {
    struct rgroup *rg = l->v[i];
    if (!rgroup_ticker_tickable(rg)) {
      continue;
    }
    rgroup_raft_tick(rg);
    /* The tick may have closed it (a failed write is closed later, from
     * a timer; a close takes it off the ticker): look again. */
    if (l->v[i] == rg && rgroup_pace_may_sleep(rg) != asleep) {
      rgroup_ticker_move(t, rg, !asleep);
    }
  }
  rgroup_tick_list_compact(l);
}

/* Every heartbeat: the awake groups. */
static void rgroup_ticker_on_fast(uv_timer_t *h) { rgroup_ticker_walk(h->data, false); }

/* Every slow period (an election timeout): the asleep groups. */
static void rgroup_ticker_on_slow(uv_timer_t *h) { rgroup_ticker_walk(h->data, true); }

/* ---- membership ---- */

int rgroup_ticker_add(struct rgroup *rg)
{
  struct rgroup_ticker *t = rg->opts.ticker;
  if (t == NULL || rg->ticker_slot != SIZE_MAX) {
    return 0;
  }
  /* Both lists hold room for every group, so that moving one between
   * them does not allocate (a wake must not fail for memory). */
  size_t all = t->awake.n + t->asleep.n + 1;
  int rv = rgroup_tick_list_reserve(&t->awake, all);
  if (rv == 0) {
    rv = rgroup_tick_list_reserve(&t->asleep, all);
  }
  if (rv == 0) {
    rv = rgroup_ticker_push(t, rg, false);
  }
  if (rv != 0) {
    return rv;
  }
  unsigned ms = rg->raft_tick_ms > 0 ? rg->raft_tick_ms : 100;
  if (t->msecs == 0 || ms < t->msecs) {
    t->msecs = ms;
    uv_timer_start(&t->timer, rgroup_ticker_on_fast, ms, ms);
  }
  unsigned slow = rg->opts.election_ms > ms ? rg->opts.election_ms : ms;
  if (t->slow_ms == 0 || slow < t->slow_ms) {
    t->slow_ms = slow;
    uv_timer_start(&t->slow_timer, rgroup_ticker_on_slow, slow, slow);
  }
  return 0;
}

void rgroup_ticker_remove(struct rgroup *rg)
{
  struct rgroup_ticker *t = rg->opts.ticker;
  if (t == NULL || rg->ticker_slot == SIZE_MAX) {
    return;
  }
  rgroup_ticker_pull(t, rg);
  rg->ticker_asleep = false;
}

void rgroup_ticker_wake(struct rgroup *rg)
{
  struct rgroup_ticker *t = rg->opts.ticker;
  if (t == NULL || rg->ticker_slot == SIZE_MAX || !rg->ticker_asleep) {
    return;
  }
  rgroup_ticker_move(t, rg, false);
}

size_t rgroup_ticker_wake_following(struct rgroup_ticker *t, uint64_t node_id)
{
  struct rgroup_tick_list *l = &t->asleep;
  size_t woken = 0;
  /* Backwards: a wake outside a slow tick moves the last entry into the
   * slot emptied, which this walk has already seen. */
  for (size_t i = l->n; i-- > 0;) {
    struct rgroup *rg = l->v[i];
    if (rg == NULL) {
      continue;
    }
    const struct raft *r = &rg->raft;
    if (node_id == 0 || (rg->raft_open && r->state == RAFT_FOLLOWER &&
                         r->follower_state.current_leader.id == node_id)) {
      rg->coal_follow_ms = 0; /* asleep again only once a beat is accepted */
      rgroup_ticker_move(t, rg, false);
      woken++;
    }
  }
  return woken;
}

size_t rgroup_ticker_asleep(const struct rgroup_ticker *t)
{
  size_t n = 0;
  for (size_t i = 0; i < t->asleep.n; i++) {
    n += t->asleep.v[i] != NULL ? 1 : 0;
  }
  return n;
}

/* ---- lifecycle ---- */

int rgroup_ticker_init(struct rgroup_ticker *t, uv_loop_t *loop)
{
  memset(t, 0, sizeof *t);
  if (uv_timer_init(loop, &t->timer) != 0) {
    return CAIRN_EFATAL;
  }
  if (uv_timer_init(loop, &t->slow_timer) != 0) {
    return CAIRN_EFATAL; /* not reached: libuv's timer init makes no system call */
  }
  t->timer.data = t;
  t->slow_timer.data = t;
  return 0;
}

static void rgroup_ticker_on_closed(uv_handle_t *h)
{
  struct rgroup_ticker *t = h->data;
  if (--t->closing == 0 && t->close_cb != NULL) {
    t->close_cb(t);
  }
}

void rgroup_ticker_close(struct rgroup_ticker *t, void (*cb)(struct rgroup_ticker *t))
{
  free(t->awake.v);
  free(t->asleep.v);
  t->awake = (struct rgroup_tick_list){0};
  t->asleep = (struct rgroup_tick_list){0};
  t->close_cb = cb;
  t->closing = 2;
  uv_timer_stop(&t->timer);
  uv_timer_stop(&t->slow_timer);
  uv_close((uv_handle_t *)&t->timer, rgroup_ticker_on_closed);
  uv_close((uv_handle_t *)&t->slow_timer, rgroup_ticker_on_closed);
}
