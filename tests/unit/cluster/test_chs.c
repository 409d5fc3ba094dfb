/* test_chs.c - the cluster handshake (chs.h) as a pure state machine: two
 * ends exchanging bytes in memory, with the right key, a wrong one, cut
 * and garbled messages, and old transcripts replayed against new nonces. */
#include "cluster/chs.h"
#include "common/err.h"
#include "format/endian.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static const uint8_t key_a[] = "0123456789abcdef0123456789abcdef";
static const uint8_t key_b[] = "0123456789abcdef0123456789abcdeX";
static const uint8_t preamble[] = "CRN1-a-preamble-naming-group-7";

static void nonce_fill(uint8_t *n, uint8_t seed)
{
  for (int i = 0; i < CHS_NONCE_LEN; i++) {
    n[i] = (uint8_t)(seed * 31 + i);
  }
}

/* Feeds msg into h in pieces of at most step bytes, as reads would; returns
 * the last result. */
static int feed_in_steps(struct chs *h, const uint8_t *msg, size_t len, size_t step)
{
  int rv = CHS_AGAIN;
  size_t at = 0;
  while (at < len) {
    size_t n = len - at < step ? len - at : step;
    size_t want = chs_want(h);
    if (n > want) {
      n = want;
    }
    rv = chs_feed(h, msg + at, n);
    at += n;
    if (rv != CHS_AGAIN) {
      break;
    }
  }
  return rv;
}

/* Runs a whole handshake between listener l (key kl) and dialer d (key
 * kd); returns the dialer's result on the proof, or the listener's error. */
static int run(struct chs *l, struct chs *d, const uint8_t *kl, const uint8_t *kd, uint8_t nl,
               uint8_t nd, size_t step)
{
  uint8_t nonce_l[CHS_NONCE_LEN], nonce_d[CHS_NONCE_LEN];
  nonce_fill(nonce_l, nl);
  nonce_fill(nonce_d, nd);
  chs_listener_init(l, kl, 32, nonce_l);
  assert_int_equal(chs_dialer_init(d, kd, 32, nonce_d, preamble, sizeof preamble), 0);
  size_t len;
  const uint8_t *challenge = chs_output(l, &len);
  assert_int_equal(len, CHS_CHALLENGE_LEN);
  assert_int_equal(feed_in_steps(d, challenge, len, step), CHS_SEND);
  const uint8_t *answer = chs_output(d, &len);
  assert_int_equal(len, CHS_ANSWER_FIXED + sizeof preamble + CHS_MAC_LEN);
  int rv = feed_in_steps(l, answer, len, step);
  if (rv != CHS_OK) {
    return rv;
  }
  const uint8_t *proof = chs_output(l, &len);
  assert_int_equal(len, CHS_MAC_LEN);
  return feed_in_steps(d, proof, len, step);
}

static void test_chs_same_key_completes_both_ends_in_any_read_sizes(void **state)
{
  static const size_t steps[] = {1, 3, 7, 32, 1000};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    struct chs l, d;
    assert_int_equal(run(&l, &d, key_a, key_a, 1, 2, steps[i]), CHS_OK);
    assert_int_equal(l.state, CHS_DONE);
    assert_int_equal(d.state, CHS_DONE);
    assert_int_equal(chs_want(&l), 0);
    assert_int_equal(chs_want(&d), 0);
    size_t len;
    const uint8_t *p = chs_payload(&l, &len);
    assert_int_equal(len, sizeof preamble);
    assert_memory_equal(p, preamble, sizeof preamble);
  }
}

