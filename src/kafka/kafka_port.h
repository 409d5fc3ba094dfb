/* kafka_port.h - the node's Kafka protocol port (docs/kafka.md): a second
 * listener beside the client port, sharing its limits and its node-wide
 * request budget, whose requests go through one table
 * (kafka_dispatch.c) to one kafka_handle_<api>.c each.
 *
 * Context: loop thread only. */
#ifndef CAIRN_KAFKA_PORT_H
#define CAIRN_KAFKA_PORT_H

#include <stdbool.h>

struct node;
struct listener;

/* Binds --kafka-listen when it is on (n->kafka_on set then). A port the
 * operator asked for that cannot be bound fails the start (negative code,
 * n->errmsg set); the default one (kafka_listen_default) is only logged.
 * A node with --tls-cert serves it with TLS on the client port's context
 * (n->tls, borrowed: created before and freed after the port), client
 * certificates included when --tls-ca is set. Returns 0 or a negative
 * code. */
__attribute__((warn_unused_result)) int kafka_port_start(struct node *n);

/* Closes the port like listener_close (answers in flight still go out);
 * cb fires once, also at once (from this call) when the port was off. */
void kafka_port_close(struct node *n, void (*cb)(struct listener *l));

/* Kafka's own names, for the node's metrics: of an api key this port
 * serves ("Produce"), and of a Kafka error code it answers
 * ("NOT_LEADER_OR_FOLLOWER"); NULL for others. Context: any thread. */
const char *kafka_api_name(int api_key);
const char *kafka_err_name(int code);

#endif
