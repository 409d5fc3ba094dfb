/* scram.h - SCRAM-SHA-256 (RFC 5802, RFC 7677) and SCRAM-SHA-512 (the
 * same exchange over SHA-512, as Kafka offers it) as pure state machines for
 * both ends: messages in, messages out, no I/O; nonces and salts are
 * passed in (the callers draw them from OpenSSL's RAND_bytes).
 *
 *   client                                       server
 *   scram_client_start -> client-first ------->  scram_server_first:
 *                                                  user name, then the
 *                                                  caller's credential
 *   scram_client_final(server-first) <-------    server-first (r, s, i)
 *   client-final (proof) ---------------------->  scram_server_final:
 *   scram_client_verify(server-final) <--------   "v=..." or "e=..."
 *
 * The server holds only a struct scram_cred per user (salt, iterations,
 * StoredKey, ServerKey): never the password, and nothing that logs in by
 * itself (a stolen StoredKey does not make a ClientProof). Every exchange
 * uses a fresh server nonce, so a recorded client-final replayed later
 * fails. An unknown user gets a made-up challenge and fails at the proof,
 * like a wrong password (no user enumeration from the answers).
 *
 * Limits: a message is at most SCRAM_MSG_MAX bytes; user names are
 * 1..SCRAM_USER_MAX of [A-Za-z0-9._@-] (so no SCRAM escaping is needed);
 * channel binding is not supported (gs2 header "n,," only).
 *
 * Context: any thread; one struct per exchange, used by one thread. */
#ifndef CAIRN_SCRAM_H
#define CAIRN_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCRAM_MSG_MAX 1024
#define SCRAM_USER_MAX 64
#define SCRAM_NONCE_RAW 18  /* random bytes of each side's nonce */
#define SCRAM_NONCE_TEXT 25 /* their base64 text (24 chars) and its NUL */
#define SCRAM_SALT_MAX 64
#define SCRAM_KEY_LEN 32 /* SHA-256's output: a SCRAM-SHA-256 key */
#define SCRAM_KEY_MAX 64 /* SHA-512's */
#define SCRAM_ITERATIONS_MIN 4096
#define SCRAM_ITERATIONS_DEFAULT 8192
#define SCRAM_ITERATIONS_MAX 1000000

/* The hash of an exchange and of the credential it is checked against:
 * H, HMAC and PBKDF2's PRF are all of it. */
enum scram_mech { SCRAM_SHA_256 = 0, SCRAM_SHA_512 = 1 };

/* The length of m's keys, proofs and signatures: 32 or 64. */
size_t scram_key_len(enum scram_mech m);

/* m's SASL name: "SCRAM-SHA-256" or "SCRAM-SHA-512". */
const char *scram_mech_name(enum scram_mech m);

/* The mechanism of a SASL name: true with *out set, false for any other
 * name (NULL included). */
bool scram_mech_from_name(const char *name, enum scram_mech *out);

/* What the server stores for a user, per mechanism. */
struct scram_cred {
  enum scram_mech mech;
  uint8_t salt[SCRAM_SALT_MAX];
  size_t salt_len; /* 1..SCRAM_SALT_MAX */
  uint32_t iterations;
  /* The first scram_key_len(mech) bytes of each: */
  uint8_t stored_key[SCRAM_KEY_MAX]; /* H(HMAC(SaltedPassword, "Client Key")) */
  uint8_t server_key[SCRAM_KEY_MAX]; /* HMAC(SaltedPassword, "Server Key") */
};

/* The nonce text of SCRAM_NONCE_RAW random bytes (base64). */
void scram_nonce(const uint8_t *raw, char out[SCRAM_NONCE_TEXT]);

/* True for a user name this module accepts. */
bool scram_user_ok(const char *user);

/* Derives the stored m credential of password with salt and iterations
 * (SCRAM_ITERATIONS_MIN..MAX). Returns 0, or CAIRN_EINVAL for a bad salt
 * length, iteration count or mechanism. scram_cred_make is the
 * SCRAM-SHA-256 one. */
__attribute__((warn_unused_result)) int
scram_cred_make_mech(enum scram_mech m, const char *password, const uint8_t *salt, size_t salt_len,
                     uint32_t iterations, struct scram_cred *out);
__attribute__((warn_unused_result)) int scram_cred_make(const char *password, const uint8_t *salt,
                                                        size_t salt_len, uint32_t iterations,
                                                        struct scram_cred *out);

/* Is password the one cred was made from? (SASL PLAIN against the stored
 * SCRAM credential: the salted password's StoredKey, compared in constant
 * time.) Costs cred->iterations rounds of PBKDF2: keep it off the loop
 * thread. */
