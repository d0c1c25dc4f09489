'use strict'
// kafkajs's admin client: topics, partitions, offsets, groups, configs, DeleteRecords.
const assert = require('node:assert/strict')
const { test } = require('../lib/scenario')
const { ConfigResourceTypes } = require('kafkajs')
const { brokerFor } = require('../lib/broker')
const u = require('../lib/util')

const T = { timeout: 120000 }

async function connectAdmin(t) {
  const broker = await brokerFor(t)
  const kafka = u.client(broker)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  return { broker, kafka, admin }
}

async function produce(t, kafka, topic, messages) {
  const p = u.closing(t, u.producer(kafka))
  await p.connect()
  const acks = await p.send({ topic, acks: -1, messages })
  await p.disconnect()
  return acks
}

// A group that consumed `topic` and committed `n` records, then left; its commits stay.
async function consumedGroup(t, kafka, admin, topic, n) {
  const groupId = u.unique('grp')
  const c = u.closing(t, u.consumer(kafka, groupId))
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor(`${n} records`, () => got.length >= n, 60000)
  await u.waitFor('commits at the log end', async () => {
    const [res] = await admin.fetchOffsets({ groupId, topics: [topic] })
    return res.partitions.reduce((s, p) => s + Math.max(0, Number(p.offset)), 0) === n
  }, 30000)
  await c.disconnect()
  return groupId
}

// Every error type in a kafkajs error: its own, its causes', and the per-item ones of the
// aggregate errors (topics, partitions, groups).
function errorTypes(e, out = []) {
  if (!e || typeof e !== 'object' || out.length > 50) return out
  if (e.type) out.push(e.type)
  for (const k of ['cause', 'originalError', 'error']) if (e[k] && e[k] !== e) errorTypes(e[k], out)
  for (const k of ['errors', 'partitions', 'groups']) {
    if (Array.isArray(e[k])) for (const x of e[k]) errorTypes(x, out)
  }
  return out
}

async function rejectsWith(promise, type, what) {
  await assert.rejects(promise, e => {
    const types = errorTypes(e)
    assert.ok(types.includes(type) || String(e.message).includes(type),
      `${what}: expected ${type}, got ${e.name}: ${e.message} ${JSON.stringify(types)}`)
    return true
  })
}

test('admin createTopics listTopics fetchTopicMetadata', T, async t => {
  const { admin } = await connectAdmin(t)
  const a = u.unique('adm-a')
  const b = u.unique('adm-b')
  assert.equal(await admin.createTopics({ topics: [
    { topic: a, numPartitions: 3 },
    { topic: b, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] },
  ] }), true)
  assert.equal(await admin.createTopics({ topics: [{ topic: a, numPartitions: 3 }] }), false, 'already exists')
  const v = u.unique('adm-validate')
  // waitForLeaders would wait for a topic that validateOnly does not create.
  assert.equal(await admin.createTopics({ validateOnly: true, waitForLeaders: false,
    topics: [{ topic: v, numPartitions: 2 }] }), true)
  const names = await admin.listTopics()
  assert.ok(names.includes(a) && names.includes(b), `listTopics: ${names}`)
  assert.ok(!names.includes(v), 'validateOnly created nothing')
  const md = await admin.fetchTopicMetadata({ topics: [a, b] })
  const byName = Object.fromEntries(md.topics.map(x => [x.name, x]))
  assert.deepEqual(byName[a].partitions.map(p => p.partitionId).sort(), [0, 1, 2])
  assert.equal(byName[b].partitions.length, 1)
  for (const p of [...byName[a].partitions, ...byName[b].partitions]) {
    assert.equal(p.partitionErrorCode, 0)
    assert.ok(p.leader >= 0, 'has a leader')
    assert.deepEqual(p.replicas, [p.leader])
    assert.deepEqual(p.isr, [p.leader])
  }
  const cfg = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: b, configNames: ['retention.ms'] }] })
  assert.equal(cfg.resources[0].configEntries[0].configValue, '3600000', 'configEntries applied at creation')
  await rejectsWith(admin.createTopics({ topics: [{ topic: u.unique('bad'), numPartitions: 1, replicationFactor: 3 }] }),
    'INVALID_REPLICATION_FACTOR', 'replication factor above the broker count')
  const all = await admin.fetchTopicMetadata()
  assert.ok(all.topics.some(x => x.name === a), 'fetchTopicMetadata() lists every topic')
})

