/* sync.c - the blocking API: a private loop and client per cairn_sync;
 * each call starts the asynchronous one and runs the loop until its
 * callback has fired. */
#include "internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A record copied out of a consumer callback (one allocation). */
struct lc_srec {
  struct lc_srec *next;
  uint64_t epoch; /* the partition's seek count when it was handed out */
  struct cairn_record rec;
};

struct lc_scons {
  struct lc_scons *next;
  struct cairn_consumer *cons;
  struct lc_srec *head, *tail;
  struct lc_srec *current; /* handed out by the last poll */
  int err;
  char *err_topic;
  int32_t err_partition;
  bool closed;
};

struct lc_sprod {
  struct lc_sprod *next;
  struct cairn_producer *p;
  bool closed;
};

struct cairn_sync {
  uv_loop_t loop;
  struct cairn_client *c;
  struct lc_sprod *prods;
  struct lc_scons *conss;
  char errmsg[LC_ERRMSG_SIZE * 2];
};

/* The state of one blocking call. */
struct lc_swait {
  struct cairn_sync *s;
  bool done;
  int status;
  void *result;
  int64_t offset;
  int64_t timestamp;
  int32_t partition;
};

static void lc_sync_run(struct cairn_sync *s, const bool *done)
{
  while (!*done) {
    uv_run(&s->loop, UV_RUN_ONCE);
  }
}

static void lc_sync_set_err(struct cairn_sync *s, int status, const char *errmsg)
{
  if (status == 0) {
    s->errmsg[0] = '\0';
  } else {
    lc_fmt(s->errmsg, sizeof s->errmsg, "%s",
             errmsg != NULL && errmsg[0] != '\0' ? errmsg : cairn_strerror(status));
  }
}

static void lc_sync_on_done(struct cairn_client *c, int status, const char *errmsg, void *data)
{
  struct lc_swait *w = data;
  w->status = status;
  lc_sync_set_err(w->s, status, errmsg);
  w->done = true;
}

static void lc_sync_on_client_closed(struct cairn_client *c, void *data) { *(bool *)data = true; }

/* Closes the client and the loop (everything else closed before). */
static void lc_sync_close_loop(struct cairn_sync *s)
{
  if (s->c != NULL) {
    bool closed = false;
    if (cairn_client_close(s->c, lc_sync_on_client_closed, &closed) == 0) {
      lc_sync_run(s, &closed);
    }
    s->c = NULL;
  }
  uv_run(&s->loop, UV_RUN_DEFAULT); /* connections finish closing */
  (void)uv_loop_close(&s->loop);
}

int cairn_sync_new(const char *bootstrap, const struct cairn_options *o, struct cairn_sync **out,
                   char *errmsg, size_t errmsg_len)
{
  struct cairn_sync *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = uv_loop_init(&s->loop);
  if (rv != 0) {
    free(s);
    return rv;
  }
  rv = cairn_client_new(&s->loop, bootstrap, o, &s->c);
  if (rv != 0) {
    if (errmsg != NULL && errmsg_len > 0) {
      lc_fmt(errmsg, errmsg_len, "bad bootstrap list \"%s\": %s (want host:port[,host:port...])",
               bootstrap != NULL ? bootstrap : "", cairn_strerror(rv));
    }
    lc_sync_close_loop(s);
    free(s);
    return rv;
  }
  struct lc_swait w = {.s = s};
  rv = cairn_client_ready(s->c, lc_sync_on_done, &w);
  if (rv == 0) {
    lc_sync_run(s, &w.done);
    rv = w.status;
  }
  if (rv != 0) {
    if (errmsg != NULL && errmsg_len > 0) {
      lc_fmt(errmsg, errmsg_len, "%s", s->errmsg[0] != '\0' ? s->errmsg : cairn_strerror(rv));
    }
    lc_sync_close_loop(s);
    free(s);
    return rv;
  }
  *out = s;
  return 0;
}

struct cairn_client *cairn_sync_client(struct cairn_sync *s) { return s->c; }

const char *cairn_sync_errmsg(const struct cairn_sync *s) { return s->errmsg; }

/* ---- admin ---- */

