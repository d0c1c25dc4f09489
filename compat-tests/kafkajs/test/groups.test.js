'use strict'
// Two kafkajs consumers in one group: they split the partitions (RoundRobinAssigner, kafkajs's
// default), and when one leaves (LeaveGroup on disconnect) the other takes over all of them at
// the committed offsets.
const assert = require('node:assert/strict')
const { test } = require('../lib/scenario')
const { brokerFor, onClose } = require('../lib/broker')
const u = require('../lib/util')

const T = { timeout: 150000 }

const partsOf = (join, topic) => (join && join.assignment[topic]) || []

test('two consumers split partitions and rebalance when one leaves', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('split')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 4 }] }), true)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const send = async (from, count) => {
    const messages = []
    for (let i = from; i < from + count; i++) messages.push({ partition: i % 4, key: `k${i}`, value: `v${i}` })
    await p.send({ topic, acks: -1, messages })
  }
  const groupId = u.unique('pair')
  const c1 = u.closing(t, u.consumer(kafka, groupId))
  const c2 = u.closing(t, u.consumer(kafka, groupId))
  const j1 = u.trackJoins(c1)
  const j2 = u.trackJoins(c2)
  for (const c of [c1, c2]) {
    await c.connect()
    await c.subscribe({ topics: [topic], fromBeginning: true })
  }
  const got1 = await u.runRecording(c1)
  await u.waitFor('c1 joined', () => j1.length > 0, 30000)
  const got2 = await u.runRecording(c2)
  await u.waitFor('c1 and c2 share the 4 partitions', () => {
    const a = partsOf(j1[j1.length - 1], topic)
    const b = partsOf(j2[j2.length - 1], topic)
    return a.length === 2 && b.length === 2 && new Set([...a, ...b]).size === 4
  }, 60000)
  const a1 = partsOf(j1[j1.length - 1], topic)
  const a2 = partsOf(j2[j2.length - 1], topic)

  await send(0, 200)
  await u.waitFor('200 records between them', () => got1.length + got2.length >= 200, 60000)
  await u.sleep(1000)
  assert.equal(got1.length + got2.length, 200, 'each record once')
  for (const r of got1) assert.ok(a1.includes(r.partition), `c1 got ${r.partition}, assigned ${a1}`)
  for (const r of got2) assert.ok(a2.includes(r.partition), `c2 got ${r.partition}, assigned ${a2}`)
  assert.deepEqual([...got1, ...got2].map(r => r.value).sort(),
    Array.from({ length: 200 }, (_, i) => `v${i}`).sort())

  const described = await admin.describeGroups([groupId])
  assert.equal(described.groups[0].state, 'Stable')
  assert.equal(described.groups[0].members.length, 2)

  const before = j1.length
  await c2.disconnect() // commits, then LeaveGroup
  await u.waitFor('c1 owns all 4 partitions', () =>
    j1.length > before && partsOf(j1[j1.length - 1], topic).length === 4, 60000)
  const n1 = got1.length
  await send(200, 200)
  await u.waitFor('200 more records at c1', () => got1.length - n1 >= 200, 60000)
  await u.sleep(1000)
  const later = got1.slice(n1)
  assert.deepEqual(later.map(r => r.value).sort(), Array.from({ length: 200 }, (_, i) => `v${200 + i}`).sort(),
    'c1 resumes every partition at the committed offsets: the new records, each once')
  const after = await admin.describeGroups([groupId])
  assert.equal(after.groups[0].state, 'Stable')
  assert.equal(after.groups[0].members.length, 1)
})

test('a member that stops heartbeating loses its partitions after the session timeout', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('stall')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 4 }] }), true)
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const groupId = u.unique('stall')
  // 6 s is the least session timeout either broker accepts (group.min.session.timeout.ms).
  const opts = { sessionTimeout: 6000, heartbeatInterval: 500 }
  const healthy = u.closing(t, u.consumer(kafka, groupId, opts))
  const stalled = u.closing(t, u.consumer(kafka, groupId, opts))
  const jh = u.trackJoins(healthy)
  const js = u.trackJoins(stalled)
  for (const c of [healthy, stalled]) {
    await c.connect()
    await c.subscribe({ topics: [topic], fromBeginning: true })
  }
  const gotHealthy = await u.runRecording(healthy)
  await u.waitFor('the first member joined', () => jh.length > 0, 30000)
  let release
  const blocked = new Promise(resolve => { release = resolve })
  let stalledAt = null
  await stalled.run({
    eachMessage: async () => {
      if (stalledAt === null) stalledAt = Date.now()
      await blocked // no heartbeat while a message is being processed
    },
  })
  onClose(t, () => release()) // closers run newest first: before the members disconnect
  await u.waitFor('two members with 2 partitions each', () =>
    partsOf(jh[jh.length - 1], topic).length === 2 && partsOf(js[js.length - 1], topic).length === 2, 60000)
  const mine = partsOf(js[js.length - 1], topic)
  const joinsBefore = jh.length
  await p.send({ topic, acks: -1, messages: [0, 1, 2, 3].map(i => ({ partition: i, value: `r${i}` })) })
  await u.waitFor('the stalled member is stuck in a message', () => stalledAt !== null, 30000)
  await u.waitFor('the healthy member owns all 4 partitions', () =>
    jh.length > joinsBefore && partsOf(jh[jh.length - 1], topic).length === 4, 40000)
  const waited = (Date.now() - stalledAt) / 1000
  assert.ok(waited >= 5, `taken over after ${waited} s: not before the 6 s session timeout`)
  // The records of the stalled member's partitions were never committed: the healthy one gets them.
  await u.waitFor('the stalled partitions\' records', () =>
    mine.every(part => gotHealthy.some(r => r.partition === part)), 30000)
  const described = await admin.describeGroups([groupId])
  assert.equal(described.groups[0].members.length, 1, 'the stalled member was removed')
  release()
})