test('admin createPartitions', T, async t => {
  const { kafka, admin } = await connectAdmin(t)
  const topic = u.unique('grow')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), true)
  await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
  await u.waitFor('5 partitions', async () =>
    (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length === 5, 15000)
  const acks = await produce(t, kafka, topic, [{ partition: 4, value: 'on the new partition' }])
  assert.equal(acks[0].partition, 4)
  assert.equal(String(acks[0].baseOffset), '0')
  const offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, o.high]).sort(), [[0, '0'], [1, '0'], [2, '0'], [3, '0'], [4, '1']])
  await rejectsWith(admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] }), 'INVALID_PARTITIONS', 'shrinking')
  await rejectsWith(admin.createPartitions({ topicPartitions: [{ topic: u.unique('none'), count: 3 }] }),
    'UNKNOWN_TOPIC_OR_PARTITION', 'missing topic')
})

test('admin deleteTopics', T, async t => {
  const { broker, kafka, admin } = await connectAdmin(t)
  const topic = u.unique('doomed')
  const keep = u.unique('kept')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }, { topic: keep }] }), true)
  await produce(t, kafka, topic, [{ value: 'x' }])
  await admin.deleteTopics({ topics: [topic] })
  await u.waitFor('topic gone from listTopics', async () => !(await admin.listTopics()).includes(topic), 15000)
  assert.ok((await admin.listTopics()).includes(keep))
  // kafkajs retries this error; one retry is enough to see it.
  const impatient = u.closing(t, u.client(broker, 'kafkajs-compat', 1).admin())
  await impatient.connect()
  await rejectsWith(impatient.deleteTopics({ topics: [u.unique('never')] }), 'UNKNOWN_TOPIC_OR_PARTITION', 'missing topic')
  // The name can be used again, empty.
  await u.waitFor('re-created', async () => {
    try {
      return await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] })
    } catch (e) {
      return false
    }
  }, 15000)
  const offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, o.low, o.high]), [[0, '0', '0']])
})

test('admin fetchTopicOffsets and fetchTopicOffsetsByTimestamp', T, async t => {
  const { kafka, admin } = await connectAdmin(t)
  const topic = u.unique('offsets')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), true)
  const t0 = Date.now() - 600000
  const messages = []
  for (let i = 0; i < 30; i++) messages.push({ partition: i < 20 ? 0 : 1, value: `v${i}`, timestamp: String(t0 + i * 1000) })
  await produce(t, kafka, topic, messages)
  const offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, o.offset, o.high, o.low]).sort(),
    [[0, '20', '20', '0'], [1, '10', '10', '0']])
  // Partition 0 holds t0..t0+19s, partition 1 t0+20s..t0+29s.
  const at = async ts => Object.fromEntries((await admin.fetchTopicOffsetsByTimestamp(topic, ts)).map(o => [o.partition, o.offset]))
  assert.deepEqual(await at(t0 - 1000), { 0: '0', 1: '0' }, 'before every record')
  assert.deepEqual(await at(t0 + 5000), { 0: '5', 1: '0' }, 'exactly on a record')
  assert.deepEqual(await at(t0 + 22500), { 0: '20', 1: '3' }, 'between records; after the end of 0')
  assert.deepEqual(await at(t0 + 60000), { 0: '20', 1: '10' }, 'after every record: the end')
})