static void test_chs_documented_layout(void **state)
{
  struct chs l, d;
  assert_int_equal(run(&l, &d, key_a, key_a, 1, 2, 1000), CHS_OK);
  size_t len;
  const uint8_t *c = chs_output(&l, &len); /* after DONE: the proof */
  assert_int_equal(len, CHS_MAC_LEN);
  const uint8_t *a = chs_output(&d, &len);
  assert_memory_equal(a, "CRNA\x01\x00", 6);
  assert_int_equal(le_get16(a + 38), sizeof preamble);
  assert_memory_equal(a + 40, preamble, sizeof preamble);
  /* mac_d is HMAC(key, label || nonce_l || nonce_d || payload) */
  uint8_t t[2 * CHS_NONCE_LEN + sizeof preamble];
  nonce_fill(t, 1);
  nonce_fill(t + CHS_NONCE_LEN, 2);
  memcpy(t + 2 * CHS_NONCE_LEN, preamble, sizeof preamble);
  uint8_t mac[CHS_MAC_LEN];
  chs_mac(key_a, 32, "cairn cluster dialer v1", t, sizeof t, mac);
  assert_memory_equal(a + 40 + sizeof preamble, mac, CHS_MAC_LEN);
  chs_mac(key_a, 32, "cairn cluster listener v1", t, sizeof t, mac);
  assert_memory_equal(c, mac, CHS_MAC_LEN);
  /* The challenge: magic, version, nonce_l. */
  uint8_t nonce_l[CHS_NONCE_LEN];
  nonce_fill(nonce_l, 9);
  chs_listener_init(&l, key_a, 32, nonce_l);
  c = chs_output(&l, &len);
  assert_int_equal(len, 38);
  assert_memory_equal(c, "CRNH\x01\x00", 6);
  assert_memory_equal(c + 6, nonce_l, CHS_NONCE_LEN);
}

static void test_chs_wrong_key_is_refused_by_the_listener(void **state)
{
  struct chs l, d;
  assert_int_equal(run(&l, &d, key_a, key_b, 1, 2, 5), CAIRN_ECLUSTER_AUTH);
  assert_int_equal(l.state, CHS_FAILED);
  size_t len;
  chs_payload(&l, &len);
  assert_int_equal(len, 0); /* nothing of an unproven answer is trusted */
  /* sticky */
  assert_int_equal(chs_feed(&l, (const uint8_t *)"x", 1), CAIRN_EINVAL);
}

static void test_chs_listener_without_the_key_is_refused_by_the_dialer(void **state)
{
  /* A listener that answers with a proof made with another key (a
   * stranger posing as a node) fails at the dialer. */
  uint8_t nonce_l[CHS_NONCE_LEN], nonce_d[CHS_NONCE_LEN];
  nonce_fill(nonce_l, 5);
  nonce_fill(nonce_d, 6);
  struct chs d;
  assert_int_equal(chs_dialer_init(&d, key_a, 32, nonce_d, preamble, sizeof preamble), 0);
  struct chs l;
  chs_listener_init(&l, key_b, 32, nonce_l);
  size_t len;
  const uint8_t *challenge = chs_output(&l, &len);
  assert_int_equal(chs_feed(&d, challenge, len), CHS_SEND);
  uint8_t t[2 * CHS_NONCE_LEN + sizeof preamble];
  memcpy(t, nonce_l, CHS_NONCE_LEN);
  memcpy(t + CHS_NONCE_LEN, nonce_d, CHS_NONCE_LEN);
  memcpy(t + 2 * CHS_NONCE_LEN, preamble, sizeof preamble);
  uint8_t forged[CHS_MAC_LEN];
  chs_mac(key_b, 32, "cairn cluster listener v1", t, sizeof t, forged);
  assert_int_equal(chs_feed(&d, forged, sizeof forged), CAIRN_ECLUSTER_AUTH);
  assert_int_equal(d.state, CHS_FAILED);
}

static void test_chs_truncated_messages_wait_and_never_complete(void **state)
{
  struct chs l, d;
  uint8_t nonce[CHS_NONCE_LEN];
  nonce_fill(nonce, 1);
  chs_listener_init(&l, key_a, 32, nonce);
  assert_int_equal(chs_dialer_init(&d, key_a, 32, nonce, preamble, sizeof preamble), 0);
  size_t len;
  const uint8_t *challenge = chs_output(&l, &len);
  assert_int_equal(chs_feed(&d, challenge, len - 1), CHS_AGAIN);
  assert_int_equal(chs_want(&d), 1);
  assert_int_equal(chs_feed(&d, challenge + len - 1, 1), CHS_SEND);
  const uint8_t *answer = chs_output(&d, &len);
  /* every proper prefix of the answer asks for more, never more than the
   * rest of the message */
  for (size_t k = 0; k < len; k++) {
    struct chs l2;
    chs_listener_init(&l2, key_a, 32, nonce);
    if (k > 0) {
      assert_int_equal(feed_in_steps(&l2, answer, k, k), CHS_AGAIN);
    }
    assert_int_equal(chs_want(&l2), k < CHS_ANSWER_FIXED ? CHS_ANSWER_FIXED - k : len - k);
  }
  /* feeding more than wanted is refused */
  struct chs l3;
  chs_listener_init(&l3, key_a, 32, nonce);
  uint8_t big[CHS_ANSWER_MAX + 1] = {0};
  assert_int_equal(chs_feed(&l3, big, sizeof big), CAIRN_EBADLEN);
}

