#!/usr/bin/env python3
"""kafka_apis.py HOST:PORT KEY=LO-HI...: asks a Kafka port for ApiVersions
(v0, no authentication needed) and exits 0 when every KEY is listed with
exactly that version range, else 1 naming what differs. Shared by the
tests/integration/kafka_*.sh scripts."""
import socket
import struct
import sys


def api_versions(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    req = struct.pack(">hhih", 18, 0, 1, 1) + b"t"
    s.sendall(struct.pack(">i", len(req)) + req)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    body = s.recv(size, socket.MSG_WAITALL)
    corr, err, n = struct.unpack(">ihi", body[:10])
    if corr != 1 or err != 0:
        sys.exit("ApiVersions: correlation id %d, error %d" % (corr, err))
    apis = {}
    for i in range(n):
        k, lo, hi = struct.unpack(">hhh", body[10 + 6 * i:16 + 6 * i])
        apis[k] = (lo, hi)
    return apis


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    apis = api_versions(sys.argv[1])
    bad = []
    for spec in sys.argv[2:]:
        key, rng = spec.split("=")
        lo, hi = (int(v) for v in rng.split("-"))
        if apis.get(int(key)) != (lo, hi):
            bad.append("api %s: %s, not %d-%d" % (key, apis.get(int(key)), lo, hi))
    if bad:
        sys.exit("; ".join(bad))
    print("ApiVersions lists", " ".join(sys.argv[2:]))


main()