test('admin fetchOffsets resetOffsets setOffsets', T, async t => {
  const { kafka, admin } = await connectAdmin(t)
  const topic = u.unique('commits')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), true)
  const messages = []
  for (let i = 0; i < 40; i++) messages.push({ partition: i % 2, value: `v${i}` })
  await produce(t, kafka, topic, messages)
  const groupId = await consumedGroup(t, kafka, admin, topic, 40)
  const offsetsOf = async () => Object.fromEntries((await admin.fetchOffsets({ groupId, topics: [topic] }))[0]
    .partitions.map(p => [p.partition, p.offset]))
  assert.deepEqual(await offsetsOf(), { 0: '20', 1: '20' })
  const none = await admin.fetchOffsets({ groupId: u.unique('nobody'), topics: [topic] })
  assert.deepEqual(none[0].partitions.map(p => p.offset), ['-1', '-1'], 'a group without commits')

  await admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '7' }, { partition: 1, offset: '13' }] })
  assert.deepEqual(await offsetsOf(), { 0: '7', 1: '13' })
  await admin.resetOffsets({ groupId, topic, earliest: true })
  const reset = await admin.fetchOffsets({ groupId, topics: [topic], resolveOffsets: true })
  assert.deepEqual(reset[0].partitions.map(p => [p.partition, p.offset]).sort(), [[0, '0'], [1, '0']])
  assert.deepEqual(await offsetsOf(), { 0: '0', 1: '0' }, 'resolveOffsets committed the resolved offsets')

  // A member of the group then starts at the offsets set.
  await admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '18' }, { partition: 1, offset: '19' }] })
  const c = u.closing(t, u.consumer(kafka, groupId))
  await c.connect()
  await c.subscribe({ topics: [topic] })
  const got = await u.runRecording(c)
  await u.waitFor('3 records', () => got.length >= 3, 60000)
  await u.sleep(1000)
  assert.deepEqual(got.map(r => [r.partition, r.offset]).sort(), [[0, 18], [0, 19], [1, 19]])
  await rejectsWith(admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '0' }] }),
    'must have no running instances', 'setOffsets with a live member')
})

test('admin describeGroups listGroups deleteGroups', T, async t => {
  const { kafka, admin } = await connectAdmin(t)
  const topic = u.unique('groups')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), true)
  await produce(t, kafka, topic, [{ partition: 0, value: 'a' }, { partition: 1, value: 'b' }])
  const groupId = u.unique('described')
  const c = u.closing(t, u.consumer(kafka, groupId))
  const joins = u.trackJoins(c)
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor('2 records', () => got.length >= 2 && joins.length > 0, 60000)

  const { groups } = await admin.describeGroups([groupId])
  assert.equal(groups.length, 1)
  const g = groups[0]
  assert.equal(g.groupId, groupId)
  assert.equal(g.errorCode, 0)
  assert.equal(g.state, 'Stable')
  assert.equal(g.protocolType, 'consumer')
  assert.equal(g.protocol, 'RoundRobinAssigner')
  assert.equal(g.members.length, 1)
  assert.equal(g.members[0].memberId, joins[joins.length - 1].memberId)
  assert.equal(g.members[0].clientId, 'kafkajs-compat')
  assert.ok(g.members[0].memberAssignment.length > 0, 'the assignment bytes')
  assert.ok(g.members[0].memberMetadata.length > 0, 'the subscription bytes')

  const listed = await admin.listGroups()
  assert.deepEqual(listed.groups.filter(x => x.groupId === groupId), [{ groupId, protocolType: 'consumer' }])
  await rejectsWith(admin.deleteGroups([groupId]), 'NON_EMPTY_GROUP', 'deleting a group with a member')

  await c.disconnect()
  await u.waitFor('group empty', async () => (await admin.describeGroups([groupId])).groups[0].state === 'Empty', 15000)
  const deleted = await admin.deleteGroups([groupId])
  assert.deepEqual(deleted.map(x => [x.groupId, x.errorCode]), [[groupId, 0]])
  const after = (await admin.describeGroups([groupId])).groups[0]
  assert.equal(after.state, 'Dead')
  assert.deepEqual(after.members, [])
  assert.ok(!(await admin.listGroups()).groups.some(x => x.groupId === groupId), 'gone from listGroups')
  const [res] = await admin.fetchOffsets({ groupId, topics: [topic] })
  assert.deepEqual(res.partitions.map(p => p.offset), ['-1', '-1'], 'its commits are gone')
  await rejectsWith(admin.deleteGroups([u.unique('never')]), 'GROUP_ID_NOT_FOUND', 'a group that never existed')
})

