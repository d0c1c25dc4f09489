'use strict'
// Consuming with kafkajs group consumers (READ_COMMITTED, its default): from the beginning with
// commits, resuming at the committed offsets after a restart, manual commits, seek, long polling.
const assert = require('node:assert/strict')
const { test } = require('../lib/scenario')
const { brokerFor } = require('../lib/broker')
const u = require('../lib/util')

const T = { timeout: 120000 }

async function setup(t, partitions, n) {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('consume')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: partitions }] }), true)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const send = async (from, count) => {
    const messages = []
    for (let i = from; i < from + count; i++) messages.push({ key: `k${i}`, value: `v${i}` })
    return p.send({ topic, acks: -1, messages })
  }
  if (n) await send(0, n)
  return { broker, kafka, admin, topic, send }
}

async function committedTotal(admin, groupId, topic) {
  const [res] = await admin.fetchOffsets({ groupId, topics: [topic] })
  return res.partitions.reduce((s, p) => s + Math.max(0, Number(p.offset)), 0)
}

function assertExactlyOnce(got, values) {
  const want = [...values].sort()
  assert.deepEqual(got.map(r => r.value).sort(), want, 'each record exactly once')
  for (const [p, rs] of Object.entries(u.byPartition(got))) {
    const offs = rs.map(r => r.offset)
    assert.deepEqual(offs, [...offs].sort((x, y) => x - y), `partition ${p} in offset order`)
  }
}

const range = (a, b) => Array.from({ length: b - a }, (_, i) => `v${a + i}`)

test('group consumes from beginning and resumes at committed offsets after restart', T, async t => {
  const { kafka, admin, topic, send } = await setup(t, 3, 300)
  const groupId = u.unique('resume')
  const c1 = u.closing(t, u.consumer(kafka, groupId))
  await c1.connect()
  await c1.subscribe({ topics: [topic], fromBeginning: true })
  const got1 = await u.runRecording(c1) // auto-commit, kafkajs's default
  await u.waitFor('300 records', () => got1.length >= 300, 60000)
  await u.waitFor('commits at the log end', async () => (await committedTotal(admin, groupId, topic)) === 300, 30000)
  await c1.disconnect()
  assertExactlyOnce(got1, range(0, 300))
  const before = await admin.fetchOffsets({ groupId, topics: [topic] })
  const high = await admin.fetchTopicOffsets(topic)
  for (const p of before[0].partitions) {
    assert.equal(p.offset, high.find(h => h.partition === p.partition).high, `committed = high of ${p.partition}`)
  }

  await send(300, 150)
  const c2 = u.closing(t, u.consumer(kafka, groupId))
  await c2.connect()
  await c2.subscribe({ topics: [topic], fromBeginning: true }) // the commits win over fromBeginning
  const got2 = await u.runRecording(c2)
  await u.waitFor('150 new records', () => got2.length >= 150, 60000)
  await u.sleep(1500) // nothing already committed may come back
  assertExactlyOnce(got2, range(300, 450))
  for (const [p, rs] of Object.entries(u.byPartition(got2))) {
    assert.equal(String(rs[0].offset), before[0].partitions.find(x => x.partition === Number(p)).offset,
      `partition ${p} resumes at its committed offset`)
  }
  await u.waitFor('commits at the new log end', async () => (await committedTotal(admin, groupId, topic)) === 450, 30000)
})

test('manual commitOffsets with metadata and resume there', T, async t => {
  const { kafka, admin, topic } = await setup(t, 1, 100)
  const groupId = u.unique('manual')
  const c1 = u.closing(t, u.consumer(kafka, groupId))
  await c1.connect()
  await c1.subscribe({ topics: [topic], fromBeginning: true })
  const got1 = await u.runRecording(c1, { autoCommit: false })
  await u.waitFor('100 records', () => got1.length >= 100, 60000)
  await c1.commitOffsets([{ topic, partition: 0, offset: '40', metadata: 'kafkajs-was-here' }])
  await c1.disconnect()
  const [res] = await admin.fetchOffsets({ groupId, topics: [topic] })
  assert.deepEqual(res.partitions, [{ partition: 0, offset: '40', metadata: 'kafkajs-was-here' }])

  const c2 = u.closing(t, u.consumer(kafka, groupId))
  await c2.connect()
  await c2.subscribe({ topics: [topic], fromBeginning: true })
  const got2 = await u.runRecording(c2, { autoCommit: false })
  await u.waitFor('60 records', () => got2.length >= 60, 60000)
  await u.sleep(1000)
  assert.deepEqual(got2.map(r => r.offset), Array.from({ length: 60 }, (_, i) => 40 + i))
  assert.deepEqual(got2.map(r => r.value), range(40, 100))
})

