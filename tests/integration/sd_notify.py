#!/usr/bin/python3
"""sd_notify.py - cairnd speaks systemd's notification protocol (Type=notify)
without systemd: the test binds the datagram socket itself, starts real
cairnd processes with NOTIFY_SOCKET and WATCHDOG_USEC pointing at it, and
checks what arrives.

  sd_notify.py CAIRND BASE_PORT     (BASE_PORT..BASE_PORT+29 free)

1. A single node: READY=1 arrives, and at that moment the admin port's
   /ready answers 200 (the same moment as the readiness probe); WATCHDOG=1
   keeps arriving at about half of WATCHDOG_USEC; SIGTERM brings STOPPING=1
   and exit 0. The socket is a path.
2. A node whose voters are not there (it can never register): no READY=1,
   a STATUS= saying what it waits for, WATCHDOG=1 all the same, and
   STOPPING=1 on SIGTERM. The socket is an abstract name ('@...').
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

cairnd, base = sys.argv[1], int(sys.argv[2])
tmp = tempfile.mkdtemp(prefix="cairn-sdnotify-")
procs = []
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg, flush=True)


def ok(msg):
    print("ok   " + msg, flush=True)


def start(name, args, notify_name):
    env = dict(os.environ, NOTIFY_SOCKET=notify_name, WATCHDOG_USEC="400000")
    env.pop("WATCHDOG_PID", None)
    log = open(os.path.join(tmp, name + ".log"), "wb")
    p = subprocess.Popen([cairnd] + args, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def recv_until(sock, want, timeout_s, seen):
    """Collects datagrams into seen until one holds the line want, or the
    time is up. Returns the arrival time of want or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        now = time.monotonic()
        seen.append((now, msg))
        if want is not None and want in msg.split("\n"):
            return now
    return None


def admin_ready(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/ready" % port, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def node_args(port, data, extra=()):
    return ["--node-id", "1", "--data-dir", data, "--listen", "127.0.0.1:%d" % port,
            "--cluster-listen", "127.0.0.1:%d" % (port + 1),
            "--admin-listen", "127.0.0.1:%d" % (port + 2), "--kafka-listen", "off"] + list(extra)


def stop_and_expect_stopping(p, sock, what):
    seen = []
    p.send_signal(signal.SIGTERM)
    if recv_until(sock, "STOPPING=1", 30, seen) is None:
        fail("%s: no STOPPING=1 after SIGTERM: %r" % (what, [m for _, m in seen]))
    else:
        ok("%s: STOPPING=1 after SIGTERM" % what)
    try:
        rc = p.wait(60)
        if rc != 0:
            fail("%s: exit %d after SIGTERM" % (what, rc))
    except subprocess.TimeoutExpired:
        fail("%s: still running 60 s after SIGTERM" % what)


try:
    # 1. A single node, socket at a path.
    path = os.path.join(tmp, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    p = start("single", node_args(base, os.path.join(tmp, "d1")), path)
    seen = []
    t_ready = recv_until(sock, "READY=1", 60, seen)
    if t_ready is None:
        fail("single node: no READY=1 within 60 s; got %r" % [m for _, m in seen])
    else:
        st = admin_ready(base + 2)
        if st == 200:
            ok("single node: READY=1 when /ready answers 200")
        else:
            fail("single node: READY=1 sent while /ready answers %r" % st)
        seen = []
        recv_until(sock, None, 1.5, seen)
        pings = [t for t, m in seen if "WATCHDOG=1" in m.split("\n")]
        ready_again = [m for _, m in seen if "READY=1" in m.split("\n")]
        # WATCHDOG_USEC=400 ms: a ping every 200 ms, so 1.5 s holds several
        # (at least 3 however slow the machine, at most one per 100 ms).
        if 3 <= len(pings) <= 15:
            ok("single node: %d WATCHDOG=1 in 1.5 s (WATCHDOG_USEC 400 ms)" % len(pings))
        else:
            fail("single node: %d WATCHDOG=1 in 1.5 s (want about 7)" % len(pings))
        if ready_again:
            fail("single node: READY=1 sent more than once")
    stop_and_expect_stopping(p, sock, "single node")
    sock.close()

    # 2. A node that cannot become ready: its two fellow voters never start.
    abstract = "@cairn-sdnotify-%d" % os.getpid()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + abstract[1:])
    voters = "1@127.0.0.1:%d,2@127.0.0.1:%d,3@127.0.0.1:%d" % (base + 11, base + 21, base + 31)
    p = start("alone", node_args(base + 10, os.path.join(tmp, "d2"), ["--voters", voters]),
              abstract)
    seen = []
    recv_until(sock, "READY=1", 4, seen)
    msgs = [m for _, m in seen]
    if any("READY=1" in m.split("\n") for m in msgs):
        fail("node without a quorum sent READY=1: %r" % msgs)
    else:
        ok("node without a quorum: no READY=1")
    status = [m for m in msgs if m.startswith("STATUS=")]
    if status and "not registered" in status[0]:
        ok("node without a quorum: %s" % status[0])
    else:
        fail("node without a quorum: no STATUS= saying what it waits for: %r" % msgs)
    if sum("WATCHDOG=1" in m.split("\n") for m in msgs) >= 3:
        ok("node without a quorum: WATCHDOG=1 all the same")
    else:
        fail("node without a quorum: too few WATCHDOG=1: %r" % msgs)
    stop_and_expect_stopping(p, sock, "node without a quorum")
    sock.close()
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if fails:
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".log"):
                print("--- %s (tail)" % f)
                with open(os.path.join(tmp, f), errors="replace") as fh:
                    print("".join(fh.readlines()[-15:]))
    shutil.rmtree(tmp, ignore_errors=True)

if fails:
    print("%d failure(s)" % fails)
    sys.exit(1)
print("all sd_notify checks passed")
