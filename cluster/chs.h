/* chs.h - the cluster port's authenticated handshake ("cluster handshake"),
 * a pure state machine: bytes in, bytes out, no I/O, no clock, no
 * randomness of its own (the glue in transport.c passes nonces in). Both
 * ends hold the same cluster key (--cluster-secret-file); each proves it to
 * the other before any Raft or fetch byte flows.
 *
 *   listener                                   dialer
 *   chs_listener_init(nonce_l) -> challenge --->
 *                                              chs_feed(challenge)
 *                                <--- answer   (nonce_d, payload, mac_d)
 *   chs_feed(answer): checks mac_d
 *   proof --->                                 chs_feed(proof): checks mac_l
 *   CHS_DONE: payload is trusted               CHS_DONE
 *
 *   mac_d = HMAC-SHA256(key, "cairn cluster dialer v1"   || nonce_l || nonce_d || payload)
 *   mac_l = HMAC-SHA256(key, "cairn cluster listener v1" || nonce_l || nonce_d || payload)
 *
 * The payload is the transport preamble (group, stream kind, sender), so a
 * valid answer cannot be moved to another group or sender. Fresh nonces on
 * both sides make an old transcript useless: a replayed answer fails
 * against a new nonce_l, a replayed proof against a new nonce_d. The two
 * labels keep a listener's proof from being reflected as a dialer's answer.
 *
 * Messages, little-endian, version CHS_VERSION = 1:
 *   challenge (CHS_CHALLENGE_LEN = 38 bytes)
 *      0  u32 magic "CRNH" (CHS_MAGIC_CHALLENGE)
 *      4  u16 version
 *      6  32  nonce_l
 *   answer (40 + n + 32 bytes)
 *      0  u32 magic "CRNA" (CHS_MAGIC_ANSWER)
 *      4  u16 version
 *      6  32  nonce_d
 *     38  u16 payload length n (1..CHS_PAYLOAD_MAX)
 *     40  n   payload
 *   40+n  32  mac_d
 *   proof (CHS_MAC_LEN = 32 bytes): mac_l
 *
 * Memory is fixed (struct chs holds every buffer); chs_want() says how many
 * bytes the current message still needs, so the glue never reads past the
 * handshake into the stream's next owner's bytes.
 *
 * Context: any thread; a struct chs is used by one thread at a time. */
#ifndef CAIRN_CHS_H
#define CAIRN_CHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHS_VERSION 1
#define CHS_MAGIC_CHALLENGE 0x484e5243u /* "CRNH" */
#define CHS_MAGIC_ANSWER 0x414e5243u    /* "CRNA" */
#define CHS_NONCE_LEN 32
#define CHS_MAC_LEN 32
#define CHS_PAYLOAD_MAX 512
#define CHS_CHALLENGE_LEN (6 + CHS_NONCE_LEN)
#define CHS_ANSWER_FIXED (6 + CHS_NONCE_LEN + 2)
#define CHS_ANSWER_MAX (CHS_ANSWER_FIXED + CHS_PAYLOAD_MAX + CHS_MAC_LEN)
#define CHS_KEY_MIN 16   /* bytes of a cluster key */
#define CHS_KEY_MAX 4096 /* a secret file larger than this is a mistake */

enum chs_role { CHS_LISTENER, CHS_DIALER };

#define CHS_STATE_TABLE(X)                                                                         \
  X(CHS_WAIT_CHALLENGE) /* dialer: the listener's nonce is due */                                  \
  X(CHS_WAIT_ANSWER)    /* listener: the dialer's nonce, payload and MAC are due */                \
  X(CHS_WAIT_PROOF)     /* dialer: the listener's MAC is due */                                    \
  X(CHS_DONE)           /* both proved the key; payload is trusted */                              \
  X(CHS_FAILED)         /* sticky: the connection must be closed */

enum chs_state {
#define CHS_STATE_ENUM(name) name,
  CHS_STATE_TABLE(CHS_STATE_ENUM)
#undef CHS_STATE_ENUM
};

struct chs {
  enum chs_role role;
  enum chs_state state;
  const uint8_t *key; /* borrowed: valid for the whole handshake */
  size_t key_len;
  uint8_t nonce_l[CHS_NONCE_LEN];
  uint8_t nonce_d[CHS_NONCE_LEN];
  uint8_t payload[CHS_PAYLOAD_MAX];
  size_t payload_len;
  /* what this end sends, each message in its own buffer, so a message
   * still being written is never overwritten by the next one */
  uint8_t challenge[CHS_CHALLENGE_LEN];
  uint8_t answer[CHS_ANSWER_MAX];
  size_t answer_len;
  uint8_t proof[CHS_MAC_LEN];
  /* the message being received */
  uint8_t in[CHS_ANSWER_MAX];
  size_t got;
};

