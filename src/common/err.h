/* err.h - the project-wide error table: every function returns 0 or one of
 * these negative codes (or a negative errno passed through from the system or
 * libuv). cairn_strerror() names both. */
#ifndef CAIRN_ERR_H
#define CAIRN_ERR_H

/* Codes start at -10000 so they never collide with negative errno values,
 * which pass through unchanged. Append only; never renumber. */
#define CAIRN_ERR_TABLE(X)                                                         \
  X(CAIRN_EINVAL,       -10000, "invalid argument")                               \
  X(CAIRN_ENOMEM,       -10001, "out of memory")                                  \
  X(CAIRN_ECORRUPT,     -10002, "data is corrupt")                                \
  X(CAIRN_EBADLEN,      -10003, "batch length field is wrong")                    \
  X(CAIRN_EBADCRC,      -10004, "batch checksum mismatch")                        \
  X(CAIRN_EBADMAGIC,    -10005, "unknown batch magic (format version)")           \
  X(CAIRN_EBADCOUNT,    -10006, "record count does not match the records")        \
  X(CAIRN_EBADVARINT,   -10007, "malformed varint")                               \
  X(CAIRN_ETOOLARGE,    -10008, "too large")                                      \
  X(CAIRN_EBADATTR,     -10009, "unknown or reserved attribute bits set")         \
  X(CAIRN_EBADRECORD,   -10010, "malformed record")                               \
  X(CAIRN_ETRUNCATED,   -10011, "input ends before the structure does")           \
  X(CAIRN_EOFFSET,      -10012, "offset out of range")                            \
  X(CAIRN_EFATAL,       -10013, "log is in a fatal state after a failed write or fsync") \
  X(CAIRN_ECLOSED,      -10014, "object is closed")                               \
  X(CAIRN_EUNSUPPORTED, -10015, "not supported")                                  \
  X(CAIRN_ENOTFOUND,    -10016, "not found")                                      \
  X(CAIRN_EEXIST,       -10017, "already exists")                                 \
  X(CAIRN_EINDEX,       -10018, "raft index goes backwards")                      \
  X(CAIRN_ENOTLEADER,   -10019, "this replica is not the leader")                 \
  X(CAIRN_ERAFT,        -10020, "raft failure")                                   \
  X(CAIRN_ESHUTDOWN,    -10021, "shutting down")                                  \
  X(CAIRN_EINDOUBT,     -10022, "leadership was lost while the batch was in flight: it may or may not be committed") \
  X(CAIRN_ERAFTFILES,   -10023, "raft log files are damaged beyond a torn tail") \
  X(CAIRN_ECONFIG,      -10040, "invalid configuration")                          \
  X(CAIRN_ETOPIC_EXISTS,       -10045, "topic already exists")                  \
  X(CAIRN_EUNKNOWN_TOPIC,      -10046, "unknown topic or partition")            \
  X(CAIRN_EINVALID_TOPIC_NAME, -10047, "invalid topic name")                    \
  X(CAIRN_EINVALID_RF,         -10048, "invalid replication factor")            \
  X(CAIRN_EINVALID_PARTITIONS, -10049, "invalid partition count")               \
  X(CAIRN_ENODE_ID_IN_USE,     -10050, "node id is in use by another live process") \
  X(CAIRN_ECLUSTER_ID_MISMATCH, -10051, "cluster id mismatch")                  \
  X(CAIRN_ESTALE,              -10052, "stale term, epoch or incarnation")      \
  X(CAIRN_EUNKNOWN_NODE,       -10053, "unknown node")                          \
  X(CAIRN_EINVALID_REPLICAS,   -10054, "invalid replica assignment change") \
  X(CAIRN_EINTERNAL_TOPIC,     -10060, "internal topic: users may not delete or alter it") \
  X(CAIRN_EINVALID_CONFIG,     -10061, "invalid topic configuration: an unknown key, a bad value or a key that cannot change") \
  X(CAIRN_EPOLICY,             -10062, "the topic's storage does not offer this operation") \
  X(CAIRN_EBADREQUEST,  -10080, "request fields do not match its payload or are not offered") \
  X(CAIRN_EFRAMEEMPTY,  -10055, "zero-length frame")                              \
  X(CAIRN_EBADFRAME,    -10056, "malformed frame: envelope length does not fit the frame") \
  X(CAIRN_EBADENVELOPE, -10057, "frame envelope does not parse")                  \
  X(CAIRN_ETOOMANYCONNS, -10058, "too many connections")                           \
  X(CAIRN_EQUEUE_FULL,         -10090, "producer buffer is full: wait for deliveries or raise buffer_bytes") \
  X(CAIRN_EDELIVERY_TIMEOUT,   -10091, "not delivered within the delivery timeout") \
  X(CAIRN_EUNREACHABLE,        -10092, "no node of the cluster could be reached")   \
  X(CAIRN_EUNKNOWN_PARTITION,  -10093, "unknown partition")                        \
  X(CAIRN_ENOT_CONTROLLER,     -10094, "no controller leader is known right now")  \
  X(CAIRN_EPRODUCER_FENCED,    -10095, "a newer epoch of this producer id exists") \
  X(CAIRN_EOUT_OF_ORDER,       -10096, "batch sequence out of order for this producer") \
  X(CAIRN_EUNKNOWN_PRODUCER,   -10097, "the partition has no state for this producer id") \
  X(CAIRN_EPROTOCOL,           -10098, "the node answered something this client does not understand") \
  X(CAIRN_EREMOTE,             -10099, "the node reported an internal error")      \
  X(CAIRN_ESTORAGE,            -10100, "the node's storage failed")               \
  X(CAIRN_ERATE_LIMITED,       -10101, "rate limited by the node")                 \
  X(CAIRN_EREQUEST_TIMEOUT,    -10102, "the node did not answer within the request timeout") \
  X(CAIRN_EREPLICA_NOT_AVAILABLE, -10103, "the partition replica is not available yet") \
  X(CAIRN_ECOMPRESS,           -10104, "compression or decompression failed") \
  X(CAIRN_ENOT_COORDINATOR,    -10150, "this node is not the group's coordinator") \
  X(CAIRN_ECOORDINATOR_LOADING, -10151, "the group coordinator is loading its offsets") \
  X(CAIRN_EUNKNOWN_MEMBER,     -10152, "unknown member id: join the group again") \
  X(CAIRN_EILLEGAL_GENERATION, -10153, "a newer generation of the group exists") \
  X(CAIRN_EREBALANCE,          -10154, "the group is rebalancing: join again") \
  X(CAIRN_EINCONSISTENT_PROTOCOL, -10155, "no assignment strategy every member supports") \
  X(CAIRN_EGROUP_NOT_EMPTY,    -10156, "the group has members") \
  X(CAIRN_ENOT_ASSIGNED,       -10157, "the partition is not assigned to this member") \
  X(CAIRN_EUNKNOWN_GROUP,      -10158, "unknown group") \
  X(CAIRN_EINVALID_GROUP,      -10159, "invalid group name, session timeout or subscription") \
  X(CAIRN_EFENCED_INSTANCE,    -10160, "another member now holds this group instance id (static membership)") \
  X(CAIRN_EHTTP,               -10120, "the admin HTTP server could not start") \
  X(CAIRN_ECLUSTER_AUTH,       -10180, "cluster authentication failed: wrong or missing cluster secret") \
  X(CAIRN_EBADSECRET,          -10181, "unusable cluster secret file") \
  X(CAIRN_ETLS,                -10182, "TLS failed (handshake, certificate or record)") \
  X(CAIRN_EAUTH,               -10183, "authentication failed") \
  X(CAIRN_EUNKNOWN_USER,       -10184, "unknown user") \
  X(CAIRN_EUNKNOWN_ACL,        -10185, "no such access control entry") \
  X(CAIRN_ETLS_ON_PLAIN,       -10186, "a TLS handshake on a port without TLS: the client uses TLS (SSL, SASL_SSL), the port does not") \
  X(CAIRN_EDATABASE,           -10260, "the PostgreSQL database failed a statement or cannot be reached") \
  X(CAIRN_ESCHEMA,             -10261, "the database's Cairn schema version is unknown to this build") \
  X(CAIRN_EDB_BEHIND,          -10262, "PostgreSQL is behind: more uncommitted bytes wait than the store's bound") \
  X(CAIRN_EPENDING,            -10263, "the store is reading from its database: ask again when it wakes the waiters") \
  X(CAIRN_ESYNC_CANCELED,      -10240, "a log sync was canceled before it ran (the log was needed meanwhile)") \
  X(CAIRN_EAUTHZ,              -10200, "not authorized: the ACLs do not allow it")

enum cairn_err {
#define CAIRN_ERR_ENUM(name, value, text) name = value,
  CAIRN_ERR_TABLE(CAIRN_ERR_ENUM)
#undef CAIRN_ERR_ENUM
};

/* Returns a static string for any code this project returns: a cairn_err, a
 * negative errno, or 0. Never NULL. Context: any thread. */
const char *cairn_strerror(int err);

/* The symbolic name ("CAIRN_EBADCRC", "ENOSPC", ...) for logs and tests.
 * Returns a static string, never NULL. Context: any thread. */
const char *cairn_errname(int err);

#endif
