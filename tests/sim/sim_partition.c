/* sim_partition.c - the deterministic simulation's driver (sim.h): builds a
 * seed's cluster, alternates producer turns, faults and raft_fixture
 * steps, checks the invariants after every step, then heals every fault
 * and requires every batch acknowledged and the replicas equal.
 *
 *   sim_partition --seeds N [--start S]   seeds S .. S+N-1, a summary
 *   sim_partition --seed X [--trace]      one seed, its step trace on stdout
 *   --crash                               the crash engine (sim_io.c) instead
 *                                         of raft_fixture: crashes, torn writes
 *   --log-start                           leaders propose LOG_START commands
 *                                         (DeleteRecords) now and then; every
 *                                         replica must start its log at the
 *                                         same offset after the same index
 * A violation prints the seed, the step and how to replay it; exit 1.
 *
 * Faults, chosen by the seed (each with a duration in simulated time):
 * loss of every message on one direction of a link (raft_fixture_saturate),
 * a replica isolated, a replica paused with its links cut
 * (raft_fixture_kill/revive: raft_fixture has no restart, see
 * docs/fault-tolerance.md), network latency per sender (reorders messages
 * sent before and after a change), disk latency per replica, the leader
 * deposed (raft_fixture_depose) or made to hand over (raft_transfer), and
 * randomized election timeouts. The crash engine draws a crash (the
 * replica's process dies and restarts at the fault's end) instead of a
 * pause, and a crash of every replica instead of a depose. */
#include "sim.h"

#include "cluster/rgroup.h"
#include "common/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_MAX_FAULTS 32
#define SIM_DEFAULT_FAULT_MS 10000
#define SIM_DEFAULT_SETTLE_MS 60000

enum sim_fault_kind {
  SIM_FAULT_LOSS,    /* messages i -> j dropped */
  SIM_FAULT_ISOLATE, /* every message to and from i dropped */
  SIM_FAULT_PAUSE,   /* i killed (no ticks, no messages), revived at the end */
  SIM_FAULT_NET_LATENCY,
  SIM_FAULT_DISK_LATENCY,
  SIM_FAULT_DEPOSE,
  SIM_FAULT_TRANSFER,
  SIM_FAULT_FIXTURE_KINDS,                   /* the fixture engine draws among the kinds above */
  SIM_FAULT_CRASH = SIM_FAULT_FIXTURE_KINDS, /* the io engine: i dies, restarts at the end */
  SIM_FAULT_CRASH_ALL, /* the io engine: every replica dies, each restarts on its own */
  SIM_FAULT_KINDS
};

static const char *const sim_fault_names[SIM_FAULT_KINDS] = {
    "loss",   "isolate",  "pause", "net-latency", "disk-latency",
    "depose", "transfer", "crash", "crash-all"};

/* The io engine's draw: a crash instead of a pause (the fixture's kill
 * keeps the memory), a crash of every replica instead of a depose (which
 * needs the fixture). */
static const enum sim_fault_kind sim_io_fault_kinds[] = {
    SIM_FAULT_LOSS,         SIM_FAULT_ISOLATE,   SIM_FAULT_CRASH,    SIM_FAULT_NET_LATENCY,
    SIM_FAULT_DISK_LATENCY, SIM_FAULT_CRASH_ALL, SIM_FAULT_TRANSFER, SIM_FAULT_CRASH};

struct sim_fault {
  enum sim_fault_kind kind;
  unsigned i, j;
  int64_t end_ms;
};

/* The driver's state beside struct sim. */
struct sim_driver {
  struct sim_fault faults[SIM_MAX_FAULTS];
  unsigned nfaults;
  int64_t next_fault_ms;
  int64_t next_timeouts_ms;
  struct sim_transfer *transfers;
  /* opts.log_start: its own generator, so that the seeds' other draws stay
   * what they are without it */
  struct sim_rng log_start_rng;
  int64_t next_log_start_ms;
};

struct sim_transfer {
  struct raft_transfer req;
  struct sim_transfer *next;
  bool done;
};

static void sim_set_net_latency(struct sim *s, unsigned i, unsigned ms);

/* ---- reporting ---- */

int64_t sim_now(struct sim *s)
{
  if (s->opts.engine == SIM_ENGINE_IO) {
    return s->net.now;
  }
  return (int64_t)raft_fixture_time(&s->f);
}

/* The id of the replica that leads (the highest term's, if two believe
 * they do), 0 if none: raft_fixture's leader_id for the io engine too. */
