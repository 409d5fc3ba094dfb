#!/usr/bin/env bash
# kafka_kafkajs.sh - kafkajs 2.2.4 (Node) against the Kafka port of a
# 3-node cluster (docs/kafka.md): the client creates a topic, produces
# keyed messages with acks=all (idempotent) while the leader of partition 0
# is SIGKILLed, reads them back by offset and in a consumer group that
# commits; every acknowledged message is read exactly once, in order per
# partition, and the group's committed offsets are what `cairn group
# describe` shows. Then deleteTopicRecords (DeleteRecords) moves partition
# 0's log start, and an offset above its end is refused.
#
# kafkajs is installed with npm into MODULES (a folder under the build
# directory) the first time. The test is skipped (exit 77) only when npm's
# registry cannot be reached; any other failure to install fails it.
#
# Usage: kafka_kafkajs.sh CAIRN CAIRND MODULES
set -euo pipefail
CLI_TEST_TAG=kafkajs
. "$(dirname "$0")/../lib/cli_test.sh"
modules=$3
kafkajs_version=2.2.4
command -v node >/dev/null || fail "node is not installed (deploy/setup.sh)"
command -v npm >/dev/null || fail "npm is not installed (deploy/setup.sh)"

step "kafkajs $kafkajs_version in $modules"
mkdir -p "$modules"
# Another run of this test may install at the same time: one at a time.
exec 9>"$modules/.lock"
flock -w 120 9 || fail "$modules/.lock is held"
if ! grep -qs "\"version\": \"$kafkajs_version\"" "$modules/node_modules/kafkajs/package.json"; then
  if ! timeout 120 npm install --prefix "$modules" --no-audit --no-fund --no-save \
    "kafkajs@$kafkajs_version" >"$dir/npm.out" 2>&1; then
    if ! timeout 30 npm ping >>"$dir/npm.out" 2>&1; then
      echo "SKIP: npm's registry ($(npm config get registry)) is unreachable: kafkajs cannot be installed"
      tail -5 "$dir/npm.out"
      exit 77
    fi
    fail "npm install kafkajs@$kafkajs_version: $(tail -20 "$dir/npm.out")"
  fi
fi
exec 9>&-

step "start a 3-node cluster"
start_cluster3
all="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"

