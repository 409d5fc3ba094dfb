/* sim_partition.c - the deterministic simulation's driver (sim.h): builds a
 * seed's cluster, alternates producer turns, faults and raft_fixture
 * steps, checks the invariants after every step, then heals every fault
 * and requires every batch acknowledged and the replicas equal.
 *
 *   sim_partition --seeds N [--start S]   seeds S .. S+N-1, a summary
 *   sim_partition --seed X [--trace]      one seed, its step trace on stdout
 * A violation prints the seed, the step and how to replay it; exit 1.
 *
 * Faults, chosen by the seed (each with a duration in simulated time):
 * loss of every message on one direction of a link (raft_fixture_saturate),
 * a replica isolated, a replica paused with its links cut
 * (raft_fixture_kill/revive: raft_fixture has no restart, see
 * docs/fault-tolerance.md), network latency per sender (reorders messages
 * sent before and after a change), disk latency per replica, the leader
 * deposed (raft_fixture_depose) or made to hand over (raft_transfer), and
 * randomized election timeouts. */
#include "sim.h"

#include "common/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_MAX_FAULTS 32

enum sim_fault_kind {
  SIM_FAULT_LOSS,    /* messages i -> j dropped */
  SIM_FAULT_ISOLATE, /* every message to and from i dropped */
  SIM_FAULT_PAUSE,   /* i killed (no ticks, no messages), revived at the end */
  SIM_FAULT_NET_LATENCY,
  SIM_FAULT_DISK_LATENCY,
  SIM_FAULT_DEPOSE,
  SIM_FAULT_TRANSFER,
  SIM_FAULT_KINDS
};

static const char *const sim_fault_names[SIM_FAULT_KINDS] = {
    "loss", "isolate", "pause", "net-latency", "disk-latency", "depose", "transfer"};

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
};

struct sim_transfer {
  struct raft_transfer req;
  struct sim_transfer *next;
  bool done;
};

/* ---- reporting ---- */

int64_t sim_now(struct sim *s)
{
  return (int64_t)raft_fixture_time(&s->f);
}

/* With --trace, each server's Raft state at a violation: what a replay of
 * a stuck seed needs first (who leads, what each has stored and committed,
 * and what the leader believes of each follower). */