bool scram_password_matches(const struct scram_cred *cred, const char *password);

/* ---- server ---- */

enum scram_server_state { SCRAM_S_START, SCRAM_S_CHALLENGED, SCRAM_S_DONE, SCRAM_S_FAILED };

struct scram_server {
  enum scram_server_state state;
  enum scram_mech mech;
  char user[SCRAM_USER_MAX + 1];
  char client_first_bare[SCRAM_MSG_MAX + 1];
  char server_first[SCRAM_MSG_MAX + 1];
  char nonce[2 * SCRAM_MSG_MAX + 1]; /* client nonce + server nonce */
  size_t cnonce_len;                  /* the client nonce's part of it */
  struct scram_cred cred;
  bool known; /* the user exists (else cred is made up and the proof fails) */
};

/* Parses client-first (len bytes, not NUL-terminated) of an exchange of
 * mech into s and returns the user name in s->user. Returns 0, or
 * CAIRN_EBADREQUEST (malformed, oversized, channel binding asked, a bad
 * user name). */
__attribute__((warn_unused_result)) int
scram_server_parse_first(struct scram_server *s, enum scram_mech mech, const char *msg, size_t len);

/* Makes server-first into out (cap bytes, NUL-terminated): cred is the
 * user's stored credential of the exchange's mechanism (one of another
 * counts as none), or NULL for an unknown user (a made-up one
 * from fake_salt, 16 bytes, is used and the exchange will fail); snonce
 * is fresh (scram_nonce() of random bytes; printable, no ','). Returns its
 * length, or CAIRN_EINVAL in the wrong state. */
__attribute__((warn_unused_result)) int
scram_server_challenge(struct scram_server *s, const struct scram_cred *cred, const char *snonce,
                       const uint8_t *fake_salt, char *out, size_t cap);

/* Checks client-final. Its nonce must be this exchange's (client nonce +
 * server nonce), or the client nonce followed by it: librdkafka (2.0.2)
 * sends the latter, and Apache Kafka accepts it (the fresh server nonce at
 * the end is what defeats a replay; the AuthMessage covers r as sent).
 * Returns 0 with server-final ("v=...") in out, the
 * user authenticated; CAIRN_EAUTH with "e=invalid-proof" (or
 * "e=unknown-user" never: unknown users look like wrong passwords) in
 * out; or CAIRN_EBADREQUEST for a malformed message or a nonce that is
 * not this exchange's (a replay). Either failure is final. */
__attribute__((warn_unused_result)) int scram_server_final(struct scram_server *s, const char *msg,
                                                           size_t len, char *out, size_t cap);

/* ---- client ---- */

enum scram_client_state { SCRAM_C_START, SCRAM_C_FIRST_SENT, SCRAM_C_FINAL_SENT, SCRAM_C_DONE };

struct scram_client {
  enum scram_client_state state;
  enum scram_mech mech;
  char password[256];
  char client_first_bare[SCRAM_MSG_MAX + 1];
  char cnonce[64];
  uint8_t server_signature[SCRAM_KEY_MAX];
};

/* Starts an exchange: client-first into out. cnonce: fresh, printable,
 * no ',' (scram_nonce() of random bytes). Returns its length, or CAIRN_EINVAL (bad user name, a
 * password longer than 255 bytes). The password is kept until the struct
 * is wiped (scram_client_wipe). */
__attribute__((warn_unused_result)) int scram_client_start(struct scram_client *c, const char *user,
                                                           const char *password, const char *cnonce,
                                                           char *out, size_t cap);
/* The same for an exchange of mech (scram_client_start: SCRAM-SHA-256). */
__attribute__((warn_unused_result)) int
scram_client_start_mech(struct scram_client *c, enum scram_mech mech, const char *user,
                        const char *password, const char *cnonce, char *out, size_t cap);

/* Answers server-first with client-final into out. Returns its length, or
 * CAIRN_EPROTOCOL (malformed, a nonce that does not extend ours, an
 * iteration count out of range). */
__attribute__((warn_unused_result)) int scram_client_final(struct scram_client *c, const char *msg,
                                                           size_t len, char *out, size_t cap);

/* Checks server-final: 0 when the server proved it knows the credential,
 * CAIRN_EAUTH when it refused us ("e=..."), CAIRN_EPROTOCOL otherwise. */
__attribute__((warn_unused_result)) int scram_client_verify(struct scram_client *c, const char *msg,
                                                            size_t len);

/* Clears the password and keys from c. */
void scram_client_wipe(struct scram_client *c);

#endif
