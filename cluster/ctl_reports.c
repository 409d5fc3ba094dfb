/* ctl_reports.c - the controller leader's table of partition reports
 * (ctl_reports.h): a sorted array, binary search, a merge per report. */
#include "cluster/ctl_reports.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

static uint64_t ctl_reports_key(const struct ctl_report *r)
{
  return meta_group_id(r->topic_id, r->partition);
}

static int ctl_reports_cmp(const void *a, const void *b)
{
  uint64_t ka = ctl_reports_key(a), kb = ctl_reports_key(b);
  return ka < kb ? -1 : ka > kb;
}

/* The index of the first report in [0, n) whose key is not below key. */
static size_t ctl_reports_lower(const struct ctl_reports *t, size_t n, uint64_t key)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ctl_reports_key(&t->v[mid]) < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

void ctl_reports_init(struct ctl_reports *t)
{
  t->v = NULL;
  t->n = 0;
  t->cap = 0;
}

void ctl_reports_free(struct ctl_reports *t)
{
  free(t->v);
  ctl_reports_init(t);
}

void ctl_reports_clear(struct ctl_reports *t) { t->n = 0; }

static int ctl_reports_reserve(struct ctl_reports *t, size_t more)
{
  if (t->n + more <= t->cap) {
    return 0;
  }
  size_t cap = t->cap ? t->cap : 64;
  while (cap < t->n + more) {
    cap *= 2;
  }
  struct ctl_report *nv = realloc(t->v, cap * sizeof *nv);
  if (nv == NULL) {
    return CAIRN_ENOMEM;
  }
  t->v = nv;
  t->cap = cap;
  return 0;
}

/* Sorts add[0, n) and keeps one report per partition (the higher term). */
static size_t ctl_reports_sort_unique(struct ctl_report *add, size_t n)
{
  qsort(add, n, sizeof *add, ctl_reports_cmp);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m > 0 && ctl_reports_key(&add[m - 1]) == ctl_reports_key(&add[i])) {
      if (add[m - 1].term <= add[i].term) {
        add[m - 1] = add[i];
      }
      continue;
    }
    add[m++] = add[i];
  }
  return m;
}

int ctl_reports_put(struct ctl_reports *t, uint64_t node_id, const struct ctl_report *rs, size_t n)
{
  if (n == 0) {
    return 0;
  }
  struct ctl_report *add = malloc(n * sizeof *add);
  if (add == NULL || ctl_reports_reserve(t, n) != 0) {
    free(add);
    return CAIRN_ENOMEM;
  }
  memcpy(add, rs, n * sizeof *add);
  for (size_t i = 0; i < n; i++) {
    add[i].leader_id = node_id;
  }
  n = ctl_reports_sort_unique(add, n);
  /* Partitions the table holds are replaced in place; the rest stay in
   * add, still sorted. */
  size_t old = t->n, m = 0;
  for (size_t i = 0; i < n; i++) {
    size_t at = ctl_reports_lower(t, old, ctl_reports_key(&add[i]));
    if (at < old && ctl_reports_key(&t->v[at]) == ctl_reports_key(&add[i])) {
      if (t->v[at].term <= add[i].term) {
        t->v[at] = add[i];
      }
      continue;
    }
    add[m++] = add[i];
  }
  /* Merge the new ones in from the back: the write position never passes
   * an unread report of the table, as add is a separate array. */
  size_t i = old, j = m, k = old + m;
  while (j > 0) {
    if (i > 0 && ctl_reports_key(&t->v[i - 1]) > ctl_reports_key(&add[j - 1])) {
      t->v[--k] = t->v[--i];
    } else {
      t->v[--k] = add[--j];
    }
  }
  t->n = old + m;
  free(add);
  return 0;
}

void ctl_reports_drop(struct ctl_reports *t, uint64_t node_id, uint64_t group_id)
{
  size_t i = ctl_reports_lower(t, t->n, group_id);
  if (i == t->n || ctl_reports_key(&t->v[i]) != group_id || t->v[i].leader_id != node_id) {
    return;
  }
  memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof t->v[0]);
  t->n--;
}

void ctl_reports_drop_node(struct ctl_reports *t, uint64_t node_id)
{
  size_t w = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (t->v[i].leader_id != node_id) {
      t->v[w++] = t->v[i];
    }
  }
  t->n = w;
}

const struct ctl_report *ctl_reports_find(const struct ctl_reports *t, uint64_t group_id)
{
  size_t i = ctl_reports_lower(t, t->n, group_id);
  return i < t->n && ctl_reports_key(&t->v[i]) == group_id ? &t->v[i] : NULL;
}
