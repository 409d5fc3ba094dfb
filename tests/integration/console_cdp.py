"""console_cdp.py - drives the admin port's console in headless Chromium
through the DevTools protocol over --remote-debugging-pipe (file
descriptors 3 and 4, NUL-separated JSON: nothing but the Python standard
library), clicks through its tabs and checks what is on the screen: the
rendered text of visible elements and the chart's pixels, not the HTML.

usage: console_cdp.py CHROMIUM URL SCREENSHOT.png GROUP LAG TOPIC VALUE

  - Overview: the cluster-wide throughput chart has drawn produce pixels,
    and TOPIC has a non-zero produce rate over the last hour;
  - Topics: TOPIC is listed among the user topics, __cairn_offsets among
    the internal ones;
  - Consumer groups: GROUP shows a total lag of LAG;
  - Messages: reading TOPIC partition 0 from offset 0 as JSON shows VALUE
    (a JSON text) at offset 0, with its key and header;
then the Overview is saved as SCREENSHOT.png (and the two tabs as
SCREENSHOT-groups.png and SCREENSHOT-messages.png), and the actions run, each
through its confirmation:
  - a topic console-made is created from the Topics tab and appears, is
    grown to 4 partitions and its retention.bytes set to 1 MiB (both seen
    in its row), and a bad retention.ms is refused with the reason;
  - deleting it is not done until its name is typed, then it disappears;
  - GROUP's offsets of TOPIC are reset to latest: its lag shows 0;
  - decommissioning node 3 answers (refused, or done and then undone by
    recommissioning it), shown in the result line.
Exits 1 naming the first check that failed."""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time


