/* tproxy.h - a TCP proxy for tests, in front of one node's client port,
 * that can lose answers and requests: it relays every connection both
 * ways and, when armed, drops the next N frames the node sends whose
 * Envelope carries a given body (e.g. a ProduceResponse), so the client
 * sees no answer to a request the node did carry out, or the next N the
 * client sends (a ProduceRequest the node never sees, while the client's
 * later requests get through). The connection stays open (the client's
 * request timeout is what ends the wait), as when a frame is lost to a
 * network that keeps the session.
 *
 * Runs one thread of its own (poll over every socket); at most
 * TP_MAX_CONNS connections at once, each relayed frame by frame both
 * ways. Context: tp_* may be
 * called from any thread. */
#ifndef CAIRN_TU_TPROXY_H
#define CAIRN_TU_TPROXY_H

#include <stdint.h>

#define TP_MAX_CONNS 16

struct tp;

/* Listens on 127.0.0.1 (an ephemeral port: tp_port) and relays to
 * upstream ("127.0.0.1:PORT"). Returns NULL on failure. Owned: tp_stop. */
struct tp *tp_start(const char *upstream);

/* The port it listens on. */
int tp_port(const struct tp *p);

/* Drops the next count node-to-client frames whose Envelope body case is
 * body_case (Cairn__Client__Envelope__BodyCase). */
void tp_drop_next(struct tp *p, int body_case, int count);

/* How many frames were dropped so far. */
int tp_dropped(struct tp *p);

/* Drops the next count client-to-node frames whose Envelope body case is
 * body_case. */
void tp_drop_next_request(struct tp *p, int body_case, int count);

/* How many of those were dropped so far. */
int tp_requests_dropped(struct tp *p);

/* Closes every connection, stops the thread and frees p. NULL is fine. */
void tp_stop(struct tp *p);

#endif
