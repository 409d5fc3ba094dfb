/* rbudget.c - the node-wide budget for request bytes (see rbudget.h). */
#include "net/rbudget.h"

#include <stddef.h>

void rbudget_init(struct rbudget *b, uint64_t max)
{
  b->max = max;
  b->used = 0;
  b->peak = 0;
  b->waits = 0;
  b->held = false;
  b->head = b->tail = NULL;
}

static void rbudget_charge(struct rbudget *b, uint64_t n)
{
  b->used += n;
  if (b->used > b->peak) {
    b->peak = b->used;
  }
}

bool rbudget_take(struct rbudget *b, uint64_t n)
{
  if (b->held || b->used + n > b->max) {
    return false;
  }
  rbudget_charge(b, n);
  return true;
}

void rbudget_force(struct rbudget *b, uint64_t n) { rbudget_charge(b, n); }

bool rbudget_over(const struct rbudget *b) { return b->held || b->used > b->max + b->max / 4; }

void rbudget_hold(struct rbudget *b, bool held)
{
  b->held = held;
  if (!held) {
    rbudget_release(b, 0);
  }
}

void rbudget_cancel(struct rbudget *b, struct rbudget_waiter *w)
{
  if (!w->queued) {
    return;
  }
  if (w->prev != NULL) {
    w->prev->next = w->next;
  } else {
    b->head = w->next;
  }
  if (w->next != NULL) {
    w->next->prev = w->prev;
  } else {
    b->tail = w->prev;
  }
  w->prev = w->next = NULL;
  w->queued = false;
}

void rbudget_wait(struct rbudget *b, struct rbudget_waiter *w, uint64_t need)
{
  if (w->queued) {
    return;
  }
  w->need = need;
  w->queued = true;
  w->next = NULL;
  w->prev = b->tail;
  if (b->tail != NULL) {
    b->tail->next = w;
  } else {
    b->head = w;
  }
  b->tail = w;
  b->waits++;
}

void rbudget_release(struct rbudget *b, uint64_t n)
{
  b->used = n <= b->used ? b->used - n : 0;
  while (b->head != NULL) {
    struct rbudget_waiter *w = b->head;
    if (w->need == 0 ? rbudget_over(b) : b->held || b->used + w->need > b->max) {
      break;
    }
    if (w->need > 0) {
      rbudget_charge(b, w->need);
      w->granted = w->need;
    }
    rbudget_cancel(b, w);
    w->cb(w);
  }
}
