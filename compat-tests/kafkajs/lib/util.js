'use strict'
// Helpers shared by the scenarios: clients, unique names, deadlines, consumers that record.
const crypto = require('node:crypto')
const { Kafka, logLevel, Partitioners } = require('kafkajs')
const { sleep, onClose } = require('./broker')

const LOG_LEVELS = { nothing: logLevel.NOTHING, error: logLevel.ERROR, warn: logLevel.WARN,
  info: logLevel.INFO, debug: logLevel.DEBUG }

function unique(prefix) {
  return `${prefix}-${crypto.randomBytes(4).toString('hex')}`
}

// A kafkajs client with its defaults, except a quicker retry and quiet logs (KAFKAJS_LOG=debug
// to see them); `sasl` as kafkajs takes it ({mechanism, username, password}).
function client(broker, clientId = 'kafkajs-compat', retries = 8, sasl = undefined) {
  return new Kafka({
    clientId,
    brokers: [broker.bootstrap],
    sasl,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { initialRetryTime: 100, retries },
    logLevel: LOG_LEVELS[process.env.KAFKAJS_LOG || 'nothing'] ?? logLevel.NOTHING,
  })
}

// kafkajs 2's default partitioner (murmur2, as the Java client), named so it does not warn.
function producer(kafka, opts = {}) {
  return kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false, ...opts })
}

// Group settings that make rebalances take seconds, not a minute; the rest are kafkajs defaults
// (READ_COMMITTED, RoundRobin assigner, auto-commit).
function consumer(kafka, groupId, opts = {}) {
  return kafka.consumer({ groupId, sessionTimeout: 10000, rebalanceTimeout: 15000,
    heartbeatInterval: 500, maxWaitTimeInMs: 500, retry: { retries: 8 }, ...opts })
}

// Poll `fn` until it returns a truthy value; fail with `what` and the last value after `ms`.
async function waitFor(what, fn, ms = 30000, every = 100) {
  const deadline = Date.now() + ms
  let last
  for (;;) {
    last = await fn()
    if (last) return last
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}; last: ${JSON.stringify(last)}`)
    }
    await sleep(every)
  }
}

// Start `c` (subscribed already) and record every message as
// {topic, partition, offset, key, value, headers, timestamp}; `received` grows as they arrive.
async function runRecording(c, runOpts = {}) {
  const received = []
  await c.run({
    ...runOpts,
    eachMessage: async ({ topic, partition, message }) => {
      received.push({ topic, partition, offset: Number(message.offset),
        key: message.key === null ? null : message.key.toString(),
        value: message.value === null ? null : message.value.toString(),
        headers: message.headers, timestamp: message.timestamp })
    },
  })
  return received
}

// Each GROUP_JOIN event of `c`, newest last: [{memberId, isLeader, assignment: {topic: [p]}}].
function trackJoins(c) {
  const joins = []
  c.on(c.events.GROUP_JOIN, e => joins.push({ memberId: e.payload.memberId,
    isLeader: e.payload.isLeader, assignment: e.payload.memberAssignment }))
  return joins
}

function byPartition(records) {
  const out = {}
  for (const r of records) (out[r.partition] ||= []).push(r)
  return out
}

// Disconnect clients when the test ends (before its broker stops), so a failed or timed-out
// test leaves no socket open.
function closing(t, ...clients) {
  for (const c of clients) onClose(t, () => c.disconnect())
  return clients.length === 1 ? clients[0] : clients
}

module.exports = { unique, client, producer, consumer, waitFor, runRecording, trackJoins,
  byPartition, closing, sleep }
