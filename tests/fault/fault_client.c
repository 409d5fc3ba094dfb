/* fault_client.c - blocking client calls of the fault rig. See fault_client.h. */
#include "fault_client.h"

#include "wire_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A node answers Metadata in a millisecond and accepts at once; a paused or
 * cut-off one is passed over after these, as libcairn does
 * (LC_META_TIMEOUT_MS), so that the rig measures what clients get. */
#define FC_CONNECT_MS 500
#define FC_METADATA_MS 500
#define FC_RETRY_MS 200

long long fc_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fc_nodes_parse(struct fc_nodes *ns, const char *list)
{
  memset(ns, 0, sizeof *ns);
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", list);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    char *at = strchr(tok, '@');
    if (at == NULL || ns->n >= FC_MAX_NODES || strlen(at + 1) >= sizeof ns->addr[0]) {
      return -1;
    }
    *at = '\0';
    ns->id[ns->n] = strtoull(tok, NULL, 10);
    snprintf(ns->addr[ns->n], sizeof ns->addr[0], "%s", at + 1);
    ns->n++;
  }
  return ns->n > 0 ? 0 : -1;
}

int fc_index(const struct fc_nodes *ns, uint64_t id)
{
  for (int i = 0; i < ns->n; i++) {
    if (ns->id[i] == id) {
      return i;
    }
  }
  return -1;
}

int fc_call(const char *addr, Cairn__Client__Envelope *req, const void *payload, size_t len,
            int timeout_ms, Cairn__Client__Envelope **resp, uint8_t **payload_out,
            size_t *payload_len_out, bool *sent)
{
  return wc_call(addr, FC_CONNECT_MS, req, payload, len, timeout_ms, resp, payload_out,
                 payload_len_out, sent);
}

Cairn__Client__MetadataResponse *fc_metadata(const struct fc_nodes *ns, int i,
                                             Cairn__Client__Envelope **env)
{
  Cairn__Client__MetadataRequest mr = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_METADATA;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  req.metadata_req = &mr;
  Cairn__Client__Envelope *resp = NULL;
  bool sent;
  if (fc_call(ns->addr[i], &req, NULL, 0, FC_METADATA_MS, &resp, NULL, NULL, &sent) != 0) {
    return NULL;
  }
  if (resp->body_case != CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP) {
    cairn__client__envelope__free_unpacked(resp, NULL);
    return NULL;
  }
  *env = resp;
  return resp->metadata_resp;
}

int fc_partition_info(const struct fc_nodes *ns, int i, const char *topic, uint32_t partition,
                      struct fc_partition *out)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = fc_metadata(ns, i, &env);
  int rv = -1;
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    const Cairn__Client__TopicInfo *ti = md->topics[t];
    for (size_t p = 0; strcmp(ti->name, topic) == 0 && p < ti->n_partitions; p++) {
      const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
      if (pi->partition != partition) {
        continue;
      }
      out->leader = pi->leader_id != 0 ? fc_index(ns, pi->leader_id) : -1;
      out->replicas = 0;
      for (size_t r = 0; r < pi->n_replicas; r++) {
        int k = fc_index(ns, pi->replicas[r]);
        out->replicas |= k >= 0 ? 1ull << k : 0;
      }
      out->log_start = pi->log_start_offset;
      out->high_watermark = pi->high_watermark;
      rv = 0;
    }
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return rv;
}

int fc_find_leader(const struct fc_nodes *ns, int first, const char *topic, uint32_t partition)
{
  return fc_find_leader_avoiding(ns, first, topic, partition, -1);
}

_Static_assert(FC_MAX_NODES <= 64, "node sets are 64-bit masks");

int fc_find_leader_avoiding(const struct fc_nodes *ns, int first, const char *topic,
                            uint32_t partition, int avoid)
{
  uint64_t replicas = 0, asked = 0;
  bool named_avoid = false;
  /* First the nodes in turn from first; once an answer names avoid, the
   * partition's own replicas, which know its leader first hand. */
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < ns->n; k++) {
      int i = (first + k) % ns->n;
      bool replica = (replicas >> i & 1) != 0;
      if (i == avoid || (asked >> i & 1) != 0 || (round == 0 && named_avoid) ||
          (round == 1 && !replica)) {
        continue;
      }
      asked |= 1ull << i;
      struct fc_partition pi;
      int found = -1;
      if (fc_partition_info(ns, i, topic, partition, &pi) == 0) {
        found = pi.leader;
        replicas |= pi.replicas;
      }
      if (found >= 0 && found != avoid) {
        return found;
      }
      named_avoid = named_avoid || (found >= 0 && found == avoid);
    }
  }
  return named_avoid ? avoid : -1;
}

