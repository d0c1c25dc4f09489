'use strict'
// Producing with kafkajs: send (acks -1, no codec and GZIP, plain and idempotent), sendBatch.
// Every record is read back with a kafkajs group consumer from the beginning.
const assert = require('node:assert/strict')
const { test } = require('../lib/scenario')
const { CompressionTypes } = require('kafkajs')
const { brokerFor } = require('../lib/broker')
const u = require('../lib/util')

const T = { timeout: 90000 }

async function createTopic(admin, topic, numPartitions) {
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions }], waitForLeaders: true }), true)
}

// n records across the topic: keys k<i>, values v<i> (every 7th value null, every 11th key
// null), two headers (the second repeated key), explicit timestamps.
function records(n, t0) {
  const out = []
  for (let i = 0; i < n; i++) {
    out.push({
      key: i % 11 === 5 ? null : `k${i}`,
      value: i % 7 === 3 ? null : `v${i}-${'x'.repeat(i % 50)}`,
      headers: { h: `h${i}`, empty: '' },
      timestamp: String(t0 + i),
    })
  }
  return out
}

// Consume `expected` records of the topics from the beginning with a fresh group.
async function readBack(t, kafka, topics, expected) {
  const c = u.closing(t, u.consumer(kafka, u.unique('readback')))
  await c.connect()
  await c.subscribe({ topics, fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor(`${expected} records`, () => got.length >= expected, 60000)
  await u.sleep(500) // nothing beyond what was sent may arrive
  await c.disconnect()
  return got
}

function checkSend(t, acks, sent, got) {
  // acks: per send call, [{topicName, partition, errorCode, baseOffset}]
  const byKey = new Map()
  for (const r of got) byKey.set(`${r.topic}/${r.partition}/${r.offset}`, r)
  assert.equal(got.length, sent.length, 'records read back')
  assert.equal(byKey.size, sent.length, 'distinct offsets')
  // Per partition, offsets are 0..n-1 and in send order.
  const parts = {}
  for (const r of got) (parts[`${r.topic}/${r.partition}`] ||= []).push(r)
  for (const [tp, rs] of Object.entries(parts)) {
    assert.deepEqual(rs.map(r => r.offset), rs.map((_, i) => i), `${tp} offsets 0..n-1`)
    const idx = rs.map(r => r.seq)
    assert.deepEqual(idx, [...idx].sort((a, b) => a - b), `${tp} in send order`)
  }
  for (const a of acks.flat()) assert.equal(a.errorCode, 0, `ack error for ${a.topicName}/${a.partition}`)
}

async function sendAndCheck(t, { compression, idempotent }) {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('send')
  await createTopic(admin, topic, 3)
  const opts = idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {}
  const p = u.closing(t, u.producer(kafka, opts))
  await p.connect()
  const t0 = Date.now() - 3600000
  const all = records(600, t0)
  const acks = []
  for (let i = 0; i < all.length; i += 100) {
    acks.push(await p.send({ topic, acks: -1, compression, messages: all.slice(i, i + 100) }))
  }
  const got = await readBack(t, kafka, [topic], all.length)
  const sent = new Map(all.map((r, i) => [r.timestamp, { ...r, i }]))
  for (const r of got) {
    const s = sent.get(r.timestamp)
    assert.ok(s, `record with timestamp ${r.timestamp} was sent`)
    r.seq = s.i
    assert.equal(r.key, s.key)
    assert.equal(r.value, s.value)
    assert.equal(r.headers.h.toString(), s.headers.h)
    assert.equal(r.headers.empty.toString(), '')
  }
  checkSend(t, acks, all, got)
  // Each send's ack per partition gives the offset of its first record there.
  for (let k = 0; k < acks.length; k++) {
    for (const a of acks[k]) {
      const mine = got.filter(r => r.partition === a.partition && r.seq >= k * 100 && r.seq < (k + 1) * 100)
      assert.ok(mine.length > 0, `send ${k} acked partition ${a.partition} without records there`)
      assert.equal(Number(a.baseOffset), Math.min(...mine.map(r => r.offset)),
        `send ${k}: baseOffset of partition ${a.partition}`)
    }
    const parts = new Set(got.filter(r => r.seq >= k * 100 && r.seq < (k + 1) * 100).map(r => r.partition))
    assert.equal(acks[k].length, parts.size, `send ${k}: one ack per partition written`)
  }
  const offsets = await admin.fetchTopicOffsets(topic)
  const total = offsets.reduce((s, o) => s + Number(o.high), 0)
  assert.equal(total, all.length, 'high watermarks add up to the records sent')
}

test('send acks=-1 uncompressed', T, t => sendAndCheck(t, { compression: CompressionTypes.None }))
test('send acks=-1 gzip', T, t => sendAndCheck(t, { compression: CompressionTypes.GZIP }))
test('send idempotent', T, t => sendAndCheck(t, { compression: CompressionTypes.None, idempotent: true }))
test('send idempotent gzip', T, t => sendAndCheck(t, { compression: CompressionTypes.GZIP, idempotent: true }))

test('sendBatch across topics and partitions', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const a = u.unique('batch-a')
  const b = u.unique('batch-b')
  await createTopic(admin, a, 2)
  await createTopic(admin, b, 3)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const topicMessages = [
    { topic: a, messages: [] },
    { topic: b, messages: [] },
  ]
  for (let i = 0; i < 60; i++) {
    topicMessages[0].messages.push({ partition: i % 2, key: `a${i}`, value: `va${i}` })
    topicMessages[1].messages.push({ partition: i % 3, key: `b${i}`, value: `vb${i}`, headers: { n: String(i) } })
  }
  const acks = await p.sendBatch({ topicMessages, acks: -1, compression: CompressionTypes.GZIP })
  const seen = acks.map(x => `${x.topicName}/${x.partition}`).sort()
  assert.deepEqual(seen, [`${a}/0`, `${a}/1`, `${b}/0`, `${b}/1`, `${b}/2`].sort())
  for (const x of acks) {
    assert.equal(x.errorCode, 0)
    assert.equal(String(x.baseOffset), '0')
  }
  const got = await readBack(t, kafka, [a, b], 120)
  assert.equal(got.length, 120)
  for (const r of got) {
    const topicIdx = r.topic === a ? 0 : 1
    const i = Number(r.key.slice(1))
    assert.equal(r.partition, i % (topicIdx === 0 ? 2 : 3), `${r.key} on the partition it was sent to`)
    assert.equal(r.value, `v${r.key}`)
    if (topicIdx === 1) assert.equal(r.headers.n.toString(), String(i))
  }
  for (const [tp, rs] of Object.entries(u.byPartition(got.filter(r => r.topic === b)))) {
    assert.deepEqual(rs.map(r => r.offset), rs.map((_, i) => i), `${b}/${tp} offsets`)
    assert.deepEqual(rs.map(r => r.key), rs.map((_, i) => `b${Number(tp) + 3 * i}`), `${b}/${tp} order`)
  }
  const offsets = await admin.fetchTopicOffsets(a)
  assert.deepEqual(offsets.map(o => [o.partition, o.low, o.high]).sort(), [[0, '0', '30'], [1, '0', '30']])
})

test('send to a missing topic auto-creates it', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const topic = u.unique('auto')
  const p = u.closing(t, u.producer(kafka, { allowAutoTopicCreation: true }))
  await p.connect()
  const acks = await p.send({ topic, acks: -1, messages: [{ key: 'k', value: 'v' }] })
  assert.equal(acks.length, 1)
  assert.equal(acks[0].errorCode, 0)
  assert.equal(String(acks[0].baseOffset), '0')
  const got = await readBack(t, kafka, [topic], 1)
  assert.deepEqual(got.map(r => [r.key, r.value, r.offset]), [['k', 'v', 0]])
})