static void sim_trace_rafts(struct sim *s)
{
  for (unsigned i = 0; i < s->n; i++) {
    struct raft *r = raft_fixture_get(&s->f, i);
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
  if (!raft_fixture_alive(&s->f, i) || !raft_fixture_alive(&s->f, j)) {
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
    if (raft_fixture_alive(&s->f, i) && raft_state(raft_fixture_get(&s->f, i)) == RAFT_LEADER) {
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
  sim_links_sync(s, d);
}

static bool sim_paused(struct sim_driver *d, unsigned i)
{
  for (unsigned k = 0; k < d->nfaults; k++) {
    if (d->faults[k].kind == SIM_FAULT_PAUSE && d->faults[k].i == i) {
      return true;
    }
  }
  return false;
}

static void sim_fault_start(struct sim *s, struct sim_driver *d)
{
  enum sim_fault_kind kind = (enum sim_fault_kind)sim_rng_below(&s->rng, SIM_FAULT_KINDS);
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
  case SIM_FAULT_NET_LATENCY: {
    unsigned ms = 1 + sim_rng_below(&s->rng, sim_rng_chance(&s->rng, 1, 4) ? 400 : 40);
    raft_fixture_set_network_latency(&s->f, i, ms);
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
    if (raft_transfer(raft_fixture_get(&s->f, l), &t->req, (raft_id)j + 1, sim_on_transfer) != 0) {
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
  if (now >= d->next_timeouts_ms) {
    d->next_timeouts_ms = now + 500;
    for (unsigned i = 0; i < s->n; i++) {
      raft_fixture_set_randomized_election_timeout(&s->f, i, 1000 + sim_rng_below(&s->rng, 1000));
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

static void sim_on_event(struct raft_fixture *f, struct raft_fixture_event *ev)
{
  static const char *const types[] = {"?", "tick", "network", "disk", "work"};
  struct sim *s = sim_of(f);
  s->step++;
  s->stats.steps++;
  sim_trace(s, "event r%u %s", ev->server_index,
            ev->type >= 1 && ev->type <= 4 ? types[ev->type] : "?");
  for (unsigned i = 0; i < s->n; i++) {
    sim_replica_after_step(&s->reps[i]);
  }
  if (f->leader_id != s->last_leader) {
    sim_trace(s, "leader %llu", (unsigned long long)f->leader_id);
    if (f->leader_id != 0) {
      s->stats.leader_changes++;
    }
    s->last_leader = f->leader_id;
  }
  sim_check_step(s);
}

static bool sim_settled(struct sim *s)
{
  if (!sim_workload_done(s)) {
    return false;
  }
  raft_index applied = raft_last_applied(raft_fixture_get(&s->f, 0));
  for (unsigned i = 1; i < s->n; i++) {
    if (raft_last_applied(raft_fixture_get(&s->f, i)) != applied) {
      return false;
    }
  }
  return true;
}

static int sim_setup(struct sim *s)
{
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
    raft_fixture_set_randomized_election_timeout(&s->f, i, 1000 + sim_rng_below(&s->rng, 1000));
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
  raft_fixture_close(&s->f); /* fails what is in flight: the replicas free their requests */
  for (unsigned i = 0; i < s->n; i++) {
    s->stats.results_held += s->reps[i].results_held;
    s->stats.barriers += s->reps[i].barriers;
    s->stats.votes_unstuck += s->reps[i].votes_unstuck;
    s->stats.duplicates_answered += s->reps[i].ap.duplicates;
    s->stats.refusals += s->reps[i].ap.refusals;
    sim_replica_close(&s->reps[i]);
  }
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
    raft_fixture_step(&s->f);
  }
  if (!s->failed) {
    sim_faults_turn(s, &d, false); /* heal everything */
    for (unsigned i = 0; i < s->n; i++) {
      raft_fixture_set_network_latency(&s->f, i, 1 + sim_rng_below(&s->rng, 30));
      sim_replica_set_disk_latency(&s->reps[i], 1 + sim_rng_below(&s->rng, 20));
    }
    sim_trace(s, "healed");
  }
  int64_t deadline = sim_now(s) + opts->settle_ms;
  while (!s->failed && !sim_settled(s) && sim_now(s) < deadline) {
    sim_faults_turn(s, &d, false);
    sim_workload_turn(s, false);
    raft_fixture_step(&s->f);
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

static void sim_usage(FILE *out)
{
  fprintf(out, "usage: sim_partition --seeds N [--start S] | --seed X [--trace]\n"
               "       [--replicas 3|5] [--producers N] [--fault-ms MS] [--settle-ms MS]\n");
}

int main(int argc, char **argv)
{
  uint64_t start = 1, count = 1;
  bool single = false;
  struct sim_opts opts = {.fault_ms = 10000, .settle_ms = 60000, .out = stdout};
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    const char *val = a + 1 < argc ? argv[a + 1] : NULL;
    if (strcmp(arg, "--trace") == 0) {
      opts.trace = true;
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
    total.duplicates_answered += s->stats.duplicates_answered;
    total.refusals += s->stats.refusals;
    total.sim_ms += s->stats.sim_ms;
    if (rv != 0) {
      fprintf(opts.trace ? stdout : stderr,
              "sim_partition: seed %" PRIu64 ": %s: %s\n"
              "replay: sim_partition --seed %" PRIu64 " --trace\n",
              seed, rv > 0 ? "VIOLATION" : "ERROR", s->errmsg, seed);
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
          " results held, %" PRIu64 " votes despite a silent leader\n",
          done, start, status == 0 ? "passed" : "FAILED", secs, secs > 0 ? done / secs : 0.0,
          total.steps, (double)total.sim_ms / 1000, total.batches, total.acks, total.entries,
          total.duplicates_answered, total.refusals, total.faults, total.leader_changes,
          total.barriers, total.results_held, total.votes_unstuck);
  free(s);
  return status;
}