step "kafkajs: create, produce across a leader SIGKILL, read by offset and in a group"
cat >"$dir/test.js" <<'JS'
const { Kafka, logLevel } = require("kafkajs");
const fs = require("fs");
const [brokers, cdir, totalFile] = process.argv.slice(2);
const topic = "kj", nparts = 3, n = 300;
const kafka = new Kafka({
  clientId: "cairn-kafkajs-test", brokers: brokers.split(","), logLevel: logLevel.ERROR,
  retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function assert(ok, what) { if (!ok) throw new Error(what); }

async function leaderOf(admin, part) {
  // The topic is usable as soon as CreateTopics answers, but a leader may
  // take a moment to be known to the node asked.
  for (let i = 0; i < 100; i++) {
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const p = md.topics[0].partitions.find((q) => q.partitionId === part);
    if (p && p.leader > 0) return p.leader;
    await sleep(100);
  }
  throw new Error(`no leader for ${topic}/${part}`);
}

// rows: {partition, offset, key, value} as read. Every acknowledged value
// once, at its acknowledged place; offsets and values increasing per
// partition; each key on one partition.
function check(rows, acked, what) {
  const count = new Map();
  for (const r of rows) count.set(r.value, (count.get(r.value) || 0) + 1);
  const dups = [...count].filter(([, c]) => c > 1).map(([v]) => v);
  assert(dups.length === 0, `${what}: read twice: ${dups.slice(0, 10)}`);
  const missing = [...acked.keys()].filter((v) => !count.has(v));
  assert(missing.length === 0, `${what}: acknowledged but not read: ${missing.slice(0, 10)}`);
  const last = new Map(), partOf = new Map();
  for (const r of rows) {
    const a = acked.get(r.value);
    if (a) assert(a.partition === r.partition && a.offset === r.offset,
      `${what}: ${r.value} at ${r.partition}/${r.offset}, acked at ${a.partition}/${a.offset}`);
    const num = Number(r.value.slice(1));
    const [lo, lv] = last.get(r.partition) || [-1, -1];
    assert(r.offset > lo && num > lv, `${what}: partition ${r.partition} out of order at offset ${r.offset}`);
    last.set(r.partition, [r.offset, num]);
    if (!partOf.has(r.key)) partOf.set(r.key, r.partition);
    assert(partOf.get(r.key) === r.partition, `${what}: key ${r.key} on two partitions`);
  }
}

async function seekWhenRunning(c, partition) {
  for (let i = 0; ; i++) {
    try {
      c.seek({ topic, partition, offset: "0" });
      return;
    } catch (e) {
      if (i >= 300 || !/not initialized/.test(e.message)) throw e;
      await sleep(100);
    }
  }
}

// Reads total messages of the topic in group groupId, from offset 0 of
// every partition; commits what it read when commit is set.
async function consume(groupId, total, commit) {
  const c = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  const rows = [];
  await c.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      rows.push({ partition, offset: Number(message.offset), key: message.key.toString(),
        value: message.value.toString() });
    },
  });
  // run() can resolve while its first join still retries (a coordinator
  // still loading); seek throws until the group is initialized.
  if (!commit) for (let q = 0; q < nparts; q++) await seekWhenRunning(c, q);
  for (let i = 0; i < 600 && rows.length < total; i++) await sleep(100);
  assert(rows.length >= total, `${groupId}: ${rows.length} of ${total} read`);
  if (commit) {
    const next = new Map();
    for (const r of rows) next.set(r.partition, Math.max(next.get(r.partition) || 0, r.offset + 1));
    await c.commitOffsets([...next].map(([partition, o]) => ({ topic, partition, offset: String(o) })));
  }
  await c.disconnect();
  return rows;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: nparts, replicationFactor: 3 }],
    waitForLeaders: true });
  const victim = await leaderOf(admin, 0);
  // Cairn creates __cairn_offsets at a group's first use, and only while as
  // many nodes as its replicas are alive: the group's first use (an
  // OffsetFetch through its coordinator) comes before the kill.
  // (kafkajs's admin does not retry COORDINATOR_LOAD_IN_PROGRESS, which a
  // coordinator answers while it loads the new offsets partition.)
  let before = null;
  for (let i = 0; before === null; i++) {
    try {
      before = await admin.fetchOffsets({ groupId: "kj-g", topics: [topic] });
    } catch (e) {
      if (!e.retriable || i >= 100) throw e;
      await sleep(200);
    }
  }
  assert(before[0].partitions.every((p) => Number(p.offset) < 0), "kj-g has offsets already");

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const acked = new Map();
  const failed = [];
  let killed = false;
  for (let i = 0; i < n; i++) {
    const value = `v${i}`;
    try {
      const [md] = await producer.send({ topic, acks: -1,
        messages: [{ key: `k${i % 13}`, value }] });
      acked.set(value, { partition: md.partition, offset: Number(md.baseOffset) });
    } catch (e) {
      failed.push(`${value}: ${e.message}`);
    }
    if (!killed && acked.size >= n / 3) {
      const pid = Number(fs.readFileSync(`${cdir}/node${victim}.pid`, "utf8"));
      process.kill(pid, "SIGKILL");
      console.log(`killed node ${victim} (pid ${pid}), leader of ${topic}/0, after ${acked.size} acks`);
      killed = true;
    }
  }
  await producer.disconnect();
  failed.forEach((f) => console.log(`delivery failed: ${f}`));
  console.log(`acknowledged ${acked.size} of ${n}, ${failed.length} failed`);
  // The idempotent producer retries through the failover: nothing fails.
  assert(failed.length === 0, "deliveries failed across the failover");

  const ends = await admin.fetchTopicOffsets(topic);
  const total = ends.reduce((s, p) => s + Number(p.high), 0);
  assert(total >= acked.size, `topic holds ${total}, ${acked.size} acknowledged`);
  check(await consume("kj-byoffset", total, false), acked, "by offset");
  console.log(`by offset: ${total} read, every acknowledged one once, in order`);
  check(await consume("kj-g", total, true), acked, "group");
  console.log(`group: ${total} read and committed`);

  // DeleteRecords (deleteTopicRecords): partition 0's records below half
  // its end go on the replicas left; the low watermark says so, the end
  // stays; an offset above the end is refused OFFSET_OUT_OF_RANGE.
  const p0 = ends.find((p) => p.partition === 0);
  const cut = Math.floor(Number(p0.high) / 2);
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: `${cut}` }] });
  const a0 = (await admin.fetchTopicOffsets(topic)).find((p) => p.partition === 0);
  assert(Number(a0.low) === cut && a0.high === p0.high,
    `after deleteTopicRecords partition 0 has low ${a0.low} high ${a0.high}, want ${cut} ${p0.high}`);
  let refused = null;
  try {
    await admin.deleteTopicRecords({ topic,
      partitions: [{ partition: 0, offset: `${Number(p0.high) + 5}` }] });
  } catch (e) {
    refused = e;
  }
  // kafkajs's retrier wraps the per-partition error (its cause).
  const parts = refused === null ? undefined : (refused.cause || refused).partitions;
  const type = parts === undefined ? undefined : parts[0].error.type;
  assert(type === "OFFSET_OUT_OF_RANGE", `an offset above the end: ${refused === null
    ? "accepted" : `${refused.name}: ${refused.message} ${JSON.stringify(parts)}`}`);
  console.log(`deleteTopicRecords: partition 0 starts at ${cut} of ${p0.high}; ` +
    `above the end: ${type}`);
  await admin.disconnect();
  fs.writeFileSync(totalFile, `${total}\n`);
}
main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
JS
KAFKAJS_NO_PARTITIONER_WARNING=1 NODE_PATH="$modules/node_modules" \
  timeout 200 node "$dir/test.js" "$all" "$cdir" "$dir/total" || fail "kafkajs"
total=$(cat "$dir/total")

step "the group's committed offsets are visible in cairn group describe"
group_committed kj-g 3 "$total"

echo "PASS"