test('send acks=0 and acks=1', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('acks')
  await createTopic(admin, topic, 1)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  // acks=0: the broker must not answer, and the connection must go on working.
  for (let i = 0; i < 5; i++) {
    await p.send({ topic, acks: 0, messages: [{ key: `zero${i}`, value: `v${i}` }] })
  }
  const one = await p.send({ topic, acks: 1, messages: [{ key: 'one', value: 'v5' }] })
  assert.equal(one[0].errorCode, 0)
  assert.equal(String(one[0].baseOffset), '5', 'the acks=0 records were written first')
  const all = await p.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: [{ key: 'all', value: 'v6' }] })
  assert.equal(String(all[0].baseOffset), '6')
  const got = await readBack(t, kafka, [topic], 7)
  assert.deepEqual(got.map(r => r.value), ['v0', 'v1', 'v2', 'v3', 'v4', 'v5', 'v6'])
})

test('send errors: MESSAGE_TOO_LARGE and keyless records on a compacted topic', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker, 'kafkajs-compat', 1)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const small = u.unique('small')
  const compacted = u.unique('compacted')
  assert.equal(await admin.createTopics({ topics: [
    { topic: small, configEntries: [{ name: 'max.message.bytes', value: '10000' }] },
    { topic: compacted, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
  ] }), true)
  const p = u.closing(t, u.producer(kafka, { retry: { retries: 0 } }))
  await p.connect()
  const errorType = async send => {
    try {
      await send
    } catch (e) {
      let x = e
      while (x && !x.type && (x.cause || x.originalError)) x = x.cause || x.originalError
      return (x && x.type) || `${e.name}: ${e.message}`
    }
    return 'no error'
  }
  assert.equal(await errorType(p.send({ topic: small, acks: -1, messages: [{ value: 'x'.repeat(20000) }] })),
    'MESSAGE_TOO_LARGE')
  assert.equal(await errorType(p.send({ topic: compacted, acks: -1, messages: [{ value: 'no key' }] })),
    'INVALID_RECORD')
  // Neither was written; what fits still goes through.
  const ok = await p.send({ topic: small, acks: -1, messages: [{ value: 'x'.repeat(5000) }] })
  assert.equal(String(ok[0].baseOffset), '0')
  const keyed = await p.send({ topic: compacted, acks: -1, messages: [{ key: 'k', value: 'keyed' }] })
  assert.equal(String(keyed[0].baseOffset), '0')
})

test('LogAppendTime topic stamps the broker time', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('appendtime')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1,
    configEntries: [{ name: 'message.timestamp.type', value: 'LogAppendTime' }] }] }), true)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const old = String(Date.now() - 30 * 24 * 3600 * 1000) // the producer's timestamps, replaced
  const before = Date.now()
  const acks = await p.send({ topic, acks: -1, compression: CompressionTypes.GZIP,
    messages: [{ value: 'a', timestamp: old }, { value: 'b', timestamp: old }] })
  const after = Date.now()
  const stamped = Number(acks[0].logAppendTime)
  assert.ok(stamped >= before - 1000 && stamped <= after + 1000, `logAppendTime ${acks[0].logAppendTime} is the broker's time`)
  const got = await readBack(t, kafka, [topic], 2)
  assert.deepEqual(got.map(r => r.timestamp), [String(stamped), String(stamped)], 'records carry the append time')
  const offsets = await admin.fetchTopicOffsetsByTimestamp(topic, Number(old) + 1000)
  assert.deepEqual(offsets.map(o => o.offset), ['0'], 'timestamp lookups use the append time')
})