test('admin describeConfigs alterConfigs', T, async t => {
  const { admin } = await connectAdmin(t)
  const topic = u.unique('configs')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] }), true)
  const describe = async (configNames) => {
    const res = await admin.describeConfigs({ includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames }] })
    assert.equal(res.resources[0].errorCode, 0)
    return Object.fromEntries(res.resources[0].configEntries.map(e => [e.configName, e]))
  }
  const all = await describe(undefined)
  for (const name of ['retention.ms', 'cleanup.policy', 'segment.bytes', 'max.message.bytes', 'min.insync.replicas']) {
    assert.ok(all[name], `describeConfigs lists ${name}`)
  }
  assert.equal(all['retention.ms'].configValue, '604800000')
  assert.equal(all['retention.ms'].isDefault, true)
  assert.equal(all['cleanup.policy'].configValue, 'delete')
  assert.equal(all['retention.ms'].readOnly, false)

  await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: [{ name: 'retention.ms', value: '3600000' }, { name: 'max.message.bytes', value: '2000000' }] }] })
  // Kafka applies config changes through its metadata log, a moment after it answers.
  const settled = (want) => u.waitFor(`configs ${JSON.stringify(want)}`, async () => {
    const got = await describe(Object.keys(want))
    return Object.entries(want).every(([k, v]) => got[k].configValue === v) && got
  }, 15000)
  let now = await settled({ 'retention.ms': '3600000', 'max.message.bytes': '2000000' })
  assert.equal(now['retention.ms'].configValue, '3600000')
  assert.equal(now['retention.ms'].isDefault, false)
  assert.equal(now['max.message.bytes'].configValue, '2000000')
  // AlterConfigs (not the incremental one) replaces the whole set: what it leaves out goes back
  // to its default.
  await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: [{ name: 'retention.ms', value: '7200000' }] }] })
  now = await settled({ 'retention.ms': '7200000', 'max.message.bytes': '1048588' })
  assert.equal(now['retention.ms'].configValue, '7200000')
  assert.equal(now['max.message.bytes'].configValue, '1048588')
  assert.equal(now['max.message.bytes'].isDefault, true)
  // validateOnly changes nothing; a bad value is refused.
  await admin.alterConfigs({ validateOnly: true, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: [{ name: 'retention.ms', value: '1' }] }] })
  assert.equal((await describe(['retention.ms']))['retention.ms'].configValue, '7200000')
  await rejectsWith(admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: [{ name: 'cleanup.policy', value: 'sideways' }] }] }), 'INVALID_CONFIG', 'a bad value')

  // With synonyms (DescribeConfigs v1+): the topic's value first, then the broker default.
  const syn = await admin.describeConfigs({ includeSynonyms: true,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }] })
  const entry = syn.resources[0].configEntries[0]
  assert.equal(entry.configName, 'retention.ms')
  assert.ok(entry.configSynonyms.length >= 1, 'synonyms listed')
  assert.deepEqual([entry.configSynonyms[0].configName, entry.configSynonyms[0].configValue],
    ['retention.ms', '7200000'])
  assert.equal(entry.configSynonyms[0].configSource, 1, 'DYNAMIC_TOPIC_CONFIG')

  // The broker's own configs, by node id.
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  const nodeId = String(md.topics[0].partitions[0].leader)
  const broker = await admin.describeConfigs({ includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.BROKER, name: nodeId, configNames: ['num.partitions', 'auto.create.topics.enable'] }] })
  const bcfg = Object.fromEntries(broker.resources[0].configEntries.map(e => [e.configName, e.configValue]))
  assert.deepEqual(bcfg, { 'num.partitions': '1', 'auto.create.topics.enable': 'true' })
})