int fc_find_controller(const struct fc_nodes *ns)
{
  for (int i = 0; i < ns->n; i++) {
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__MetadataResponse *md = fc_metadata(ns, i, &env);
    int found = md != NULL && md->controller_id != 0 ? fc_index(ns, md->controller_id) : -1;
    if (env != NULL) {
      cairn__client__envelope__free_unpacked(env, NULL);
    }
    if (found >= 0) {
      return found;
    }
  }
  return -1;
}

/* The error of an admin answer: 0, a wire code, or -1 for another body;
 * *msg (may be NULL) gets the error's message, borrowed from resp. */
static int fc_admin_code_msg(const Cairn__Client__Envelope *resp, const char **msg)
{
  const Cairn__Client__Error *e = NULL;
  switch (resp->body_case) {
  case CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP:
    e = resp->create_topic_resp->error;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_RESP:
    e = resp->decommission_resp->error;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_RESP:
    e = resp->init_producer_id_resp->error;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP:
    e = resp->error_resp;
    break;
  default:
    return -1;
  }
  if (msg != NULL) {
    *msg = e != NULL && e->message != NULL ? e->message : "";
  }
  return e != NULL ? (int)e->code : 0;
}

/* Sends an admin request to each node in turn until one answers with
 * something other than a passing state (no controller, a node stopping,
 * not enough nodes alive yet), or timeout_ms passes. */
static int fc_admin_resp(const struct fc_nodes *ns, Cairn__Client__Envelope *req, int timeout_ms,
                         Cairn__Client__Envelope **out);

static int fc_admin(const struct fc_nodes *ns, Cairn__Client__Envelope *req, int timeout_ms)
{
  return fc_admin_resp(ns, req, timeout_ms, NULL);
}

/* fc_admin, handing the final answer (owned) to *out when out is not NULL
 * and an answer came. */