static raft_id sim_leader_id(struct sim *s)
{
  if (s->opts.engine == SIM_ENGINE_FIXTURE) {
    return s->f.leader_id;
  }
  raft_id id = 0;
  raft_term term = 0;
  for (unsigned i = 0; i < s->n; i++) {
    struct raft *r = sim_replica_raft(&s->reps[i]);
    if (r != NULL && raft_state(r) == RAFT_LEADER && r->current_term > term) {
      term = r->current_term;
      id = (raft_id)i + 1;
    }
  }
  return id;
}

/* With --trace, each server's Raft state at a violation: what a replay of
 * a stuck seed needs first (who leads, what each has stored and committed,
 * and what the leader believes of each follower). */
static void sim_trace_rafts(struct sim *s)
{
  for (unsigned i = 0; i < s->n; i++) {
    if (!sim_replica_up(&s->reps[i])) {
      sim_trace(s, "raft r%u down", i);
      continue;
    }
    struct raft *r = sim_replica_raft(&s->reps[i]);
    sim_trace(s, "raft r%u state=%u term=%llu last=%llu stored=%llu commit=%llu applied=%llu", i,
              (unsigned)r->state, (unsigned long long)r->current_term,
              (unsigned long long)raft_last_index(r), (unsigned long long)r->last_stored,
              (unsigned long long)r->commit_index, (unsigned long long)r->last_applied);
    if (r->state != RAFT_LEADER) {
      continue;
    }
    for (unsigned k = 0; k < r->configuration.n; k++) {
      const struct raft_progress *p = &r->leader_state.progress[k];
      sim_trace(s, "raft r%u progress of %llu: mode=%u next=%llu match=%llu", i,
                (unsigned long long)r->configuration.servers[k].id, p->state,
                (unsigned long long)p->next_index, (unsigned long long)p->match_index);
    }
  }
}

