/* assign.h - the partition assignment strategies of consumer groups:
 * range, round-robin and sticky, as pure functions of the members'
 * subscriptions, the topics' partition counts and (for sticky) what each
 * member held before. No I/O, no clock, no randomness: the same input
 * always gives the same assignment (docs/consumer-groups.md).
 *
 * Topics are named by index into the caller's topic table (counts[]);
 * members are taken in the order given (the coordinator passes them by
 * member id). Every valid partition (a topic some member subscribes to,
 * partition < its count) is assigned to exactly one member that
 * subscribes to its topic.
 *
 * Context: any thread; no shared state. */
#ifndef CAIRN_GROUP_ASSIGN_H
#define CAIRN_GROUP_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

/* Wire names, in this order: "range", "roundrobin", "sticky". */
enum assign_strategy {
  ASSIGN_RANGE = 0,
  ASSIGN_ROUNDROBIN = 1,
  ASSIGN_STICKY = 2,
  ASSIGN_NSTRATEGIES = 3,
};

/* One partition: topic is an index into the caller's topic table. */
struct assign_tp {
  uint32_t topic;
  uint32_t partition;
};

/* One member's input and output. */
struct assign_member {
  const uint32_t *topics; /* subscription: topic indices, any order, no duplicates */
  size_t ntopics;
  const struct assign_tp *prev; /* held before this rebalance (sticky); may be NULL */
  size_t nprev;
  struct assign_tp *out; /* set by assign_run: owned, free with free(); sorted */
  size_t nout;
};

/* Assigns every valid partition of counts[0..ntopics) to the members
 * m[0..nm). Borrows everything but the out arrays, which it allocates
 * (NULL when nout is 0). Returns 0 or CAIRN_ENOMEM (no out array is left
 * allocated then) or CAIRN_EINVAL (an unknown strategy, a topic index out
 * of range). */
__attribute__((warn_unused_result)) int assign_run(enum assign_strategy s, const uint32_t *counts,
                                                   size_t ntopics, struct assign_member *m,
                                                   size_t nm);

/* The strategy's wire name; "?" if unknown. Static string. */
const char *assign_strategy_name(enum assign_strategy s);

/* The strategy named name; -1 if none is. */
int assign_strategy_parse(const char *name);

#endif
