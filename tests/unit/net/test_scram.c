/* test_scram.c - SCRAM-SHA-256 and -512 (scram.h): RFC 7677's example
 * exchange byte for byte (and the same exchange over SHA-512 against
 * values computed with Python's hashlib/hmac), both ends against each other, a wrong password, an
 * unknown user, a replayed client-final, a server that does not hold the credential, and malformed
 * or oversized messages. */
#include "common/err.h"
#include "net/scram.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* RFC 7677, section 3. */
#define RFC_CLIENT_FIRST "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
#define RFC_SERVER_FIRST                                                                           \
  "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
#define RFC_CLIENT_FINAL                                                                           \
  "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="                                 \
  "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define RFC_SERVER_FINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
static const uint8_t rfc_salt[16] = {0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
                                     0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81};
static const uint8_t fake_salt[16] = "0123456789abcdef";

static void test_scram_matches_rfc7677_example(void **state)
{
  struct scram_cred cred;
  assert_int_equal(scram_cred_make("pencil", rfc_salt, sizeof rfc_salt, 4096, &cred), 0);

  struct scram_client c;
  char out[SCRAM_MSG_MAX];
  int n = scram_client_start(&c, "user", "pencil", "rOprNGfwEbeRWgbNEkqO", out, sizeof out);
  assert_int_equal(n, strlen(RFC_CLIENT_FIRST));
  assert_string_equal(out, RFC_CLIENT_FIRST);

  struct scram_server s;
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, out, (size_t)n), 0);
  assert_string_equal(s.user, "user");
  char sf[SCRAM_MSG_MAX];
  n = scram_server_challenge(&s, &cred, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", fake_salt, sf, sizeof sf);
  assert_string_equal(sf, RFC_SERVER_FIRST);

  char cf[SCRAM_MSG_MAX];
  n = scram_client_final(&c, sf, (size_t)n, cf, sizeof cf);
  assert_true(n > 0);
  assert_string_equal(cf, RFC_CLIENT_FINAL);

  char fin[SCRAM_MSG_MAX];
  assert_int_equal(scram_server_final(&s, cf, (size_t)n, fin, sizeof fin), 0);
  assert_string_equal(fin, RFC_SERVER_FINAL);
  assert_int_equal(s.state, SCRAM_S_DONE);
  assert_int_equal(scram_client_verify(&c, fin, strlen(fin)), 0);
  scram_client_wipe(&c);
}

/* One whole exchange; returns the server's verdict, fin gets server-final. */
static int exchange(const struct scram_cred *cred, const char *user, const char *password,
                    const char *snonce, char *fin, struct scram_client *c)
{
  char cfirst[SCRAM_MSG_MAX], sf[SCRAM_MSG_MAX], cf[SCRAM_MSG_MAX];
  int n = scram_client_start(c, user, password, "clientnonce", cfirst, sizeof cfirst);
  assert_true(n > 0);
  struct scram_server s;
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, cfirst, (size_t)n), 0);
  n = scram_server_challenge(&s, cred, snonce, fake_salt, sf, sizeof sf);
  assert_true(n > 0);
  n = scram_client_final(c, sf, (size_t)n, cf, sizeof cf);
  assert_true(n > 0);
  return scram_server_final(&s, cf, (size_t)n, fin, SCRAM_MSG_MAX);
}

static void test_scram_wrong_password_and_unknown_user_fail_alike(void **state)
{
  struct scram_cred cred;
  assert_int_equal(scram_cred_make("right", fake_salt, 16, 4096, &cred), 0);
  struct scram_client c;
  char fin[SCRAM_MSG_MAX];
  assert_int_equal(exchange(&cred, "alice", "right", "s1", fin, &c), 0);
  assert_int_equal(scram_client_verify(&c, fin, strlen(fin)), 0);

  assert_int_equal(exchange(&cred, "alice", "wrong", "s2", fin, &c), CAIRN_EAUTH);
  assert_string_equal(fin, "e=invalid-proof");
  assert_int_equal(scram_client_verify(&c, fin, strlen(fin)), CAIRN_EAUTH);

  /* Unknown user: a challenge like any other, the same refusal. */
  assert_int_equal(exchange(NULL, "nobody", "right", "s3", fin, &c), CAIRN_EAUTH);
  assert_string_equal(fin, "e=invalid-proof");
}