static int fc_admin_resp(const struct fc_nodes *ns, Cairn__Client__Envelope *req, int timeout_ms,
                         Cairn__Client__Envelope **out)
{
  long long end = fc_now_ms() + timeout_ms;
  int code = -1;
  for (int k = 0; fc_now_ms() < end; k++) {
    Cairn__Client__Envelope *resp = NULL;
    bool sent;
    if (fc_call(ns->addr[k % ns->n], req, NULL, 0, 5000, &resp, NULL, NULL, &sent) != 0) {
      usleep(FC_RETRY_MS * 1000);
      continue;
    }
    const char *msg = "";
    code = fc_admin_code_msg(resp, &msg);
    /* Passing states: INVALID_REPLICATION_FACTOR (fewer nodes alive than
     * asked for, yet); UNKNOWN, IN_DOUBT, TIMEOUT (the controller lost
     * leadership or could not finish: a retry of a create that did land is
     * answered TOPIC_EXISTS). The last three are said on stderr. */
    bool odd = code == CAIRN__CLIENT__ERROR_CODE__UNKNOWN ||
               code == CAIRN__CLIENT__ERROR_CODE__IN_DOUBT ||
               code == CAIRN__CLIENT__ERROR_CODE__TIMEOUT;
    if (odd) {
      fprintf(stderr, "fault client: admin request to %s answered code %d (%s); retrying\n",
              ns->addr[k % ns->n], code, msg);
    }
    if (!odd && code != CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER &&
        code != CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN &&
        code != CAIRN__CLIENT__ERROR_CODE__INVALID_REPLICATION_FACTOR) {
      if (out != NULL) {
        *out = resp;
      } else {
        cairn__client__envelope__free_unpacked(resp, NULL);
      }
      return code;
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
    usleep(FC_RETRY_MS * 1000);
  }
  return code;
}

int fc_create_topic(const struct fc_nodes *ns, const char *topic, uint32_t partitions, uint32_t rf,
                    const Cairn__Client__TopicConfig *config, int timeout_ms)
{
  Cairn__Client__CreateTopicRequest r = CAIRN__CLIENT__CREATE_TOPIC_REQUEST__INIT;
  r.name = (char *)topic;
  r.partitions = partitions;
  r.replication_factor = rf;
  r.config = (Cairn__Client__TopicConfig *)config;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_CREATE_TOPIC;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
  req.create_topic_req = &r;
  int code = fc_admin(ns, &req, timeout_ms);
  return code == CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS ? 0 : code;
}

int fc_decommission(const struct fc_nodes *ns, uint64_t id, int timeout_ms)
{
  Cairn__Client__DecommissionNodeRequest r = CAIRN__CLIENT__DECOMMISSION_NODE_REQUEST__INIT;
  r.node_id = id;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_DECOMMISSION_NODE;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_REQ;
  req.decommission_req = &r;
  return fc_admin(ns, &req, timeout_ms);
}

int fc_init_producer(const struct fc_nodes *ns, int timeout_ms, int64_t *producer_id,
                     int16_t *epoch)
{
  Cairn__Client__InitProducerIdRequest r = CAIRN__CLIENT__INIT_PRODUCER_ID_REQUEST__INIT;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_INIT_PRODUCER_ID;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_REQ;
  req.init_producer_id_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  int code = fc_admin_resp(ns, &req, timeout_ms, &resp);
  if (code == 0 && resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_RESP) {
    *producer_id = (int64_t)resp->init_producer_id_resp->producer_id;
    *epoch = (int16_t)resp->init_producer_id_resp->producer_epoch;
  } else if (code == 0) {
    code = -1;
  }
  if (resp != NULL) {
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  return code;
}

/* Codes after which the batch was certainly not appended: the request was
 * refused before reaching the partition's Raft log. */
static bool fc_code_definite(int code)
{
  switch (code) {
  case CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE: /* a DeleteRecords above the log */
  case CAIRN__CLIENT__ERROR_CODE__NOT_LEADER:
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC:
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PARTITION:
  case CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE:
  case CAIRN__CLIENT__ERROR_CODE__RATE_LIMITED:
  case CAIRN__CLIENT__ERROR_CODE__CORRUPT_BATCH:
  case CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST:
  case CAIRN__CLIENT__ERROR_CODE__REQUEST_TOO_LARGE:
  case CAIRN__CLIENT__ERROR_CODE__STORAGE_ERROR:
  case CAIRN__CLIENT__ERROR_CODE__OUT_OF_ORDER_SEQUENCE:
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PRODUCER:
  case CAIRN__CLIENT__ERROR_CODE__PRODUCER_FENCED:
    return true;
  default:
    return false;
  }
}

/* Sends req to addr and waits answer_ms for an answer of body `want`:
 * returns FC_ACK with *resp (owned: free with
 * cairn__client__envelope__free_unpacked) when one came; otherwise *resp
 * is NULL and the outcome is FC_FAIL (not sent, or an ErrorResponse: the
 * request was refused whole) or FC_INDETERMINATE (sent, no answer or
 * another body), with *code the transport or wire code. */
static enum fc_outcome fc_call_answer(const char *addr, Cairn__Client__Envelope *req,
                                      const void *payload, size_t len, int answer_ms,
                                      Cairn__Client__Envelope__BodyCase want,
                                      Cairn__Client__Envelope **resp, int *code)
{
  bool sent;
  *resp = NULL;
  int rv = fc_call(addr, req, payload, len, answer_ms, resp, NULL, NULL, &sent);
  if (rv != 0) {
    *code = rv;
    return sent ? FC_INDETERMINATE : FC_FAIL;
  }
  if ((*resp)->body_case == want) {
    return FC_ACK;
  }
  enum fc_outcome out = FC_INDETERMINATE;
  *code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
  if ((*resp)->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP) {
    *code = (*resp)->error_resp != NULL ? (int)(*resp)->error_resp->code : -1;
    out = FC_FAIL;
  }
  cairn__client__envelope__free_unpacked(*resp, NULL);
  *resp = NULL;
  return out;
}

/* The outcome of a one-partition answer from its whole-request error (a
 * refusal before anything was proposed), its partition count and that
 * partition's error; *code gets the code. */
static enum fc_outcome fc_outcome_of(const Cairn__Client__Error *whole, size_t nparts,
                                     const Cairn__Client__Error *part, int *code)
{
  if (whole != NULL && whole->code != 0) {
    *code = (int)whole->code;
    return FC_FAIL;
  }
  if (nparts != 1) {
    *code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
    return FC_INDETERMINATE;
  }
  *code = part != NULL ? (int)part->code : 0;
  return *code == 0 ? FC_ACK : fc_code_definite(*code) ? FC_FAIL : FC_INDETERMINATE;
}

enum fc_outcome fc_produce_once(const struct fc_nodes *ns, int i, const char *topic,
                                uint32_t partition, const uint8_t *batch, size_t len, int answer_ms,
                                int *code, int64_t *offset, int *hint)
{
  *hint = -1;
  struct wc_produce p;
  wc_produce_init(&p, topic, partition, len, 5000);
  Cairn__Client__Envelope *resp;
  enum fc_outcome out = fc_call_answer(ns->addr[i], &p.env, batch, len, answer_ms,
                                       CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP, &resp, code);
  if (resp == NULL) {
    return out;
  }
  const Cairn__Client__ProduceResponse *pr = resp->produce_resp;
  const Cairn__Client__ProducePartitionResult *res =
      pr->n_partitions == 1 ? pr->partitions[0] : NULL;
  out = fc_outcome_of(pr->error, pr->n_partitions, res != NULL ? res->error : NULL, code);
  if (out == FC_ACK) {
    *offset = res->base_offset;
  } else if (res != NULL && *code == CAIRN__CLIENT__ERROR_CODE__NOT_LEADER && res->leader_id != 0) {
    *hint = fc_index(ns, res->leader_id);
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return out;
}

int fc_fetch_once(const struct fc_nodes *ns, int i, const char *topic, uint32_t partition,
                  int64_t offset, uint32_t max_bytes, uint8_t **data, size_t *len, int64_t *hw,
                  int64_t *log_start)
{
  *log_start = -1;
  Cairn__Client__FetchPartition fp = CAIRN__CLIENT__FETCH_PARTITION__INIT;
  fp.topic = (char *)topic;
  fp.partition = partition;
  fp.offset = offset;
  fp.max_bytes = max_bytes;
  Cairn__Client__FetchPartition *fpp = &fp;
  Cairn__Client__FetchRequest r = CAIRN__CLIENT__FETCH_REQUEST__INIT;
  r.max_bytes = max_bytes;
  r.n_partitions = 1;
  r.partitions = &fpp;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_FETCH;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ;
  req.fetch_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  uint8_t *p = NULL;
  size_t plen = 0;
  bool sent;
  int rv = fc_call(ns->addr[i], &req, NULL, 0, 5000, &resp, &p, &plen, &sent);
  if (rv != 0) {
    return rv < 0 ? rv : -EIO;
  }
  int code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
  if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP &&
      resp->fetch_resp->n_partitions == 1) {
    const Cairn__Client__FetchPartitionResult *fr = resp->fetch_resp->partitions[0];
    code = fr->error != NULL ? (int)fr->error->code : 0;
    *log_start = fr->log_start_offset;
    if (code == 0) {
      *data = p;
      *len = plen;
      *hw = fr->high_watermark;
      p = NULL;
    }
  }
  free(p);
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

enum fc_outcome fc_delete_records(const struct fc_nodes *ns, int i, const char *topic,
                                  uint32_t partition, int64_t offset, int answer_ms, int *code,
                                  int64_t *low_watermark)
{
  Cairn__Client__DeleteRecordsPartition dp = CAIRN__CLIENT__DELETE_RECORDS_PARTITION__INIT;
  dp.topic = (char *)topic;
  dp.partition = partition;
  dp.offset = offset;
  Cairn__Client__DeleteRecordsPartition *dpp = &dp;
  Cairn__Client__DeleteRecordsRequest r = CAIRN__CLIENT__DELETE_RECORDS_REQUEST__INIT;
  r.n_partitions = 1;
  r.partitions = &dpp;
  r.timeout_ms = (uint32_t)answer_ms;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_DELETE_RECORDS;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_REQ;
  req.delete_records_req = &r;
  *low_watermark = -1;
  /* The node answers TIMEOUT itself after answer_ms; a second more for that. */
  Cairn__Client__Envelope *resp;
  enum fc_outcome out =
      fc_call_answer(ns->addr[i], &req, NULL, 0, answer_ms + 1000,
                     CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_RESP, &resp, code);
  if (resp == NULL) {
    return out;
  }
  const Cairn__Client__DeleteRecordsResponse *dr = resp->delete_records_resp;
  const Cairn__Client__DeleteRecordsPartitionResult *res =
      dr->n_partitions == 1 ? dr->partitions[0] : NULL;
  out = fc_outcome_of(dr->error, dr->n_partitions, res != NULL ? res->error : NULL, code);
  if (out == FC_ACK) {
    *low_watermark = res->low_watermark;
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return out;
}