static void lc_sync_on_topic(struct cairn_client *c, int status, const char *errmsg,
                             struct cairn_topic_info *t, void *data)
{
  struct lc_swait *w = data;
  w->result = t;
  lc_sync_on_done(c, status, errmsg, data);
}

static void lc_sync_on_list(struct cairn_client *c, int status, const char *errmsg,
                            struct cairn_topic_list *l, void *data)
{
  struct lc_swait *w = data;
  w->result = l;
  lc_sync_on_done(c, status, errmsg, data);
}

static void lc_sync_on_cluster(struct cairn_client *c, int status, const char *errmsg,
                               struct cairn_cluster_info *ci, void *data)
{
  struct lc_swait *w = data;
  w->result = ci;
  lc_sync_on_done(c, status, errmsg, data);
}

static void lc_sync_on_offset(struct cairn_client *c, int status, const char *errmsg,
                              int64_t offset, int64_t timestamp, void *data)
{
  struct lc_swait *w = data;
  w->offset = offset;
  w->timestamp = timestamp;
  lc_sync_on_done(c, status, errmsg, data);
}

/* Runs the call started with rv until its callback fired. */
static int lc_sync_wait(struct cairn_sync *s, struct lc_swait *w, int rv)
{
  if (rv != 0) {
    lc_sync_set_err(s, rv, NULL);
    return rv;
  }
  lc_sync_run(s, &w->done);
  return w->status;
}

int cairn_sync_create_topic(struct cairn_sync *s, const char *name, uint32_t partitions,
                            uint32_t replication_factor, const struct cairn_topic_config *cfg)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w,
                      cairn_create_topic(s->c, name, partitions, replication_factor, cfg,
                                         lc_sync_on_done, &w));
}

int cairn_sync_delete_topic(struct cairn_sync *s, const char *name)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_delete_topic(s->c, name, lc_sync_on_done, &w));
}

int cairn_sync_add_partitions(struct cairn_sync *s, const char *name, uint32_t partitions)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_add_partitions(s->c, name, partitions, lc_sync_on_done, &w));
}

int cairn_sync_alter_topic_config(struct cairn_sync *s, const char *name,
                                  const struct cairn_config_change *changes, size_t n)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w,
                      cairn_alter_topic_config(s->c, name, changes, n, lc_sync_on_done, &w));
}

int cairn_sync_list_topics(struct cairn_sync *s, struct cairn_topic_list **out)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(s, &w, cairn_list_topics(s->c, lc_sync_on_list, &w));
  *out = rv == 0 ? w.result : NULL;
  return rv;
}

int cairn_sync_describe_topic(struct cairn_sync *s, const char *name,
                              struct cairn_topic_info **out)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(s, &w, cairn_describe_topic(s->c, name, lc_sync_on_topic, &w));
  *out = rv == 0 ? w.result : NULL;
  return rv;
}

int cairn_sync_describe_cluster(struct cairn_sync *s, struct cairn_cluster_info **out)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(s, &w, cairn_describe_cluster(s->c, lc_sync_on_cluster, &w));
  *out = rv == 0 ? w.result : NULL;
  return rv;
}

static void lc_sync_on_users(struct cairn_client *c, int status, const char *errmsg,
                             struct cairn_user_list *l, void *data)
{
  struct lc_swait *w = data;
  w->result = l;
  lc_sync_on_done(c, status, errmsg, data);
}

int cairn_sync_user_set(struct cairn_sync *s, const char *name, const char *password)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_user_set(s->c, name, password, lc_sync_on_done, &w));
}

int cairn_sync_user_delete(struct cairn_sync *s, const char *name)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_user_delete(s->c, name, lc_sync_on_done, &w));
}

int cairn_sync_list_users(struct cairn_sync *s, struct cairn_user_list **out)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(s, &w, cairn_list_users(s->c, lc_sync_on_users, &w));
  *out = rv == 0 ? w.result : NULL;
  return rv;
}

static void lc_sync_on_acls(struct cairn_client *c, int status, const char *errmsg,
                            struct cairn_acl_list *l, void *data)
{
  struct lc_swait *w = data;
  w->result = l;
  lc_sync_on_done(c, status, errmsg, data);
}

int cairn_sync_acl_add(struct cairn_sync *s, const struct cairn_acl *a)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_acl_add(s->c, a, lc_sync_on_done, &w));
}