static void test_scram_replayed_client_final_is_refused(void **state)
{
  struct scram_cred cred;
  assert_int_equal(scram_cred_make("pw", fake_salt, 16, 4096, &cred), 0);
  /* A good exchange, recorded. */
  struct scram_client c;
  char cfirst[SCRAM_MSG_MAX], sf[SCRAM_MSG_MAX], cf[SCRAM_MSG_MAX], fin[SCRAM_MSG_MAX];
  int n = scram_client_start(&c, "bob", "pw", "cn", cfirst, sizeof cfirst);
  struct scram_server s;
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, cfirst, (size_t)n), 0);
  n = scram_server_challenge(&s, &cred, "first-server-nonce", fake_salt, sf, sizeof sf);
  int cfn = scram_client_final(&c, sf, (size_t)n, cf, sizeof cf);
  assert_int_equal(scram_server_final(&s, cf, (size_t)cfn, fin, sizeof fin), 0);

  /* The attacker replays client-first, gets a fresh server nonce, then
   * replays the old client-final: its nonce is not this exchange's. */
  struct scram_server s2;
  assert_int_equal(scram_server_parse_first(&s2, SCRAM_SHA_256, cfirst, strlen(cfirst)), 0);
  assert_true(scram_server_challenge(&s2, &cred, "second-server-nonce", fake_salt, sf, sizeof sf) >
              0);
  assert_int_equal(scram_server_final(&s2, cf, (size_t)cfn, fin, sizeof fin), CAIRN_EBADREQUEST);
  assert_int_equal(s2.state, SCRAM_S_FAILED);
  /* The same server state never accepts a second final. */
  assert_int_equal(scram_server_final(&s, cf, (size_t)cfn, fin, sizeof fin), CAIRN_EBADREQUEST);
}

static void test_scram_client_refuses_a_server_without_the_credential(void **state)
{
  struct scram_cred real, other;
  assert_int_equal(scram_cred_make("pw", fake_salt, 16, 4096, &real), 0);
  assert_int_equal(scram_cred_make("not-pw", fake_salt, 16, 4096, &other), 0);
  struct scram_client c;
  char fin[SCRAM_MSG_MAX];
  assert_int_equal(exchange(&real, "carol", "pw", "n1", fin, &c), 0);
  /* a forged server-final */
  const char *forged = "v=6rriTRBi23WpRR/wtup+mMhK1hQWJcSp9M+KZj3qDhM=";
  assert_int_equal(scram_client_verify(&c, forged, strlen(forged)), CAIRN_EPROTOCOL);
  (void)other;
}

/* SASL PLAIN's check against the stored credential: the RFC 7677 user's
 * password matches, others (a prefix, a longer one, empty) do not. */
static void test_scram_password_matches_the_credential(void **state)
{
  (void)state;
  struct scram_cred cred;
  assert_int_equal(scram_cred_make("pencil", rfc_salt, sizeof rfc_salt, 4096, &cred), 0);
  assert_true(scram_password_matches(&cred, "pencil"));
  assert_false(scram_password_matches(&cred, "pencil2"));
  assert_false(scram_password_matches(&cred, "pencI"));
  assert_false(scram_password_matches(&cred, ""));
  struct scram_cred bad = cred;
  bad.iterations = 1; /* out of range: never a match */
  assert_false(scram_password_matches(&bad, "pencil"));
}