/* Results of chs_feed() besides the negative codes. */
#define CHS_AGAIN 0 /* more bytes needed */
#define CHS_SEND 1  /* a message is ready: send chs_output(), then feed on */
#define CHS_OK 2    /* the handshake is complete (for the listener: send the proof first) */

/* Starts the listener's side: the challenge carrying nonce_l (fresh random
 * bytes for every connection) is ready in chs_output(). key borrowed. */
void chs_listener_init(struct chs *h, const uint8_t *key, size_t key_len,
                       const uint8_t nonce_l[CHS_NONCE_LEN]);

/* Starts the dialer's side, which waits for the challenge; payload (the
 * preamble, 1..CHS_PAYLOAD_MAX bytes) is copied. Returns 0 or CAIRN_EINVAL
 * for a payload of a bad size. */
__attribute__((warn_unused_result)) int chs_dialer_init(struct chs *h, const uint8_t *key,
                                                        size_t key_len,
                                                        const uint8_t nonce_d[CHS_NONCE_LEN],
                                                        const uint8_t *payload, size_t len);

/* Bytes the message being received still needs (a read may take at most
 * this many); 0 once nothing more is due. */
size_t chs_want(const struct chs *h);

/* Feeds data[0..len) received from the peer; len must not pass chs_want().
 * Returns CHS_AGAIN, CHS_SEND (dialer: the answer is ready), CHS_OK
 * (listener: the proof is ready in chs_output() and the payload is
 * trusted; dialer: the listener proved the key), or a negative code, after
 * which the state is CHS_FAILED for good:
 *   CAIRN_EBADMAGIC     not a handshake message (answer magic TRANSPORT's
 *                       "CRN1": a peer without the cluster secret)
 *   CAIRN_EUNSUPPORTED  another handshake version
 *   CAIRN_EBADLEN       a payload length out of range, or len > chs_want()
 *   CAIRN_ECLUSTER_AUTH a MAC that does not verify (another key, or a
 *                       replayed or altered transcript)
 *   CAIRN_EINVAL        fed in a state that expects nothing */
__attribute__((warn_unused_result)) int chs_feed(struct chs *h, const uint8_t *data, size_t len);

/* The message this end must send now (the challenge after
 * chs_listener_init, the answer after CHS_SEND, the proof after the
 * listener's CHS_OK). Returns borrowed bytes, valid until h is reused, and
 * their length in *len. */
const uint8_t *chs_output(const struct chs *h, size_t *len);

/* The payload, trusted once the state is CHS_DONE. Borrowed from h. */
const uint8_t *chs_payload(const struct chs *h, size_t *len);

/* HMAC-SHA256(key, label || data) into mac, for other proofs made with the
 * cluster key (node registration). */
void chs_mac(const uint8_t *key, size_t key_len, const char *label, const uint8_t *data, size_t len,
             uint8_t mac[CHS_MAC_LEN]);

/* True when a and b (CHS_MAC_LEN bytes each) are equal, in constant time. */
bool chs_mac_equal(const uint8_t *a, const uint8_t *b);

/* Fills buf with len bytes from OpenSSL's CSPRNG. Returns 0 or
 * CAIRN_ECLUSTER_AUTH when the generator fails. */
__attribute__((warn_unused_result)) int chs_random(uint8_t *buf, size_t len);

/* Reads the cluster key from path: the file's bytes with trailing line
 * breaks and blanks stripped, CHS_KEY_MIN..CHS_KEY_MAX bytes. Returns 0
 * with *key (owned: free with chs_key_free) and *key_len, or a negative code
 * (negative errno, CAIRN_EBADSECRET) with errmsg filled. A file others can
 * read is accepted with a warning in errmsg and *warned set. */
__attribute__((warn_unused_result)) int chs_key_load(const char *path, uint8_t **key,
                                                     size_t *key_len, bool *warned, char *errmsg,
                                                     size_t errlen);

/* Wipes and frees a key from chs_key_load(); NULL is fine. */
void chs_key_free(uint8_t *key, size_t key_len);

/* The state's name, for logs. Static string. */
const char *chs_state_name(enum chs_state s);

#endif
