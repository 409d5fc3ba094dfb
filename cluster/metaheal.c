/* metaheal.c - the node's side of rebuilding a metadata replica whose log
 * was damaged, and the frames it exchanges with the controller leader.
 * See metaheal.h. */
#include "cluster/metaheal.h"

#include "cluster/waldamage.h"
#include "common/err.h"
#include "common/log.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MHEAL_LOG_EVERY_MS 10000

const char *mheal_state_name(enum mheal_state s)
{
  switch (s) {
#define MHEAL_STATE_NAME(name, text)                                                               \
  case name:                                                                                       \
    return text;
    MHEAL_STATE_TABLE(MHEAL_STATE_NAME)
#undef MHEAL_STATE_NAME
  }
  return "?";
}

/* The one setter: OFF -> REFUSED (start only), REFUSED -> JOINING,
 * JOINING -> DONE. */
static void mheal_set_state(struct mheal *mh, enum mheal_state to, uint64_t now_ms)
{
  assert((mh->state == MHEAL_OFF && to == MHEAL_REFUSED) ||
         (mh->state == MHEAL_REFUSED && to == MHEAL_JOINING) ||
         (mh->state == MHEAL_JOINING && to == MHEAL_DONE));
  log_info("metaheal", "metadata replica: %s -> %s", mheal_state_name(mh->state),
           mheal_state_name(to));
  mh->state = to;
  mh->since_ms = now_ms;
}

enum mheal_state mheal_begin(struct mheal *mh, const char *dir, uint64_t refusal_id,
                             uint64_t now_ms)
{
  memset(mh, 0, sizeof *mh);
  snprintf(mh->dir, sizeof mh->dir, "%s", dir);
  mh->refusal_id = refusal_id;
  mh->rebuilt_before = waldamage_was_rebuilt(dir);
  if (!waldamage_marked(dir, mh->reason, sizeof mh->reason)) {
    return MHEAL_OFF;
  }
  mheal_set_state(mh, MHEAL_REFUSED, now_ms);
  mh->logged_ms = now_ms;
  log_error("metaheal",
            "the metadata replica is refused (%s/%s: %s): it runs no Raft, votes and "
            "acknowledges nothing, until the controller leader has removed it from the "
            "metadata group; then it rejoins empty and is rebuilt from its peers",
            dir, WALDAMAGE_MARK, mh->reason);
  return MHEAL_REFUSED;
}

void mheal_encode(uint8_t out[MHEAL_FRAME], enum mheal_type type, uint64_t refusal_id)
{
  memset(out, 0, MHEAL_FRAME);
  out[0] = MHEAL_TAG;
  out[1] = (uint8_t)type;
  out[2] = MHEAL_VERSION & 0xff;
  out[3] = MHEAL_VERSION >> 8;
  for (int i = 0; i < 8; i++) {
    out[8 + i] = (uint8_t)(refusal_id >> (8 * i));
  }
}

int mheal_decode(const uint8_t *payload, size_t len, enum mheal_type *type, uint64_t *refusal_id)
{
  if (len < 1 || payload[0] != MHEAL_TAG) {
    return CAIRN_EINVAL;
  }
  if (len != MHEAL_FRAME || (payload[2] | payload[3] << 8) != MHEAL_VERSION ||
      payload[1] < MHEAL_REFUSED_FRAME || payload[1] > MHEAL_REJOINED_FRAME) {
    return CAIRN_ECORRUPT;
  }
  *type = (enum mheal_type)payload[1];
  uint64_t id = 0;
  for (int i = 0; i < 8; i++) {
    id |= (uint64_t)payload[8 + i] << (8 * i);
  }
  *refusal_id = id;
  return 0;
}

static void mheal_send_all(struct nodewatch *nw, uint64_t self_id, const uint64_t *voters,
                           size_t nvoters, enum mheal_type type, uint64_t refusal_id)
{
  uint8_t frame[MHEAL_FRAME];
  mheal_encode(frame, type, refusal_id);
  for (size_t i = 0; i < nvoters; i++) {
    if (voters[i] != self_id) {
      int rv = nwatch_send(nw, voters[i], frame, sizeof frame);
      (void)rv; /* not connected: the next tick sends again */
    }
  }
}

void mheal_tick(struct mheal *mh, struct nodewatch *nw, uint64_t self_id, const uint64_t *voters,
                size_t nvoters, bool synced, uint64_t now_ms)
{
  if (mh->state == MHEAL_REFUSED) {
    mheal_send_all(nw, self_id, voters, nvoters, MHEAL_REFUSED_FRAME, mh->refusal_id);
    if (now_ms - mh->logged_ms >= MHEAL_LOG_EVERY_MS) {
      mh->logged_ms = now_ms;
      log_warn("metaheal",
               "the metadata replica is still refused after %llu s: waiting for the controller "
               "leader to remove it from the metadata group (%s)",
               (unsigned long long)((now_ms - mh->since_ms) / 1000), mh->reason);
    }
    return;
  }
  if (mh->state != MHEAL_JOINING) {
    return;
  }
  if (synced) {
    log_warn("metaheal",
             "the metadata replica is rebuilt: it holds the group's log again, %llu "
             "ms after it rejoined",
             (unsigned long long)(now_ms - mh->since_ms));
    mheal_set_state(mh, MHEAL_DONE, now_ms);
    return;
  }
  mheal_send_all(nw, self_id, voters, nvoters, MHEAL_REJOINED_FRAME, mh->refusal_id);
}

int mheal_rebuild(struct mheal *mh, uint64_t refusal_id, uint64_t now_ms)
{
  if (mh->state != MHEAL_REFUSED || refusal_id != mh->refusal_id) {
    return 0;
  }
  char moved[PATH_MAX];
  int rv = waldamage_discard(mh->dir, moved, sizeof moved);
  if (rv != 0) {
    log_error("metaheal", "%s: moving the refused metadata replica's state aside: %s", mh->dir,
              cairn_strerror(rv));
    return rv;
  }
  log_warn("metaheal",
           "the controller leader removed this node from the metadata group: the refused "
           "replica's state is in %s; it rejoins empty (never bootstrapping) and is caught up "
           "from its peers",
           moved);
  waldamage_prune(mh->dir, WALDAMAGE_DISCARDED_PREFIX, WALDAMAGE_KEEP);
  mh->rebuilt_before = true;
  mheal_set_state(mh, MHEAL_JOINING, now_ms);
  return 1;
}