test('admin deleteTopicRecords', T, async t => {
  const { kafka, admin } = await connectAdmin(t)
  const topic = u.unique('trim')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), true)
  const messages = []
  for (let i = 0; i < 100; i++) messages.push({ partition: i % 2, value: `v${i}` })
  await produce(t, kafka, topic, messages)
  // kafkajs looks the leaders up in its metadata cache before it fetches any: load it first.
  await admin.fetchTopicMetadata({ topics: [topic] })
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '30' }, { partition: 1, offset: '-1' }] })
  const offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, o.low, o.high]).sort(), [[0, '30', '50'], [1, '50', '50']])
  const c = u.closing(t, u.consumer(kafka, u.unique('after-trim')))
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(c)
  await u.waitFor('20 records', () => got.length >= 20, 60000)
  await u.sleep(1000)
  assert.deepEqual(got.map(r => [r.partition, r.offset]), Array.from({ length: 20 }, (_, i) => [0, 30 + i]))
  assert.equal(got[0].value, 'v60')
  await rejectsWith(admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '51' }] }),
    'OFFSET_OUT_OF_RANGE', 'an offset beyond the end')
})

test('admin describeCluster', T, async t => {
  const { broker, admin } = await connectAdmin(t)
  const c = await admin.describeCluster()
  assert.equal(c.brokers.length, 1)
  assert.equal(c.brokers[0].host, '127.0.0.1')
  assert.equal(c.brokers[0].port, broker.port)
  assert.equal(c.controller, c.brokers[0].nodeId)
  assert.ok(typeof c.clusterId === 'string' && c.clusterId.length > 0, `clusterId ${c.clusterId}`)
})

test('admin error codes', T, async t => {
  const broker = await brokerFor(t)
  const kafka = u.client(broker, 'kafkajs-compat', 1) // these errors are final: one retry is enough
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique('errors')
  // No partition count: the broker's num.partitions (1 on both brokers here).
  assert.equal(await admin.createTopics({ topics: [{ topic }] }), true)
  assert.equal((await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length, 1)
  const create = ({ want, ...spec }) => rejectsWith(admin.createTopics({ topics: [spec] }), want, spec.topic.slice(0, 40))
  await create({ topic: 'bad name!', want: 'INVALID_TOPIC_EXCEPTION' })
  await create({ topic: 'x'.repeat(250), want: 'INVALID_TOPIC_EXCEPTION' })
  await create({ topic: u.unique('zero'), numPartitions: 0, want: 'INVALID_PARTITIONS' })
  await create({ topic: u.unique('cfg'), configEntries: [{ name: 'retention.ms', value: 'abc' }], want: 'INVALID_CONFIG' })
  await create({ topic: u.unique('cfg'), configEntries: [{ name: 'no.such.config', value: '1' }], want: 'INVALID_CONFIG' })
  const missing = u.unique('missing')
  await rejectsWith(admin.fetchTopicMetadata({ topics: [missing] }), 'UNKNOWN_TOPIC_OR_PARTITION', 'metadata of a missing topic')
  await rejectsWith(admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: missing }] }),
    'UNKNOWN_TOPIC_OR_PARTITION', 'configs of a missing topic')
  await rejectsWith(admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: missing,
    configEntries: [{ name: 'retention.ms', value: '1000' }] }] }), 'UNKNOWN_TOPIC_OR_PARTITION', 'altering a missing topic')
  await rejectsWith(admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: [{ name: 'no.such.config', value: '1' }] }] }), 'INVALID_CONFIG', 'an unknown config name')
  await rejectsWith(admin.createPartitions({ topicPartitions: [{ topic, count: 1 }] }), 'INVALID_PARTITIONS', 'the same count')
  const names = await admin.listTopics()
  assert.ok(names.includes(topic) && !names.includes(missing), 'none of the refused topics exists')
  assert.ok(!names.some(n => n.startsWith('x'.repeat(20)) || n === 'bad name!'))
})