static void test_scram_malformed_and_oversized_messages(void **state)
{
  struct scram_server s;
  static const char *const bad_first[] = {
      "",                           /* empty */
      "y,,n=user,r=abc",            /* channel binding */
      "p=tls-unique,,n=user,r=abc", /* channel binding */
      "n,a=admin,n=user,r=abc",     /* authzid */
      "n,,r=abc,n=user",            /* n= not first */
      "n,,n=,r=abc",                /* empty user */
      "n,,n=us,er,r=abc",           /* bad name */
      "n,,n=user",                  /* no nonce */
      "n,,n=user,r=",               /* empty nonce */
      "n,,n=us=2Cer,r=abc",         /* escaping is not accepted */
  };
  for (size_t i = 0; i < sizeof bad_first / sizeof bad_first[0]; i++) {
    assert_int_equal(
        scram_server_parse_first(&s, SCRAM_SHA_256, bad_first[i], strlen(bad_first[i])),
        CAIRN_EBADREQUEST);
  }
  char big[SCRAM_MSG_MAX + 10];
  memset(big, 'a', sizeof big);
  memcpy(big, "n,,n=user,r=", 12);
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, big, sizeof big), CAIRN_EBADREQUEST);

  /* A final in the wrong state, and malformed finals. */
  char fin[SCRAM_MSG_MAX];
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, "n,,n=user,r=abc", 15), 0);
  assert_int_equal(scram_server_final(&s, "c=biws,r=abcX,p=AAAA", 20, fin, sizeof fin),
                   CAIRN_EBADREQUEST);
  struct scram_cred cred;
  assert_int_equal(scram_cred_make("pw", fake_salt, 16, 4096, &cred), 0);
  static const char *const bad_final[] = {
      "c=biws,r=abcX",        /* no proof */
      "c=eSws,r=abcX,p=AAAA", /* channel binding data */
      "c=biws,r=abcY,p=AAAA", /* another nonce */
      "c=biws,r=abcX,p=!!!!", /* not base64 */
      "c=biws,r=abcX,p=AAAA", /* a proof of the wrong size */
  };
  for (size_t i = 0; i < sizeof bad_final / sizeof bad_final[0]; i++) {
    assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, "n,,n=user,r=abc", 15), 0);
    char sf[SCRAM_MSG_MAX];
    assert_true(scram_server_challenge(&s, &cred, "X", fake_salt, sf, sizeof sf) > 0);
    assert_int_equal(scram_server_final(&s, bad_final[i], strlen(bad_final[i]), fin, sizeof fin),
                     CAIRN_EBADREQUEST);
  }

  /* librdkafka's nonce, the client nonce followed by the exchange's, gets
   * as far as the proof; any other prefix does not. */
  static const char *const proof32 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
  for (int doubled = 0; doubled < 2; doubled++) {
    assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_256, "n,,n=user,r=abc", 15), 0);
    char sf[SCRAM_MSG_MAX];
    assert_true(scram_server_challenge(&s, &cred, "X", fake_salt, sf, sizeof sf) > 0);
    char fm[128];
    snprintf(fm, sizeof fm, "c=biws,r=%sabcX,p=%s", doubled ? "abc" : "abd", proof32);
    assert_int_equal(scram_server_final(&s, fm, strlen(fm), fin, sizeof fin),
                     doubled ? CAIRN_EAUTH : CAIRN_EBADREQUEST);
  }

  /* The client refuses a server-first that does not extend its nonce or
   * asks too few iterations. */
  struct scram_client c;
  char out[SCRAM_MSG_MAX];
  assert_true(scram_client_start(&c, "user", "pw", "abc", out, sizeof out) > 0);
  const char *sf1 = "r=zzzX,s=MDEyMzQ1Njc4OWFiY2RlZg==,i=4096";
  assert_int_equal(scram_client_final(&c, sf1, strlen(sf1), out, sizeof out), CAIRN_EPROTOCOL);
  const char *sf2 = "r=abcX,s=MDEyMzQ1Njc4OWFiY2RlZg==,i=1";
  assert_int_equal(scram_client_final(&c, sf2, strlen(sf2), out, sizeof out), CAIRN_EPROTOCOL);
  /* and bad inputs to start */
  assert_int_equal(scram_client_start(&c, "bad,user", "pw", "abc", out, sizeof out), CAIRN_EINVAL);
  assert_int_equal(scram_client_start(&c, "user", "pw", "a,b", out, sizeof out), CAIRN_EINVAL);
  /* credentials: iteration and salt bounds */
  assert_int_equal(scram_cred_make("pw", fake_salt, 16, 10, &cred), CAIRN_EINVAL);
  assert_int_equal(scram_cred_make("pw", fake_salt, 0, 4096, &cred), CAIRN_EINVAL);
}

/* RFC 7677's exchange over SHA-512: the client-final and server-final
 * computed independently (Python's hashlib.pbkdf2_hmac, hmac, sha512). */
#define SHA512_CLIENT_FINAL                                                                        \
  "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="                                 \
  "gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ=="
#define SHA512_SERVER_FINAL                                                                        \
  "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw=="

