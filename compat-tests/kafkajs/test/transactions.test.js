'use strict'
// kafkajs transactions (issue 12): a transactional producer's commits and aborts as a
// read_committed group consumer (kafkajs's default) and a readUncommitted one see them, and a
// consume-transform-produce loop that sends its input offsets in each transaction (sendOffsets).
const assert = require('node:assert/strict')
const { test } = require('../lib/scenario')
const { brokerFor } = require('../lib/broker')
const u = require('../lib/util')

const T = { timeout: 120000 }

async function createTopic(admin, topic, numPartitions) {
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions }], waitForLeaders: true }), true)
}

function txnProducer(kafka, transactionalId) {
  return u.producer(kafka, { transactionalId, idempotent: true, maxInFlightRequests: 1 })
}

// Every record of `topics` from the beginning with a fresh group, until `expected` arrived and
// then half a second more: "partition/offset=value" strings sorted by partition and offset.
async function readAll(t, kafka, topic, expected, opts = {}) {
  const c = u.closing(t, u.consumer(kafka, u.unique('txn-read'), opts))
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor(`${expected} records of ${topic}`, () => got.length >= expected, 60000)
  await u.sleep(1000) // nothing beyond them may arrive
  await c.disconnect()
  return got.map(r => `${r.partition}/${r.offset}=${r.value}`).sort(byOffset)
}

function byOffset(a, b) {
  const [pa, oa] = a.split('=')[0].split('/').map(Number)
  const [pb, ob] = b.split('=')[0].split('/').map(Number)
  return pa - pb || oa - ob
}

// "partition/offset=value" of each record a send acknowledged (kafkajs acks one baseOffset per
// partition; the records of one partition follow it in order).
function acked(acks, messages) {
  const next = {}
  for (const a of acks) next[a.partition] = Number(a.baseOffset)
  return messages.map(m => `${m.partition}/${next[m.partition]++}=${m.value}`)
}

test('transaction commit and abort as read_committed and read_uncommitted consumers see them', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('txn')
  await createTopic(admin, topic, 2)
  const p = u.closing(t, txnProducer(kafka, u.unique('kafkajs-txn')))
  await p.connect()
  const committed = []
  const all = []
  for (const [i, outcome] of ['commit', 'abort', 'commit', 'abort', 'commit'].entries()) {
    const txn = await p.transaction()
    const messages = []
    for (let j = 0; j < 8; j++) messages.push({ partition: j % 2, value: `t${i}-${outcome}-${j}` })
    // One send per partition, so each ack covers exactly the records of one partition.
    const sent = []
    for (const part of [0, 1]) {
      const ms = messages.filter(m => m.partition === part)
      sent.push(...acked(await txn.send({ topic, acks: -1, messages: ms }), ms))
    }
    await txn[outcome]()
    all.push(...sent)
    if (outcome === 'commit') committed.push(...sent)
  }
  assert.deepEqual(await readAll(t, kafka, topic, committed.length), committed.sort(byOffset), 'read_committed')
  assert.deepEqual(await readAll(t, kafka, topic, all.length, { readUncommitted: true }), all.sort(byOffset),
    'read_uncommitted')
  // Each transaction left a marker after its records in both partitions: 5 markers each.
  const offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, Number(o.high)]).sort(), [[0, 25], [1, 25]])
})

test('consume-transform-produce with sendOffsets in the transaction', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const src = u.unique('ctp-in')
  const dst = u.unique('ctp-out')
  const groupId = u.unique('ctp-group')
  await createTopic(admin, src, 2)
  await createTopic(admin, dst, 2)
  const n = 200
  const plain = u.closing(t, u.producer(kafka))
  await plain.connect()
  for (let i = 0; i < n; i += 50) {
    const messages = []
    for (let j = i; j < i + 50; j++) messages.push({ partition: j % 2, value: `in-${j}` })
    await plain.send({ topic: src, acks: -1, messages })
  }
  const p = u.closing(t, txnProducer(kafka, u.unique('kafkajs-ctp')))
  await p.connect()
  const c = u.closing(t, u.consumer(kafka, groupId, { maxBytesPerPartition: 400 }))
  await c.connect()
  await c.subscribe({ topics: [src], fromBeginning: true })
  let transactions = 0
  let aborted = 0
  let failure = null
  let retried = 0
  await c.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, isStale, resolveOffset }) => {
      if (isStale() || batch.messages.length === 0) return
      let txn = null
      try {
        txn = await p.transaction()
        await txn.send({ topic: dst, acks: -1,
          messages: batch.messages.map(m => ({ partition: batch.partition, value: `out-${m.value}` })) })
        await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: src,
          partitions: [{ partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) }] }] })
        if (transactions++ % 3 === 1) { // abort, and read the batch again
          await txn.abort()
          aborted++
          c.seek({ topic: src, partition: batch.partition, offset: batch.firstOffset() })
        } else {
          await txn.commit()
          resolveOffset(batch.lastOffset()) // the consumer fetches on from there
        }
      } catch (e) {
        // A retriable error (Kafka answers NOT_COORDINATOR while it loads a new offsets
        // partition): abort and do the batch again, as an application would.
        if (!e.retriable || retried++ > 5) {
          failure = failure || e
          return
        }
        if (txn && txn.isActive()) await txn.abort().catch(() => {})
        c.seek({ topic: src, partition: batch.partition, offset: batch.firstOffset() })
      }
    },
  })
  let seen = null
  await u.waitFor('the group to commit every input offset', async () => {
    if (failure) throw failure
    const [o] = await admin.fetchOffsets({ groupId, topics: [src] })
    seen = { transactions, aborted, committed: o.partitions }
    return o.partitions.every(x => Number(x.offset) === n / 2) && o.partitions.length === 2
  }, 90000, 500).catch(e => { throw new Error(`${e.message}; ${JSON.stringify(seen)}`) })
  await c.disconnect()
  assert.ok(aborted > 0, 'no transaction was aborted')
  const got = await readAll(t, kafka, dst, n)
  for (const part of [0, 1]) {
    const want = []
    for (let i = part; i < n; i += 2) want.push(`out-in-${i}`)
    assert.deepEqual(got.filter(r => r.startsWith(`${part}/`)).map(r => r.split('=')[1]), want,
      `output partition ${part}: each input exactly once, in order`)
  }
  const raw = await readAll(t, kafka, dst, n + 1, { readUncommitted: true })
  assert.ok(raw.length > n, 'read_uncommitted also sees the aborted output')
})
