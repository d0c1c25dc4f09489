'use strict'
// kafkajs over SASL_PLAINTEXT: PLAIN users from the listener's JAAS config, and SCRAM-SHA-256
// and SCRAM-SHA-512 users made with Kafka's own kafka-configs (AlterUserScramCredentials). Each
// mechanism's user creates a topic, produces and consumes it back in a group; a wrong password
// fails with kafkajs's SASL authentication error.
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { promisify } = require('node:util')
const { test } = require('../lib/scenario')
const { brokerFor } = require('../lib/broker')
const u = require('../lib/util')

const T = { timeout: 150000 }
const RUN_CLASS = path.resolve(__dirname, '..', '..', 'kafka', 'run-class.sh')
const PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required ' +
  'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
const SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
// The listener named PLAINTEXT speaks SASL_PLAINTEXT (Kafka's controller listener stays
// PLAINTEXT), with PLAIN and both SCRAM mechanisms.
const SASL = {
  'listener.security.protocol.map': 'PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT',
  'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
  'sasl.mechanism.inter.broker.protocol': 'PLAIN',
  'listener.name.plaintext.plain.sasl.jaas.config': PLAIN_JAAS,
  'listener.name.plaintext.scram-sha-256.sasl.jaas.config': SCRAM_JAAS,
  'listener.name.plaintext.scram-sha-512.sasl.jaas.config': SCRAM_JAAS,
}

// A topic made, 20 records produced and read back by a new group, all as `sasl`'s user.
async function roundTrip(t, broker, sasl) {
  const kafka = u.client(broker, 'kafkajs-sasl', 8, sasl)
  const admin = u.closing(t, kafka.admin())
  await admin.connect()
  const topic = u.unique(`sasl-${sasl.mechanism}`)
  assert.ok(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }))
  const producer = u.closing(t, u.producer(kafka))
  await producer.connect()
  const messages = Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}` }))
  await producer.send({ topic, acks: -1, messages })
  const consumer = u.closing(t, u.consumer(kafka, u.unique('sasl-grp')))
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = await u.runRecording(consumer)
  await u.waitFor('20 records', () => got.length >= 20, 60000)
  assert.deepEqual(got.map(r => r.value).sort(), messages.map(m => m.value).sort())
  await consumer.disconnect()
  await producer.disconnect()
  await admin.disconnect()
}

// Connecting with a wrong password fails with kafkajs's SASL authentication error.
async function refused(t, broker, sasl) {
  const kafka = u.client(broker, 'kafkajs-sasl', 0, sasl)
  const admin = u.closing(t, kafka.admin())
  await assert.rejects(admin.connect(), e => {
    assert.equal(e.name, 'KafkaJSSASLAuthenticationError', `${e.name}: ${e.message}`)
    return true
  })
}

test('sasl plain produce and consume; a wrong password is refused', T, async t => {
  const broker = await brokerFor(t, SASL)
  await roundTrip(t, broker, { mechanism: 'plain', username: 'alice', password: 'alice-secret' })
  await refused(t, broker, { mechanism: 'plain', username: 'alice', password: 'wrong' })
  await refused(t, broker, { mechanism: 'plain', username: 'nobody', password: 'alice-secret' })
})

test('sasl scram-sha-256 and scram-sha-512 users made with kafka-configs produce and consume', T, async t => {
  const broker = await brokerFor(t, SASL)
  const admin = path.join(broker.root, `${u.unique('admin')}.properties`)
  fs.writeFileSync(admin, 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n' +
    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ' +
    'username="admin" password="admin-secret";\n')
  // One user per mechanism: like Kafka, sluice refuses to alter one user's credentials twice
  // in one request (DUPLICATE_RESOURCE), which is what two mechanisms in one --add-config send.
  for (const [mechanism, config] of [['scram-sha-256', 'SCRAM-SHA-256=[iterations=8192,password=carol-secret]'],
    ['scram-sha-512', 'SCRAM-SHA-512=[password=carol-secret]']]) {
    const user = u.unique('carol')
    await promisify(execFile)(RUN_CLASS, ['org.apache.kafka.tools.ConfigCommand',
      '--bootstrap-server', broker.bootstrap, '--command-config', admin, '--alter',
      '--entity-type', 'users', '--entity-name', user, '--add-config', config], { timeout: 120000 })
    // Kafka applies the credential through its metadata log: wait until it logs in.
    await u.waitFor(`${mechanism} login`, async () => {
      const probe = u.client(broker, 'kafkajs-sasl', 0, { mechanism, username: user, password: 'carol-secret' }).admin()
      try {
        await probe.connect()
        return true
      } catch (e) {
        return false
      } finally {
        await probe.disconnect().catch(() => {})
      }
    }, 30000, 500)
    await roundTrip(t, broker, { mechanism, username: user, password: 'carol-secret' })
    await refused(t, broker, { mechanism, username: user, password: 'wrong' })
  }
})