static void test_chs_garbage_is_refused_early(void **state)
{
  uint8_t nonce[CHS_NONCE_LEN];
  nonce_fill(nonce, 1);
  struct chs l;
  /* an HTTP request */
  chs_listener_init(&l, key_a, 32, nonce);
  assert_int_equal(chs_feed(&l, (const uint8_t *)"GET ", 4), CAIRN_EBADMAGIC);
  /* a plain transport preamble (a node without the secret) */
  chs_listener_init(&l, key_a, 32, nonce);
  assert_int_equal(chs_feed(&l, (const uint8_t *)"CRN1", 4), CAIRN_EBADMAGIC);
  /* another version */
  chs_listener_init(&l, key_a, 32, nonce);
  assert_int_equal(chs_feed(&l, (const uint8_t *)"CRNA\x02\x00", 6), CAIRN_EUNSUPPORTED);
  /* payload length 0 and too large */
  uint8_t a[CHS_ANSWER_FIXED] = "CRNA\x01\x00";
  chs_listener_init(&l, key_a, 32, nonce);
  assert_int_equal(chs_feed(&l, a, sizeof a), CAIRN_EBADLEN);
  le_put16(a + CHS_ANSWER_FIXED - 2, CHS_PAYLOAD_MAX + 1);
  chs_listener_init(&l, key_a, 32, nonce);
  assert_int_equal(chs_feed(&l, a, sizeof a), CAIRN_EBADLEN);
  /* a dialer fed garbage instead of a challenge */
  struct chs d;
  assert_int_equal(chs_dialer_init(&d, key_a, 32, nonce, preamble, sizeof preamble), 0);
  assert_int_equal(chs_feed(&d, (const uint8_t *)"HTTP/1.1 400", 12), CAIRN_EBADMAGIC);
  /* bad payload sizes at the dialer */
  assert_int_equal(chs_dialer_init(&d, key_a, 32, nonce, preamble, 0), CAIRN_EINVAL);
  static const uint8_t big[CHS_PAYLOAD_MAX + 1];
  assert_int_equal(chs_dialer_init(&d, key_a, 32, nonce, big, sizeof big), CAIRN_EINVAL);
}

static void test_chs_random_garbage_never_completes(void **state)
{
  unsigned seed = (unsigned)time(NULL);
  printf("seed %u\n", seed);
  srand(seed);
  uint8_t nonce[CHS_NONCE_LEN];
  nonce_fill(nonce, 3);
  for (int round = 0; round < 2000; round++) {
    struct chs l;
    chs_listener_init(&l, key_a, 32, nonce);
    uint8_t junk[CHS_ANSWER_MAX];
    for (size_t i = 0; i < sizeof junk; i++) {
      junk[i] = (uint8_t)rand();
    }
    if (round % 2 == 0) { /* a valid header, so the MAC check is what refuses */
      memcpy(junk, "CRNA\x01\x00", 6);
      le_put16(junk + CHS_ANSWER_FIXED - 2, (uint16_t)(1 + rand() % CHS_PAYLOAD_MAX));
    }
    int rv = CHS_AGAIN;
    size_t at = 0;
    while (rv == CHS_AGAIN && chs_want(&l) > 0) {
      size_t n = 1 + (size_t)rand() % 64;
      if (n > chs_want(&l)) {
        n = chs_want(&l);
      }
      rv = chs_feed(&l, junk + at, n);
      at += n;
    }
    assert_true(rv < 0);
    assert_int_equal(l.state, CHS_FAILED);
  }
}