class Chrome:
    def __init__(self, binary):
        self.to_r, self.to_w = os.pipe()
        self.from_r, self.from_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="cairn-console-")

        def fds():
            os.dup2(self.to_r, 3)
            os.dup2(self.from_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
             "--window-size=1280,1000", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(self.to_r)
        os.close(self.from_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session is not None:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        while time.time() < end:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError("%s: %s" % (method, reply["error"]))
                    return reply["result"]
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        raise RuntimeError("%s: no answer in %d s" % (method, timeout))

    def open(self, url):
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def js(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait(self, expr, what, timeout=30):
        end = time.time() + timeout
        last = None
        while time.time() < end:
            last = self.js(expr)
            if last:
                return last
            time.sleep(0.2)
        fail("%s (after %d s; last %r)" % (what, timeout, last))

    def close(self):
        self.proc.kill()
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.profile])


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# The visible text of element id (innerText is "" for hidden elements).
def text(cid):
    return "(function(){var e=document.getElementById(%s);return e&&e.offsetParent!==null?e.innerText:'';})()" % json.dumps(cid)


# Saves what the window shows as SHOT (the Overview) or SHOT-TAB.png.
def snap(c, shot, tab):
    path = shot if tab is None else shot[:-4] + "-" + tab + ".png"
    png = base64.b64decode(c.call("Page.captureScreenshot", {"format": "png"})["data"])
    with open(path, "wb") as f:
        f.write(png)
    print("screenshot: %s (%d bytes)" % (path, len(png)))


def confirm(c, what, typed=None):
    shown = c.wait("document.getElementById('confirm').classList.contains('open') && document.getElementById('confirm-text').innerText",
                   "no confirmation for " + what)
    if typed is not None:
        # Not done until the name is typed.
        c.js("document.getElementById('confirm-ok').click()")
        time.sleep(0.3)
        if not c.js("document.getElementById('confirm').classList.contains('open')"):
            fail("%s went ahead without the name typed" % what)
        c.js("document.getElementById('confirm-input').value = %s" % json.dumps(typed))
    c.js("document.getElementById('confirm-ok').click()")
    return shown


def result(c, what):
    return c.wait("(function(){var t=document.getElementById('action-result').innerText;return t.indexOf(%s)===0&&t.indexOf('\u2026')<0?t:'';})()"
                  % json.dumps(what + ":"), "no result of " + what)


# The cells of console-made's row in the Topics table.
CELLS = "Array.prototype.map.call(document.getElementById('topic-console-made').cells,function(x){return x.innerText;})"


def grow_and_alter(c):
    c.js("document.getElementById('add-partitions-console-made').click()")
    asked = confirm_with(c, "add partitions", "document.getElementById('addp-count').value='4'")
    if "console-made" not in asked:
        fail("the confirmation does not name the topic: %r" % asked)
    r = result(c, "add partitions to console-made")
    if not r.endswith("done"):
        fail("add partitions: %r" % r)
    c.wait("(%s)[1] === '4'" % CELLS, "console-made does not show 4 partitions")
    print("actions: console-made grown to 4 partitions")
    r = alter_config(c, "retention.bytes", "1048576")
    if not r.endswith("done"):
        fail("alter config: %r" % r)
    c.wait("(%s)[4] === '1.0 MiB'" % CELLS, "console-made does not show retention.bytes 1.0 MiB")
    print("actions: console-made's retention.bytes set to 1 MiB")
    r = alter_config(c, "retention.ms", "soon")
    if "refused" not in r or "INVALID_CONFIG" not in r or "retention.ms" not in r:
        fail("a bad retention.ms was not refused with the reason: %r" % r)
    print("actions: a bad value refused: %s" % r)


# console-made's config action: KEY = VALUE, confirmed; returns the result line.
def alter_config(c, key, value):
    c.js("document.getElementById('alter-config-console-made').click()")
    confirm_with(c, "alter config", "document.getElementById('alter-key').value=%s;"
                 "document.getElementById('alter-value').value=%s" % (json.dumps(key), json.dumps(value)))
    return result(c, "alter config of console-made")


# Fills the confirmation's own fields (js) and confirms; returns its text.
def confirm_with(c, what, js):
    shown = c.wait("document.getElementById('confirm').classList.contains('open') && document.getElementById('confirm-text').innerText",
                   "no confirmation for " + what)
    c.js(js)
    c.js("document.getElementById('confirm-ok').click()")
    return shown


def actions(c, group, topic):
    c.js("document.getElementById('tab-topics').click()")
    c.js("""document.getElementById('create-name').value='console-made';document.getElementById('create-partitions').value='2';
        document.getElementById('create-rf').value='3';document.getElementById('create-go').click()""")
    asked = confirm(c, "create topic")
    if "console-made" not in asked:
        fail("the confirmation does not name the topic: %r" % asked)
    r = result(c, "create topic console-made")
    if not r.endswith("done"):
        fail("create topic: %r" % r)
    c.wait(text("topic-console-made"), "the created topic is not listed")
    grow_and_alter(c)
    c.js("document.getElementById('delete-console-made').click()")
    confirm(c, "delete topic", typed="console-made")
    r = result(c, "delete topic console-made")
    if not r.endswith("done"):
        fail("delete topic: %r" % r)
    c.wait("document.getElementById('topic-console-made') === null", "the deleted topic is still listed")
    print("actions: created and deleted console-made")
    c.js("document.getElementById('tab-groups').click()")
    c.wait(text("reset-" + group), "no reset button for " + group)
    c.js("document.getElementById(%s).value='latest';document.getElementById(%s).value=%s;document.getElementById(%s).click()"
         % (json.dumps("reset-to-" + group), json.dumps("reset-topic-" + group), json.dumps(topic), json.dumps("reset-" + group)))
    confirm(c, "reset offsets", typed=group)
    r = result(c, "reset offsets of " + group)
    if not r.endswith("done"):
        fail("reset offsets: %r" % r)
    c.wait("(%s) === '0'" % text("group-lag-" + group), "%s's lag is not 0 after the reset" % group)
    print("actions: %s reset to latest, lag 0" % group)
    c.js("document.getElementById('tab-overview').click()")
    c.wait(text("decommission-3"), "no decommission button for node 3")
    c.js("document.getElementById('decommission-3').click()")
    confirm(c, "decommission", typed="3")
    r = result(c, "decommission node 3")
    if r.endswith("done"):
        c.wait(text("recommission-3"), "node 3 does not show as draining")
        c.js("document.getElementById('recommission-3').click()")
        confirm(c, "recommission")
        r2 = result(c, "recommission node 3")
        if not r2.endswith("done"):
            fail("recommission: %r" % r2)
        c.wait(text("decommission-3"), "node 3 is not alive again")
        print("actions: node 3 decommissioned, then recommissioned")
    elif "refused" in r:
        print("actions: %s" % r)
    else:
        fail("decommission: %r" % r)


def main():
    chromium, url, shot, group, lag, topic, value = sys.argv[1:8]
    c = Chrome(chromium)
    try:
        c.open(url)
        c.wait("document.getElementById('updated') && document.getElementById('updated').textContent !== 'never'",
               "the page never polled")
        # Overview: the cluster-wide produce line is drawn (pixels of its colour).
        c.wait(text("rate-" + topic), "no produce rate row for " + topic)
        row = c.js(text("rate-" + topic))
        cells = row.split("\t")
        if len(cells) < 4 or cells[3].strip().startswith("0 B/s"):
            fail("the hour's produce rate of %s reads %r" % (topic, row))
        px = c.js("""(function(){var c=document.getElementById('chart-throughput'),d=c.getContext('2d').getImageData(0,0,c.width,c.height).data,n=0;
            for(var i=0;i<d.length;i+=4){if(d[i]===0x1f&&d[i+1]===0x77&&d[i+2]===0xb4)n++;}return n;})()""")
        if px < 20:
            fail("the throughput chart shows %d produce pixels" % px)
        axis = c.js(text("rates-now"))
        print("overview: %s; %s: %s; %d produce pixels" % (axis, topic, row.replace("\t", " | "), px))
        # Topics.
        c.js("document.getElementById('tab-topics').click()")
        c.wait(text("topic-" + topic), "topic %s not shown on the Topics tab" % topic)
        intern = c.wait(text("topics-internal"), "no internal topics shown")
        if "__cairn_offsets" not in intern:
            fail("internal topics do not list __cairn_offsets: %r" % intern)
        if "__cairn_offsets" in c.js(text("topics")):
            fail("__cairn_offsets is listed with the user topics")
        if c.js(text("summary")):
            fail("the Overview is still visible on the Topics tab")
        print("topics: %s" % c.js(text("topic-" + topic)).replace("\t", " | "))
        # Consumer groups.
        c.js("document.getElementById('tab-groups').click()")
        shown = c.wait(text("group-lag-" + group), "group %s not shown" % group)
        c.wait("(%s) === %s" % (text("group-lag-" + group), json.dumps(lag)),
               "group %s's lag is not %s (shows %r)" % (group, lag, shown))
        print("groups: %s" % c.js(text("group-" + group)).replace("\t", " | "))
        snap(c, shot, "groups")
        # Messages: partition 0 from offset 0, as JSON.
        c.js("document.getElementById('tab-messages').click()")
        c.js("""(function(){var s=document.getElementById('msg-topic');s.value=%s;
            document.getElementById('msg-partition').value='0';document.getElementById('msg-offset').value='0';
            document.getElementById('msg-format').value='json';document.getElementById('msg-read').click();})()""" % json.dumps(topic))
        msg = c.wait(text("msg-0"), "no message at offset 0 shown")
        want = json.dumps(json.loads(value), indent=2)
        if want not in msg:
            fail("message 0 does not show %r as JSON: %r" % (want, msg))
        c.js("document.getElementById('msg-format').value='hex';document.getElementById('msg-format').dispatchEvent(new Event('change'))")
        hexed = c.js(text("msg-0"))
        if value.encode()[:4].hex() not in hexed.replace(" ", ""):
            fail("message 0 in hex does not show %s: %r" % (value.encode()[:4].hex(), hexed))
        print("messages: %s" % msg.replace("\n", " ").replace("\t", " | ")[:200])
        c.js("document.getElementById('msg-format').value='json';document.getElementById('msg-format').dispatchEvent(new Event('change'))")
        snap(c, shot, "messages")
        # The screenshot of the Overview.
        c.js("document.getElementById('tab-overview').click()")
        snap(c, shot, None)
        actions(c, group, topic)
    finally:
        c.close()
    print("PASS")


main()