int cairn_sync_acl_remove(struct cairn_sync *s, const struct cairn_acl *a)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_acl_remove(s->c, a, lc_sync_on_done, &w));
}

int cairn_sync_list_acls(struct cairn_sync *s, const char *principal, int resource_type,
                         const char *resource, struct cairn_acl_list **out)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(
      s, &w, cairn_list_acls(s->c, principal, resource_type, resource, lc_sync_on_acls, &w));
  *out = rv == 0 ? w.result : NULL;
  return rv;
}

int cairn_sync_decommission_node(struct cairn_sync *s, uint64_t node_id)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_decommission_node(s->c, node_id, lc_sync_on_done, &w));
}

int cairn_sync_recommission_node(struct cairn_sync *s, uint64_t node_id)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_recommission_node(s->c, node_id, lc_sync_on_done, &w));
}

int cairn_sync_list_offsets(struct cairn_sync *s, const char *topic, int32_t partition,
                            enum cairn_offset_spec spec, int64_t timestamp_ms, int64_t *offset,
                            int64_t *timestamp_out)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(s, &w,
                        cairn_list_offsets(s->c, topic, partition, spec, timestamp_ms,
                                           lc_sync_on_offset, &w));
  if (offset != NULL) {
    *offset = rv == 0 ? w.offset : -1;
  }
  if (timestamp_out != NULL) {
    *timestamp_out = rv == 0 ? w.timestamp : -1;
  }
  return rv;
}

int cairn_sync_delete_records(struct cairn_sync *s, const char *topic, int32_t partition,
                              int64_t offset, int64_t *low_watermark)
{
  struct lc_swait w = {.s = s};
  int rv = lc_sync_wait(
      s, &w, cairn_delete_records(s->c, topic, partition, offset, lc_sync_on_offset, &w));
  if (low_watermark != NULL) {
    *low_watermark = rv == 0 ? w.offset : -1;
  }
  return rv;
}

/* ---- producer ---- */

int cairn_sync_producer_new(struct cairn_sync *s, const struct cairn_producer_options *o,
                            struct cairn_producer **out)
{
  struct lc_sprod *sp = calloc(1, sizeof *sp);
  if (sp == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = cairn_producer_new(s->c, o, &sp->p);
  if (rv != 0) {
    free(sp);
    return rv;
  }
  sp->next = s->prods;
  s->prods = sp;
  *out = sp->p;
  return 0;
}

int cairn_sync_send(struct cairn_sync *s, struct cairn_producer *p, const struct cairn_message *m,
                    cairn_delivery_cb cb, void *data)
{
  uint64_t deadline = uv_now(&s->loop) + s->c->opts.delivery_timeout_ms;
  for (;;) {
    int rv = cairn_producer_send(p, m, cb, data);
    if (rv != CAIRN_EQUEUE_FULL || uv_now(&s->loop) >= deadline) {
      lc_sync_set_err(s, rv, NULL);
      return rv;
    }
    uv_run(&s->loop, UV_RUN_ONCE); /* deliveries free room */
  }
}

static void lc_sync_on_delivery(struct cairn_producer *p, int status,
                                const struct cairn_delivery *d, void *data)
{
  struct lc_swait *w = data;
  w->status = status;
  w->partition = d->partition;
  w->offset = d->offset;
  w->done = true;
  /* cairn_sync_errmsg then names what was not reached (d->error). */
  lc_sync_set_err(w->s, status, d->error);
}

static void lc_sync_on_nudged(struct cairn_producer *p, int status, void *data) {}

int cairn_sync_produce(struct cairn_sync *s, struct cairn_producer *p,
                       const struct cairn_message *m, int32_t *partition, int64_t *offset)
{
  struct lc_swait w = {.s = s, .partition = -1, .offset = -1};
  int rv = cairn_sync_send(s, p, m, lc_sync_on_delivery, &w);
  if (rv == 0) {
    /* Send it now rather than after linger_ms (if the nudge fails, the
     * message still goes after linger). */
    if (cairn_producer_flush(p, lc_sync_on_nudged, NULL) != 0) {
    }
    lc_sync_run(s, &w.done);
    rv = w.status; /* s->errmsg: set by lc_sync_on_delivery */
  }
  if (partition != NULL) {
    *partition = w.partition;
  }
  if (offset != NULL) {
    *offset = w.offset;
  }
  return rv;
}

static void lc_sync_on_flushed(struct cairn_producer *p, int status, void *data)
{
  struct lc_swait *w = data;
  w->status = status;
  w->done = true;
}

int cairn_sync_flush(struct cairn_sync *s, struct cairn_producer *p)
{
  struct lc_swait w = {.s = s};
  return lc_sync_wait(s, &w, cairn_producer_flush(p, lc_sync_on_flushed, &w));
}

static void lc_sync_on_prod_closed(struct cairn_producer *p, int status, void *data)
{
  *(bool *)data = true;
}

void cairn_sync_producer_close(struct cairn_sync *s, struct cairn_producer *p)
{
  for (struct lc_sprod **pp = &s->prods; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->p == p) {
      struct lc_sprod *sp = *pp;
      *pp = sp->next;
      bool closed = false;
      cairn_producer_close(p, lc_sync_on_prod_closed, &closed);
      lc_sync_run(s, &closed);
      free(sp);
      return;
    }
  }
}