void sim_fail(struct sim *s, const char *fmt, ...)
{
  if (s->failed) {
    return;
  }
  s->failed = true;
  char msg[SIM_ERRMSG_SIZE - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(s->errmsg, sizeof s->errmsg, "step %" PRIu64 " (t=%lld ms): %s", s->step,
           (long long)sim_now(s), msg);
  sim_trace(s, "VIOLATION %s", msg);
  sim_trace_rafts(s);
}

void sim_trace(struct sim *s, const char *fmt, ...)
{
  if (!s->opts.trace) {
    return;
  }
  fprintf(s->opts.out, "%" PRIu64 " t=%lld ", s->step, (long long)sim_now(s));
  va_list ap;
  va_start(ap, fmt);
  vfprintf(s->opts.out, fmt, ap);
  va_end(ap);
  fputc('\n', s->opts.out);
}

/* ---- links ---- */

static bool sim_link_cut(struct sim *s, struct sim_driver *d, unsigned i, unsigned j)
{
  if (!sim_replica_up(&s->reps[i]) || !sim_replica_up(&s->reps[j])) {
    return true;
  }
  for (unsigned k = 0; k < d->nfaults; k++) {
    const struct sim_fault *ft = &d->faults[k];
    if ((ft->kind == SIM_FAULT_LOSS && ft->i == i && ft->j == j) ||
        (ft->kind == SIM_FAULT_ISOLATE && (ft->i == i || ft->i == j))) {
      return true;
    }
  }
  return false;
}

/* Makes every link's saturation what the active faults say (revive
 * desaturates all of a server's links, whatever else cuts them). */
static void sim_links_sync(struct sim *s, struct sim_driver *d)
{
  for (unsigned i = 0; i < s->n; i++) {
    for (unsigned j = 0; j < s->n; j++) {
      if (i == j) {
        continue;
      }
      bool want = sim_link_cut(s, d, i, j);
      if (s->opts.engine == SIM_ENGINE_IO) {
        s->net.cut[i][j] = want;
        continue;
      }
      if (want && !raft_fixture_saturated(&s->f, i, j)) {
        raft_fixture_saturate(&s->f, i, j);
      } else if (!want && raft_fixture_saturated(&s->f, i, j)) {
        raft_fixture_desaturate(&s->f, i, j);
      }
    }
  }
}

/* ---- faults ---- */

static void sim_on_transfer(struct raft_transfer *req)
{
  struct sim_transfer *t = (struct sim_transfer *)req;
  t->done = true;
}

static unsigned sim_leader(struct sim *s)
{
  for (unsigned i = 0; i < s->n; i++) {
    if (sim_replica_up(&s->reps[i]) && raft_state(sim_replica_raft(&s->reps[i])) == RAFT_LEADER) {
      return i;
    }
  }
  return s->n;
}

static void sim_fault_end(struct sim *s, struct sim_driver *d, unsigned k)
{
  struct sim_fault ft = d->faults[k];
  d->faults[k] = d->faults[--d->nfaults];
  sim_trace(s, "heal %s %u %u", sim_fault_names[ft.kind], ft.i, ft.j);
  if (ft.kind == SIM_FAULT_PAUSE) {
    raft_fixture_revive(&s->f, ft.i);
  }
  if (ft.kind == SIM_FAULT_CRASH) {
    (void)sim_replica_start(&s->reps[ft.i], NULL); /* a failure is a violation */
  }
  sim_links_sync(s, d);
}

static bool sim_paused(struct sim_driver *d, unsigned i)
{
  for (unsigned k = 0; k < d->nfaults; k++) {
    if ((d->faults[k].kind == SIM_FAULT_PAUSE || d->faults[k].kind == SIM_FAULT_CRASH) &&
        d->faults[k].i == i) {
      return true;
    }
  }
  return false;
}

/* Crashes i for dur ms (a fault whose end restarts it). */
static void sim_crash(struct sim *s, struct sim_driver *d, unsigned i, int64_t dur)
{
  if (sim_paused(d, i) || d->nfaults == SIM_MAX_FAULTS) {
    return;
  }
  sim_replica_crash(&s->reps[i]);
  struct sim_fault *ft = &d->faults[d->nfaults++];
  ft->kind = SIM_FAULT_CRASH;
  ft->i = ft->j = i;
  ft->end_ms = sim_now(s) + dur;
  sim_trace(s, "fault crash %u for %lldms", i, (long long)dur);
}

static void sim_fault_start(struct sim *s, struct sim_driver *d)
{
  enum sim_fault_kind kind;
  if (s->opts.engine == SIM_ENGINE_IO) {
    kind = sim_io_fault_kinds[sim_rng_below(&s->rng, sizeof sim_io_fault_kinds /
                                                         sizeof sim_io_fault_kinds[0])];
  } else {
    kind = (enum sim_fault_kind)sim_rng_below(&s->rng, SIM_FAULT_FIXTURE_KINDS);
  }
  unsigned i = sim_rng_below(&s->rng, s->n);
  unsigned j = (i + 1 + sim_rng_below(&s->rng, s->n - 1)) % s->n;
  int64_t dur = 100 + sim_rng_below(&s->rng, 4000);
  if (d->nfaults == SIM_MAX_FAULTS) {
    return;
  }
  s->stats.faults++;
  switch (kind) {
  case SIM_FAULT_LOSS:
  case SIM_FAULT_ISOLATE:
    break;
  case SIM_FAULT_PAUSE:
    if (sim_paused(d, i)) {
      return;
    }
    raft_fixture_kill(&s->f, i);
    break;
  case SIM_FAULT_CRASH:
    sim_crash(s, d, i, dur);
    return;
  case SIM_FAULT_CRASH_ALL:
    for (unsigned k = 0; k < s->n; k++) {
      sim_crash(s, d, k, dur + sim_rng_below(&s->rng, 1000));
    }
    return;
  case SIM_FAULT_NET_LATENCY: {
    unsigned ms = 1 + sim_rng_below(&s->rng, sim_rng_chance(&s->rng, 1, 4) ? 400 : 40);
    sim_set_net_latency(s, i, ms);
    sim_trace(s, "fault net-latency %u %ums", i, ms);
    return;
  }
  case SIM_FAULT_DISK_LATENCY: {
    unsigned ms = 1 + sim_rng_below(&s->rng, sim_rng_chance(&s->rng, 1, 4) ? 800 : 30);
    sim_replica_set_disk_latency(&s->reps[i], ms);
    sim_trace(s, "fault disk-latency %u %ums", i, ms);
    return;
  }
  case SIM_FAULT_DEPOSE: {
    /* raft_fixture_depose needs a stable leader, every other server a
     * follower and nothing else cutting the network. */
    unsigned l = sim_leader(s);
    if (d->nfaults != 0 || s->f.leader_id == 0 || l == s->n || l + 1 != s->f.leader_id) {
      return;
    }
    for (unsigned k = 0; k < s->n; k++) {
      if (k != l && raft_state(raft_fixture_get(&s->f, k)) != RAFT_FOLLOWER) {
        return;
      }
    }
    sim_trace(s, "fault depose r%u", l);
    raft_fixture_depose(&s->f);
    return;
  }
  case SIM_FAULT_TRANSFER: {
    unsigned l = sim_leader(s);
    if (l == s->n || j == l) {
      return;
    }
    struct sim_transfer *t = calloc(1, sizeof *t);
    if (t == NULL) {
      return;
    }
    if (raft_transfer(sim_replica_raft(&s->reps[l]), &t->req, (raft_id)j + 1, sim_on_transfer) !=
        0) {
      free(t);
      return;
    }
    t->next = d->transfers;
    d->transfers = t;
    sim_trace(s, "fault transfer r%u -> r%u", l, j);
    return;
  }
  default:
    return;
  }
  struct sim_fault *ft = &d->faults[d->nfaults++];
  ft->kind = kind;
  ft->i = i;
  ft->j = j;
  ft->end_ms = sim_now(s) + dur;
  sim_trace(s, "fault %s %u %u for %lldms", sim_fault_names[kind], i, j, (long long)dur);
  sim_links_sync(s, d);
}

/* A follower's election timer for the fixture engine: the nodes' spread
 * (rgroup_elect_spread_max) or, with --wide-timers, raft 0.15's own. */
static unsigned sim_election_timer(struct sim *s)
{
  int max = 2 * SIM_ELECTION_MS;
  if (!s->opts.wide_timers) {
    max = rgroup_elect_spread_max(SIM_ELECTION_MS, max);
  }
  return SIM_ELECTION_MS + sim_rng_below(&s->rng, (uint32_t)(max - SIM_ELECTION_MS));
}

static void sim_faults_turn(struct sim *s, struct sim_driver *d, bool inject)
{
  int64_t now = sim_now(s);
  for (unsigned k = 0; k < d->nfaults;) {
    if (!inject || d->faults[k].end_ms <= now) {
      sim_fault_end(s, d, k);
    } else {
      k++;
    }
  }
  if (s->opts.engine == SIM_ENGINE_FIXTURE && now >= d->next_timeouts_ms) {
    d->next_timeouts_ms = now + 500;
    for (unsigned i = 0; i < s->n; i++) {
      raft_fixture_set_randomized_election_timeout(&s->f, i, sim_election_timer(s));
    }
  }
  if (inject && now >= d->next_fault_ms) {
    d->next_fault_ms = now + 50 + sim_rng_below(&s->rng, 1500);
    sim_fault_start(s, d);
  }
}

/* ---- one seed ---- */

static struct sim *sim_of(struct raft_fixture *f)
{
  return (struct sim *)((char *)f - offsetof(struct sim, f));
}

/* opts.log_start: now and then the leader proposes deleting below an
 * offset of its log (from its start to its end), as DeleteRecords does. */
static void sim_log_start_turn(struct sim *s, struct sim_driver *d)
{
  if (!s->opts.log_start || sim_now(s) < d->next_log_start_ms) {
    return;
  }
  d->next_log_start_ms = sim_now(s) + 500 + sim_rng_below(&d->log_start_rng, 2500);
  raft_id leader = sim_leader_id(s);
  if (leader == 0) {
    return;
  }
  struct sim_replica *rep = &s->reps[leader - 1];
  struct store_info info;
  store_info(rep->store, &info);
  int64_t span = info.next_offset - info.start_offset;
  int64_t offset =
      info.start_offset + (int64_t)sim_rng_below(&d->log_start_rng, (uint32_t)span + 1);
  int rv = sim_replica_log_start(rep, offset);
  if (rv == 0) {
    s->stats.log_starts++;
  }
}

/* After every event of either engine. */
static void sim_after_event(struct sim *s, unsigned index, const char *type)
{
  s->step++;
  s->stats.steps++;
  sim_trace(s, "event r%u %s", index, type);
  for (unsigned i = 0; i < s->n; i++) {
    sim_replica_after_step(&s->reps[i]);
  }
  raft_id leader = sim_leader_id(s);
  if (leader != s->last_leader) {
    sim_trace(s, "leader %llu", (unsigned long long)leader);
    if (leader != 0) {
      s->stats.leader_changes++;
    }
    s->last_leader = leader;
  }
  if (s->net.failed) {
    sim_fail(s, "out of memory in the simulated io");
  }
  sim_check_step(s);
}

static void sim_on_event(struct raft_fixture *f, struct raft_fixture_event *ev)
{
  static const char *const types[] = {"?", "tick", "network", "disk", "work"};
  sim_after_event(sim_of(f), ev->server_index,
                  ev->type >= 1 && ev->type <= 4 ? types[ev->type] : "?");
}

/* One event of the engine; with the io engine, at most 10 simulated ms
 * pass without one (every replica may be down). */
static void sim_engine_step(struct sim *s)
{
  if (s->opts.engine == SIM_ENGINE_FIXTURE) {
    raft_fixture_step(&s->f);
    return;
  }
  static const char *const types[] = {"none", "send", "ack", "disk", "network", "tick"};
  unsigned who = 0;
  enum sim_io_event ev = sim_net_step(&s->net, s->net.now + 10, &who);
  if (ev != SIM_IO_EV_NONE) {
    sim_after_event(s, who, types[ev]);
  }
}

static bool sim_settled(struct sim *s)
{
  if (!sim_workload_done(s)) {
    return false;
  }
  for (unsigned i = 0; i < s->n; i++) {
    if (!sim_replica_up(&s->reps[i])) {
      return false;
    }
  }
  raft_index applied = raft_last_applied(sim_replica_raft(&s->reps[0]));
  for (unsigned i = 1; i < s->n; i++) {
    if (raft_last_applied(sim_replica_raft(&s->reps[i])) != applied) {
      return false;
    }
  }
  if (s->opts.engine == SIM_ENGINE_FIXTURE) {
    return true;
  }
  /* Replicas that all just restarted have all applied index 1: settled
   * only once each has applied its whole log (a leader's barrier commits
   * it) and is past what its store held at the restart. */
  for (unsigned i = 0; i < s->n; i++) {
    struct raft *r = sim_replica_raft(&s->reps[i]);
    if (raft_last_index(r) != applied || applied < s->reps[i].store_index_at_start) {
      return false;
    }
  }
  return true;
}

static void sim_set_net_latency(struct sim *s, unsigned i, unsigned ms)
{
  if (s->opts.engine == SIM_ENGINE_IO) {
    s->net.latency[i] = ms;
    return;
  }
  raft_fixture_set_network_latency(&s->f, i, ms);
}

/* The io engine's cluster: each replica's io and disk, bootstrapped with
 * the same configuration, then started. */
static int sim_setup_io(struct sim *s)
{
  s->net.rng.s = sim_rng_next(&s->rng);
  s->net.loss_ppm = sim_rng_below(&s->rng, 10000); /* up to 1 % of messages */
  s->net.dup_ppm = sim_rng_below(&s->rng, 10000);
  s->net.torn_writes = !s->opts.no_torn;
  s->net.early_ack = s->opts.early_ack;
  s->net.cancel_oldest_first = s->opts.cancel_oldest_first;
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  int rv = 0;
  for (unsigned i = 0; i < s->n && rv == 0; i++) {
    rv = sim_replica_init(s, &s->reps[i], i);
    if (rv != 0) {
      break;
    }
    sim_io_init_replica(&s->reps[i].sio, &s->net, i);
    sim_set_net_latency(s, i, 1 + sim_rng_below(&s->rng, 30));
    sim_replica_set_disk_latency(&s->reps[i], 1 + sim_rng_below(&s->rng, 20));
    sim_replica_interpose(&s->reps[i]);
    rv = raft_configuration_add(&conf, (raft_id)i + 1, s->reps[i].sio.address, RAFT_VOTER);
  }
  for (unsigned i = 0; i < s->n && rv == 0; i++) {
    rv = sim_replica_start(&s->reps[i], &conf);
  }
  raft_configuration_close(&conf);
  return rv;
}

static int sim_setup(struct sim *s)
{
  if (s->opts.engine == SIM_ENGINE_IO) {
    return sim_setup_io(s);
  }
  int rv = raft_fixture_initialize(&s->f);
  if (rv != 0) {
    return rv;
  }
  for (unsigned i = 0; i < s->n; i++) {
    rv = sim_replica_init(s, &s->reps[i], i);
    if (rv == 0) {
      rv = raft_fixture_grow(&s->f, &s->reps[i].fsm);
    }
    if (rv != 0) {
      return rv;
    }
    struct raft *r = raft_fixture_get(&s->f, i);
    raft_set_snapshot_threshold(r, 1u << 30); /* snapshots are not simulated */
    raft_set_pre_vote(r, true);                /* as rgroup_raft_configure */
    raft_fixture_set_network_latency(&s->f, i, 1 + sim_rng_below(&s->rng, 30));
    sim_replica_set_disk_latency(&s->reps[i], 1 + sim_rng_below(&s->rng, 20));
    raft_fixture_set_randomized_election_timeout(&s->f, i, sim_election_timer(s));
    sim_replica_interpose(&s->reps[i]);
  }
  struct raft_configuration conf;
  rv = raft_fixture_configuration(&s->f, s->n, &conf);
  if (rv != 0) {
    return rv;
  }
  rv = raft_fixture_bootstrap(&s->f, &conf);
  raft_configuration_close(&conf);
  if (rv != 0) {
    return rv;
  }
  raft_fixture_hook(&s->f, sim_on_event);
  return raft_fixture_start(&s->f);
}

static void sim_teardown(struct sim *s, struct sim_driver *d)
{
  if (s->opts.engine == SIM_ENGINE_FIXTURE) {
    raft_fixture_close(&s->f); /* fails what is in flight: the replicas free their requests */
  }
  for (unsigned i = 0; i < s->n; i++) {
    s->stats.crashes += s->reps[i].crashes;
    s->stats.cmd_tables_used += s->reps[i].cmd_tables_used;
    s->stats.store_cut_batches += s->reps[i].store_cut_batches;
    s->stats.results_clamped += s->reps[i].clamp.clamped;
    s->stats.torn_entries += s->reps[i].sio.torn_entries;
    s->stats.torn_cut += s->reps[i].sio.torn_cut;
    s->stats.torn_dropped += s->reps[i].sio.torn_dropped;
    s->stats.results_held += s->reps[i].results_held;
    s->stats.barriers += s->reps[i].barriers;
    s->stats.votes_unstuck += s->reps[i].votes_unstuck;
    s->stats.start_short_used += s->reps[i].start_short_used;
    s->stats.prevote_terms_taken += s->reps[i].prevote_terms_taken;
    s->stats.second_votes_withheld += s->reps[i].second_votes_withheld;
    s->stats.duplicates_answered += s->reps[i].ap.duplicates;
    s->stats.refusals += s->reps[i].ap.refusals;
    sim_replica_close(&s->reps[i]); /* the io engine: closes raft, fails what is in flight */
  }
  s->stats.msgs_lost = s->net.lost;
  s->stats.msgs_duplicated = s->net.duplicated;
  sim_net_close(&s->net);
  while (d->transfers != NULL) {
    struct sim_transfer *t = d->transfers;
    d->transfers = t->next;
    free(t);
  }
  sim_workload_close(s);
  sim_check_close(&s->check);
}

/* Runs one seed. Returns 0 (every invariant held), 1 (a violation, in
 * s->errmsg) or a negative code (the simulation itself failed). */
static int sim_run(struct sim *s, uint64_t seed, const struct sim_opts *opts)
{
  memset(s, 0, sizeof *s);
  s->seed = seed;
  s->opts = *opts;
  s->rng.s = seed * 0x2545f4914f6cdd1dull + 1;
  s->n = opts->replicas != 0 ? opts->replicas : sim_rng_chance(&s->rng, 1, 3) ? 5 : 3;
  s->nproducers = opts->producers != 0 ? opts->producers : 2 + sim_rng_below(&s->rng, 4);
  sim_check_init(&s->check);
  struct sim_driver d;
  memset(&d, 0, sizeof d);
  d.next_fault_ms = 500 + sim_rng_below(&s->rng, 2000);
  d.log_start_rng.s = seed * 0x9e3779b97f4a7c15ull + 7;
  d.next_log_start_ms = 1000;
  sim_trace(s, "seed %" PRIu64 " replicas=%u producers=%u", seed, s->n, s->nproducers);
  int rv = sim_setup(s);
  if (rv == 0) {
    rv = sim_workload_init(s);
  }
  if (rv != 0) {
    snprintf(s->errmsg, sizeof s->errmsg, "setup failed: %d", rv);
    sim_teardown(s, &d);
    return -1;
  }
  while (!s->failed && sim_now(s) < opts->fault_ms) {
    sim_faults_turn(s, &d, true);
    sim_workload_turn(s, true);
    sim_log_start_turn(s, &d);
    sim_engine_step(s);
  }
  if (!s->failed) {
    sim_faults_turn(s, &d, false); /* heal everything */
    for (unsigned i = 0; i < s->n; i++) {
      sim_set_net_latency(s, i, 1 + sim_rng_below(&s->rng, 30));
      sim_replica_set_disk_latency(&s->reps[i], 1 + sim_rng_below(&s->rng, 20));
    }
    sim_trace(s, "healed");
  }
  int64_t deadline = sim_now(s) + opts->settle_ms;
  while (!s->failed && !sim_settled(s) && sim_now(s) < deadline) {
    sim_faults_turn(s, &d, false);
    sim_workload_turn(s, false);
    sim_engine_step(s);
  }
  if (!s->failed && !sim_settled(s)) {
    sim_fail(s, "not settled %lld ms after every fault healed: %s", (long long)opts->settle_ms,
             sim_workload_done(s) ? "replicas applied different indexes"
                                  : "batches still unacknowledged");
  }
  if (!s->failed) {
    sim_check_final(s);
  }
  s->stats.sim_ms = (uint64_t)sim_now(s);
  sim_trace(s, "end %s", s->failed ? "VIOLATION" : "ok");
  sim_teardown(s, &d);
  return s->failed ? 1 : 0;
}

/* ---- the command line ---- */

/* The flags a replay needs besides --seed (those that are not defaults). */
static const char *sim_replay_flags(const struct sim_opts *o)
{
  static char buf[160];
  int n = snprintf(buf, sizeof buf, "%s%s%s",
                   o->early_ack                 ? " --early-ack"
                   : o->engine == SIM_ENGINE_IO ? " --crash"
                                                : "",
                   o->no_torn ? " --no-torn" : "",
                   o->cancel_oldest_first ? " --cancel-oldest-first"
                   : o->no_clamp_results  ? " --no-clamp-results"
                   : o->no_prevote_terms  ? " --no-prevote-terms"
                                          : "");
  if (o->no_second_vote_guard && n >= 0 && (size_t)n < sizeof buf) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, " --no-second-vote-guard");
  }
  if (o->wide_timers && n >= 0 && (size_t)n < sizeof buf) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, " --wide-timers");
  }
  if (o->log_start && n >= 0 && (size_t)n < sizeof buf) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, " --log-start");
  }
  if (o->fault_ms != SIM_DEFAULT_FAULT_MS && n >= 0 && (size_t)n < sizeof buf) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, " --fault-ms %lld", (long long)o->fault_ms);
  }
  if (o->settle_ms != SIM_DEFAULT_SETTLE_MS && n >= 0 && (size_t)n < sizeof buf) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, " --settle-ms %lld", (long long)o->settle_ms);
  }
  if (o->replicas != 0 && n >= 0 && (size_t)n < sizeof buf) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, " --replicas %u", o->replicas);
  }
  if (o->producers != 0 && n >= 0 && (size_t)n < sizeof buf) {
    snprintf(buf + n, sizeof buf - (size_t)n, " --producers %u", o->producers);
  }
  return buf;
}