test('new group without fromBeginning starts at the log end', T, async t => {
  const { kafka, topic, send } = await setup(t, 2, 50)
  const c = u.closing(t, u.consumer(kafka, u.unique('latest')))
  const joins = u.trackJoins(c)
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: false })
  const got = await u.runRecording(c)
  await u.waitFor('group join', () => joins.length > 0, 30000)
  await u.sleep(1500) // the consumer has fetched its starting offsets
  assert.equal(got.length, 0, 'nothing from before the group existed')
  await send(50, 20) // long polling: these arrive while the consumer waits
  await u.waitFor('20 live records', () => got.length >= 20, 30000)
  await u.sleep(500)
  assertExactlyOnce(got, range(50, 70))
})

test('seek rewinds a running consumer', T, async t => {
  const { kafka, topic } = await setup(t, 1, 50)
  const c = u.closing(t, u.consumer(kafka, u.unique('seek')))
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor('50 records', () => got.length >= 50, 60000)
  c.seek({ topic, partition: 0, offset: '10' })
  await u.waitFor('records again from offset 10', () => got.length >= 90, 30000)
  await u.sleep(1000)
  assert.equal(got.length, 90)
  assert.deepEqual(got.slice(50).map(r => r.offset), Array.from({ length: 40 }, (_, i) => 10 + i))
  c.seek({ topic, partition: 0, offset: '49' })
  await u.waitFor('the last record again', () => got.length >= 91, 30000)
  assert.equal(got[90].offset, 49)
  assert.equal(got[90].value, 'v49')
})

test('records larger than maxBytesPerPartition and maxBytes still arrive', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('big')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1,
    configEntries: [{ name: 'max.message.bytes', value: '4000000' }] }] }), true)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const big = n => `${n}:` + 'b'.repeat(1500000)
  for (let i = 0; i < 3; i++) await p.send({ topic, acks: -1, messages: [{ key: `k${i}`, value: big(i) }] })
  // A fetch returns at least the first whole batch, whatever the limits (KIP-74).
  const c = u.closing(t, u.consumer(kafka, u.unique('big'), { maxBytesPerPartition: 100000, maxBytes: 200000 }))
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor('3 big records', () => got.length >= 3, 60000)
  assert.deepEqual(got.map(r => r.offset), [0, 1, 2])
  for (let i = 0; i < 3; i++) assert.ok(got[i].value === big(i), `record ${i} whole`)
})

test('pause and resume a partition', T, async t => {
  const { kafka, topic, send } = await setup(t, 2, 0)
  const c = u.closing(t, u.consumer(kafka, u.unique('pause')))
  const joins = u.trackJoins(c)
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor('group join', () => joins.length > 0, 30000)
  c.pause([{ topic, partitions: [1] }])
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  await p.send({ topic, acks: -1, messages: [0, 1, 2, 3].map(i => ({ partition: i % 2, value: `p${i}` })) })
  await u.waitFor('partition 0 records', () => got.length >= 2, 30000)
  await u.sleep(1500)
  assert.deepEqual(got.map(r => [r.partition, r.value]), [[0, 'p0'], [0, 'p2']], 'nothing from the paused partition')
  c.resume([{ topic, partitions: [1] }])
  await u.waitFor('partition 1 records', () => got.length >= 4, 30000)
  assert.deepEqual(got.slice(2).map(r => [r.partition, r.value]), [[1, 'p1'], [1, 'p3']])
  assert.equal(typeof send, 'function')
})