static void test_chs_replayed_transcript_is_refused(void **state)
{
  /* Record a good session... */
  struct chs l1, d1;
  assert_int_equal(run(&l1, &d1, key_a, key_a, 1, 2, 1000), CHS_OK);
  size_t alen, plen;
  const uint8_t *old_answer = chs_output(&d1, &alen);
  const uint8_t *old_proof = chs_output(&l1, &plen);

  /* ...an eavesdropper replays the dialer's answer to a listener, which
   * has a fresh nonce: refused. */
  uint8_t nonce_l[CHS_NONCE_LEN];
  nonce_fill(nonce_l, 11);
  struct chs l2;
  chs_listener_init(&l2, key_a, 32, nonce_l);
  assert_int_equal(feed_in_steps(&l2, old_answer, alen, alen), CAIRN_ECLUSTER_AUTH);

  /* ...and the listener's old proof to a dialer, whose nonce is fresh: a
   * stranger replaying the old challenge and proof is refused too. */
  uint8_t nonce_d[CHS_NONCE_LEN];
  nonce_fill(nonce_d, 12);
  struct chs d2;
  assert_int_equal(chs_dialer_init(&d2, key_a, 32, nonce_d, preamble, sizeof preamble), 0);
  size_t clen;
  struct chs l_old;
  uint8_t nonce_old[CHS_NONCE_LEN];
  nonce_fill(nonce_old, 1);
  chs_listener_init(&l_old, key_a, 32, nonce_old);
  const uint8_t *old_challenge = chs_output(&l_old, &clen);
  assert_int_equal(chs_feed(&d2, old_challenge, clen), CHS_SEND);
  assert_int_equal(chs_feed(&d2, old_proof, plen), CAIRN_ECLUSTER_AUTH);

  /* A proof reflected back as an answer's MAC fails too (another label). */
  uint8_t reflected[CHS_ANSWER_MAX];
  memcpy(reflected, old_answer, alen);
  memcpy(reflected + alen - CHS_MAC_LEN, old_proof, CHS_MAC_LEN);
  struct chs l3;
  chs_listener_init(&l3, key_a, 32, nonce_old);
  assert_int_equal(feed_in_steps(&l3, reflected, alen, alen), CAIRN_ECLUSTER_AUTH);

  /* An answer whose preamble was altered (another group) fails. */
  memcpy(reflected, old_answer, alen);
  reflected[CHS_ANSWER_FIXED + 3] ^= 1;
  chs_listener_init(&l3, key_a, 32, nonce_old);
  assert_int_equal(feed_in_steps(&l3, reflected, alen, alen), CAIRN_ECLUSTER_AUTH);
  /* while the untouched one, with the same nonce, still verifies */
  chs_listener_init(&l3, key_a, 32, nonce_old);
  assert_int_equal(feed_in_steps(&l3, old_answer, alen, alen), CHS_OK);
}

static void test_chs_key_file_rules(void **state)
{
  char dir[] = "/tmp/chs_keyXXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/secret", dir);
  char errmsg[256];
  uint8_t *key;
  size_t len;
  bool warned;
  assert_true(chs_key_load(path, &key, &len, &warned, errmsg, sizeof errmsg) < 0);
  assert_non_null(strstr(errmsg, path));

  FILE *f = fopen(path, "w");
  fputs("short\n", f);
  fclose(f);
  assert_int_equal(chs_key_load(path, &key, &len, &warned, errmsg, sizeof errmsg),
                   CAIRN_EBADSECRET);

  f = fopen(path, "w");
  fputs("8f0c2b6e1d9a4c7e8f0c2b6e1d9a4c7e\r\n\n", f);
  fclose(f);
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(chs_key_load(path, &key, &len, &warned, errmsg, sizeof errmsg), 0);
  assert_int_equal(len, 32); /* line breaks stripped */
  assert_false(warned);
  assert_memory_equal(key, "8f0c2b6e1d9a4c7e8f0c2b6e1d9a4c7e", 32);
  chs_key_free(key, len);

  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(chs_key_load(path, &key, &len, &warned, errmsg, sizeof errmsg), 0);
  assert_true(warned);
  assert_non_null(strstr(errmsg, "chmod 600"));
  chs_key_free(key, len);
  unlink(path);
  rmdir(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chs_same_key_completes_both_ends_in_any_read_sizes),
      cmocka_unit_test(test_chs_documented_layout),
      cmocka_unit_test(test_chs_wrong_key_is_refused_by_the_listener),
      cmocka_unit_test(test_chs_listener_without_the_key_is_refused_by_the_dialer),
      cmocka_unit_test(test_chs_truncated_messages_wait_and_never_complete),
      cmocka_unit_test(test_chs_garbage_is_refused_early),
      cmocka_unit_test(test_chs_random_garbage_never_completes),
      cmocka_unit_test(test_chs_replayed_transcript_is_refused),
      cmocka_unit_test(test_chs_key_file_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