static void sim_usage(FILE *out)
{
  fprintf(out,
          "usage: sim_partition --seeds N [--start S] | --seed X [--trace]\n"
          "       [--replicas 3|5] [--producers N] [--fault-ms MS] [--settle-ms MS]\n"
          "       [--crash [--no-torn] [--cancel-oldest-first] [--no-clamp-results]\n"
          "        [--no-prevote-terms] | --early-ack] [--wide-timers] [--no-second-vote-guard]\n"
          "       [--log-start]  (leaders propose DeleteRecords' LOG_START)\n");
}

int main(int argc, char **argv)
{
  uint64_t start = 1, count = 1;
  bool single = false;
  struct sim_opts opts = {
      .fault_ms = SIM_DEFAULT_FAULT_MS, .settle_ms = SIM_DEFAULT_SETTLE_MS, .out = stdout};
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    const char *val = a + 1 < argc ? argv[a + 1] : NULL;
    if (strcmp(arg, "--trace") == 0) {
      opts.trace = true;
      continue;
    }
    if (strcmp(arg, "--crash") == 0) {
      opts.engine = SIM_ENGINE_IO;
      continue;
    }
    if (strcmp(arg, "--cancel-oldest-first") == 0) {
      opts.engine = SIM_ENGINE_IO;
      opts.cancel_oldest_first = true;
      continue;
    }
    if (strcmp(arg, "--no-second-vote-guard") == 0) {
      opts.no_second_vote_guard = true;
      continue;
    }
    if (strcmp(arg, "--wide-timers") == 0) {
      opts.wide_timers = true;
      continue;
    }
    if (strcmp(arg, "--log-start") == 0) {
      opts.log_start = true;
      continue;
    }
    if (strcmp(arg, "--no-clamp-results") == 0) {
      opts.engine = SIM_ENGINE_IO;
      opts.no_clamp_results = true;
      continue;
    }
    if (strcmp(arg, "--no-prevote-terms") == 0) {
      opts.engine = SIM_ENGINE_IO;
      opts.no_prevote_terms = true;
      continue;
    }
    if (strcmp(arg, "--no-torn") == 0) {
      opts.no_torn = true;
      continue;
    }
    if (strcmp(arg, "--early-ack") == 0) {
      opts.engine = SIM_ENGINE_IO;
      opts.early_ack = true;
      continue;
    }
    if (val == NULL) {
      sim_usage(stderr);
      return 2;
    }
    a++;
    uint64_t v = strtoull(val, NULL, 10);
    if (strcmp(arg, "--seed") == 0) {
      start = v;
      count = 1;
      single = true;
    } else if (strcmp(arg, "--seeds") == 0) {
      count = v;
    } else if (strcmp(arg, "--start") == 0) {
      start = v;
    } else if (strcmp(arg, "--replicas") == 0 && (v == 3 || v == 5)) {
      opts.replicas = (unsigned)v;
    } else if (strcmp(arg, "--producers") == 0 && v >= 1 && v <= SIM_MAX_PRODUCERS) {
      opts.producers = (unsigned)v;
    } else if (strcmp(arg, "--fault-ms") == 0) {
      opts.fault_ms = (int64_t)v;
    } else if (strcmp(arg, "--settle-ms") == 0) {
      opts.settle_ms = (int64_t)v;
    } else {
      sim_usage(stderr);
      return 2;
    }
  }
  (void)single;
  struct sim *s = malloc(sizeof *s);
  if (s == NULL) {
    return 2;
  }
  struct sim_stats total = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0); /* for the summary only: nothing simulated reads it */
  int status = 0;
  uint64_t done = 0;
  for (uint64_t seed = start; seed < start + count; seed++) {
    int rv = sim_run(s, seed, &opts);
    done++;
    total.steps += s->stats.steps;
    total.acks += s->stats.acks;
    total.batches += s->stats.batches;
    total.entries += s->stats.entries;
    total.faults += s->stats.faults;
    total.leader_changes += s->stats.leader_changes;
    total.results_held += s->stats.results_held;
    total.barriers += s->stats.barriers;
    total.votes_unstuck += s->stats.votes_unstuck;
    total.start_short_used += s->stats.start_short_used;
    total.prevote_terms_taken += s->stats.prevote_terms_taken;
    total.second_votes_withheld += s->stats.second_votes_withheld;
    total.duplicates_answered += s->stats.duplicates_answered;
    total.refusals += s->stats.refusals;
    total.sim_ms += s->stats.sim_ms;
    total.crashes += s->stats.crashes;
    total.torn_entries += s->stats.torn_entries;
    total.torn_cut += s->stats.torn_cut;
    total.torn_dropped += s->stats.torn_dropped;
    total.store_cut_batches += s->stats.store_cut_batches;
    total.msgs_lost += s->stats.msgs_lost;
    total.msgs_duplicated += s->stats.msgs_duplicated;
    total.results_clamped += s->stats.results_clamped;
    total.log_starts += s->stats.log_starts;
    total.cmd_tables_used += s->stats.cmd_tables_used;
    if (rv != 0) {
      fprintf(opts.trace ? stdout : stderr,
              "sim_partition: seed %" PRIu64 ": %s: %s\nreplay: sim_partition --seed %" PRIu64
              "%s --trace\n",
              seed, rv > 0 ? "VIOLATION" : "ERROR", s->errmsg, seed, sim_replay_flags(&opts));
      status = 1;
      break;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  FILE *sum = opts.trace ? stderr : stdout; /* the trace alone on stdout, to compare runs */
  fprintf(sum,
          "sim_partition: %" PRIu64 " seeds from %" PRIu64 " %s in %.1f s (%.1f seeds/s): "
          "%" PRIu64 " steps, %.0f simulated s, %" PRIu64 " batches, %" PRIu64 " acks, "
          "%" PRIu64 " entries, %" PRIu64 " duplicates answered, %" PRIu64 " refusals, "
          "%" PRIu64 " faults, %" PRIu64 " leader changes, %" PRIu64 " barriers, %" PRIu64
          " results held, %" PRIu64 " votes despite a silent leader, %" PRIu64
          " second votes withheld\n",
          done, start, status == 0 ? "passed" : "FAILED", secs, secs > 0 ? done / secs : 0.0,
          total.steps, (double)total.sim_ms / 1000, total.batches, total.acks, total.entries,
          total.duplicates_answered, total.refusals, total.faults, total.leader_changes,
          total.barriers, total.results_held, total.votes_unstuck, total.second_votes_withheld);
  if (opts.log_start) {
    fprintf(sum,
            "sim_partition: LOG_START commands proposed %" PRIu64
            ", restarts that took the saved producer table %" PRIu64 "\n",
            total.log_starts, total.cmd_tables_used);
  }
  if (opts.engine == SIM_ENGINE_IO) {
    fprintf(sum,
            "sim_partition: crashes %" PRIu64 " (%s), torn writes left %" PRIu64
            " whole entries and %" PRIu64 " cut ones, loads dropped %" PRIu64
            " records, store cuts dropped %" PRIu64 " batches, messages lost %" PRIu64
            ", duplicated %" PRIu64 ", results clamped %" PRIu64
            ", starts on the short election timeout %" PRIu64
            ", higher terms taken from pre-vote refusals %" PRIu64 "\n",
            total.crashes, opts.early_ack ? "MUTANT: appends acknowledged before durable" : "real",
            total.torn_entries, total.torn_cut, total.torn_dropped, total.store_cut_batches,
            total.msgs_lost, total.msgs_duplicated, total.results_clamped, total.start_short_used,
            total.prevote_terms_taken);
  }
  free(s);
  return status;
}