/* ---- consumer ---- */

static struct lc_scons *lc_sync_scons(struct cairn_sync *s, const struct cairn_consumer *cons)
{
  for (struct lc_scons *sc = s->conss; sc != NULL; sc = sc->next) {
    if (sc->cons == cons) {
      return sc;
    }
  }
  return NULL;
}

/* Copies one record into a single allocation. */
static struct lc_srec *lc_sync_copy(const struct cairn_record *r)
{
  size_t n = sizeof(struct lc_srec) + r->header_count * sizeof(struct cairn_header) +
             strlen(r->topic) + 1 + r->key_len + r->value_len;
  for (size_t i = 0; i < r->header_count; i++) {
    n += r->headers[i].key_len + r->headers[i].value_len;
  }
  struct lc_srec *sr = malloc(n);
  if (sr == NULL) {
    return NULL;
  }
  sr->next = NULL;
  sr->rec = *r;
  struct cairn_header *h = (struct cairn_header *)(sr + 1);
  uint8_t *w = (uint8_t *)(h + r->header_count);
  size_t tl = strlen(r->topic) + 1;
  memcpy(w, r->topic, tl);
  sr->rec.topic = (const char *)w;
  w += tl;
#define LC_SCOPY(dst, src, len) \
  do {                          \
    if ((src) != NULL) {        \
      memcpy(w, (src), (len));  \
      (dst) = w;                \
      w += (len);               \
    }                           \
  } while (0)
  LC_SCOPY(sr->rec.key, r->key, r->key_len);
  LC_SCOPY(sr->rec.value, r->value, r->value_len);
  for (size_t i = 0; i < r->header_count; i++) {
    h[i] = r->headers[i];
    LC_SCOPY(h[i].key, r->headers[i].key, r->headers[i].key_len);
    LC_SCOPY(h[i].value, r->headers[i].value, r->headers[i].value_len);
  }
#undef LC_SCOPY
  sr->rec.headers = r->header_count > 0 ? h : NULL;
  return sr;
}

static void lc_sync_on_records(struct cairn_consumer *cons, int status, const char *topic,
                               int32_t partition, const struct cairn_record *records,
                               size_t count, void *data)
{
  struct lc_scons *sc = data;
  if (status != 0) {
    if (sc->err == 0) {
      sc->err = status;
      free(sc->err_topic);
      sc->err_topic = strdup(topic);
      sc->err_partition = partition;
    }
    return;
  }
  for (size_t i = 0; i < count; i++) {
    struct lc_srec *sr = lc_sync_copy(&records[i]);
    if (sr == NULL) {
      sc->err = CAIRN_ENOMEM;
      return;
    }
    sr->epoch = lc_consumer_epoch(cons, topic, partition);
    if (sc->tail != NULL) {
      sc->tail->next = sr;
    } else {
      sc->head = sr;
    }
    sc->tail = sr;
  }
}