static void test_scram_sha512_matches_an_independent_computation(void **state)
{
  (void)state;
  struct scram_cred cred;
  assert_int_equal(
      scram_cred_make_mech(SCRAM_SHA_512, "pencil", rfc_salt, sizeof rfc_salt, 4096, &cred), 0);
  assert_int_equal(cred.mech, SCRAM_SHA_512);
  assert_int_equal(scram_key_len(SCRAM_SHA_512), 64);
  struct scram_client c;
  char out[SCRAM_MSG_MAX];
  int n = scram_client_start_mech(&c, SCRAM_SHA_512, "user", "pencil", "rOprNGfwEbeRWgbNEkqO", out,
                                  sizeof out);
  assert_string_equal(out, RFC_CLIENT_FIRST); /* the first message names no hash */
  struct scram_server s;
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_512, out, (size_t)n), 0);
  char sf[SCRAM_MSG_MAX];
  n = scram_server_challenge(&s, &cred, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", fake_salt, sf, sizeof sf);
  assert_string_equal(sf, RFC_SERVER_FIRST);
  char cf[SCRAM_MSG_MAX];
  n = scram_client_final(&c, sf, (size_t)n, cf, sizeof cf);
  assert_string_equal(cf, SHA512_CLIENT_FINAL);
  char fin[SCRAM_MSG_MAX];
  assert_int_equal(scram_server_final(&s, cf, (size_t)n, fin, sizeof fin), 0);
  assert_string_equal(fin, SHA512_SERVER_FINAL);
  assert_int_equal(scram_client_verify(&c, fin, strlen(fin)), 0);
  scram_client_wipe(&c);
  assert_true(scram_password_matches(&cred, "pencil"));
  assert_false(scram_password_matches(&cred, "pencils"));
}

/* A SHA-512 exchange against a SHA-256 credential (a user without a
 * SCRAM-SHA-512 one) fails as an unknown user does, and a SHA-256 proof
 * sent into a SHA-512 exchange is malformed (its length). */
static void test_scram_mechanisms_do_not_mix(void **state)
{
  (void)state;
  struct scram_cred c256;
  assert_int_equal(scram_cred_make("pencil", rfc_salt, sizeof rfc_salt, 4096, &c256), 0);
  struct scram_client c;
  char first[SCRAM_MSG_MAX], sf[SCRAM_MSG_MAX], cf[SCRAM_MSG_MAX], fin[SCRAM_MSG_MAX];
  int n = scram_client_start_mech(&c, SCRAM_SHA_512, "user", "pencil", "cn", first, sizeof first);
  struct scram_server s;
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_512, first, (size_t)n), 0);
  n = scram_server_challenge(&s, &c256, "sn", fake_salt, sf, sizeof sf);
  assert_true(n > 0);
  assert_false(s.known);
  assert_non_null(strstr(sf, ",s=MDEyMzQ1Njc4OWFiY2RlZg==,")); /* the made-up salt */
  n = scram_client_final(&c, sf, (size_t)n, cf, sizeof cf);
  assert_int_equal(scram_server_final(&s, cf, (size_t)n, fin, sizeof fin), CAIRN_EAUTH);
  assert_string_equal(fin, "e=invalid-proof");
  /* A SHA-256 client into a SHA-512 server exchange. */
  n = scram_client_start(&c, "user", "pencil", "cn", first, sizeof first);
  assert_int_equal(scram_server_parse_first(&s, SCRAM_SHA_512, first, (size_t)n), 0);
  struct scram_cred c512;
  assert_int_equal(
      scram_cred_make_mech(SCRAM_SHA_512, "pencil", rfc_salt, sizeof rfc_salt, 4096, &c512), 0);
  n = scram_server_challenge(&s, &c512, "sn", fake_salt, sf, sizeof sf);
  n = scram_client_final(&c, sf, (size_t)n, cf, sizeof cf);
  assert_int_equal(scram_server_final(&s, cf, (size_t)n, fin, sizeof fin), CAIRN_EBADREQUEST);
  scram_client_wipe(&c);
  enum scram_mech m;
  assert_true(scram_mech_from_name("SCRAM-SHA-512", &m) && m == SCRAM_SHA_512);
  assert_true(scram_mech_from_name("SCRAM-SHA-256", &m) && m == SCRAM_SHA_256);
  assert_false(scram_mech_from_name("SCRAM-SHA-1", &m));
  assert_false(scram_mech_from_name(NULL, &m));
  assert_string_equal(scram_mech_name(SCRAM_SHA_512), "SCRAM-SHA-512");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scram_matches_rfc7677_example),
      cmocka_unit_test(test_scram_sha512_matches_an_independent_computation),
      cmocka_unit_test(test_scram_mechanisms_do_not_mix),
      cmocka_unit_test(test_scram_wrong_password_and_unknown_user_fail_alike),
      cmocka_unit_test(test_scram_replayed_client_final_is_refused),
      cmocka_unit_test(test_scram_client_refuses_a_server_without_the_credential),
      cmocka_unit_test(test_scram_password_matches_the_credential),
      cmocka_unit_test(test_scram_malformed_and_oversized_messages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