int cairn_sync_consumer_new(struct cairn_sync *s, const struct cairn_consumer_options *o,
                            struct cairn_consumer **out)
{
  struct lc_scons *sc = calloc(1, sizeof *sc);
  if (sc == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = cairn_consumer_new(s->c, o, &sc->cons);
  if (rv != 0) {
    free(sc);
    return rv;
  }
  sc->next = s->conss;
  s->conss = sc;
  *out = sc->cons;
  return 0;
}

/* Drops queued records of partitions sought or unassigned since. */
static void lc_sync_drop_stale(struct lc_scons *sc)
{
  struct lc_srec **pp = &sc->head;
  sc->tail = NULL;
  while (*pp != NULL) {
    struct lc_srec *sr = *pp;
    if (sr->epoch != lc_consumer_epoch(sc->cons, sr->rec.topic, sr->rec.partition)) {
      *pp = sr->next;
      free(sr);
    } else {
      sc->tail = sr;
      pp = &sr->next;
    }
  }
}

static void lc_sync_on_timer(uv_timer_t *t) { *(bool *)t->data = true; }

static void lc_sync_on_timer_closed(uv_handle_t *h) { *(bool *)h->data = true; }

int cairn_sync_poll(struct cairn_sync *s, struct cairn_consumer *cons, int timeout_ms,
                    const struct cairn_record **rec, const char **err_topic,
                    int32_t *err_partition)
{
  *rec = NULL;
  struct lc_scons *sc = lc_sync_scons(s, cons);
  if (sc == NULL) {
    return CAIRN_EINVAL;
  }
  free(sc->current);
  sc->current = NULL;
  lc_sync_drop_stale(sc);
  if (sc->head == NULL && sc->err == 0 && timeout_ms != 0) {
    int rv = cairn_consumer_start(cons, lc_sync_on_records, sc);
    if (rv != 0) {
      return rv;
    }
    bool expired = false;
    uv_timer_t t;
    uv_timer_init(&s->loop, &t);
    t.data = &expired;
    if (timeout_ms > 0) {
      uv_timer_start(&t, lc_sync_on_timer, (uint64_t)timeout_ms, 0);
    }
    while (sc->head == NULL && sc->err == 0 && !expired) {
      uv_run(&s->loop, UV_RUN_ONCE);
    }
    cairn_consumer_stop(cons);
    bool closed = false;
    t.data = &closed;
    uv_close((uv_handle_t *)&t, lc_sync_on_timer_closed);
    lc_sync_run(s, &closed);
  }
  lc_sync_drop_stale(sc);
  if (sc->head != NULL) {
    sc->current = sc->head;
    sc->head = sc->head->next;
    if (sc->head == NULL) {
      sc->tail = NULL;
    }
    *rec = &sc->current->rec;
    return 0;
  }
  if (sc->err != 0) {
    int err = sc->err;
    sc->err = 0;
    if (err_topic != NULL) {
      *err_topic = sc->err_topic; /* valid until the next poll error */
    }
    if (err_partition != NULL) {
      *err_partition = sc->err_partition;
    }
    lc_sync_set_err(s, err, NULL);
    return err;
  }
  return UV_ETIMEDOUT;
}

static void lc_sync_on_cons_closed(struct cairn_consumer *cons, void *data)
{
  *(bool *)data = true;
}

static void lc_sync_scons_free(struct lc_scons *sc)
{
  free(sc->current);
  while (sc->head != NULL) {
    struct lc_srec *next = sc->head->next;
    free(sc->head);
    sc->head = next;
  }
  free(sc->err_topic);
  free(sc);
}

void cairn_sync_consumer_close(struct cairn_sync *s, struct cairn_consumer *cons)
{
  for (struct lc_scons **pp = &s->conss; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->cons == cons) {
      struct lc_scons *sc = *pp;
      *pp = sc->next;
      bool closed = false;
      cairn_consumer_close(cons, lc_sync_on_cons_closed, &closed);
      lc_sync_run(s, &closed);
      lc_sync_scons_free(sc);
      return;
    }
  }
}

void cairn_sync_free(struct cairn_sync *s)
{
  if (s == NULL) {
    return;
  }
  while (s->prods != NULL) {
    cairn_sync_producer_close(s, s->prods->p);
  }
  while (s->conss != NULL) {
    cairn_sync_consumer_close(s, s->conss->cons);
  }
  lc_sync_close_loop(s);
  free(s);
}
