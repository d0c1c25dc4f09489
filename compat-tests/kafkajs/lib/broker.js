'use strict'
// The broker under test, as the Python suite starts it (python/brokers.py):
//   SLUICE_BIN=/path/to/sluice  a fresh sluice for every test: a free loopback port and an empty
//                               data dir, `--override listeners=... --override log.dirs=...`;
//   KAFKA_MANAGED=1             Apache Kafka through kafka/start-kafka.sh, one per test file
//                               (it takes seconds to start); the tests use unique topic and
//                               group names, so they do not see each other's data.
// Both get BROKER_OVERRIDES below, and a test's own (`brokerFor(t, overrides)`: against Kafka,
// one broker per test file and set of overrides). Every wait has a deadline.
const { spawn, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { after } = require('node:test')

const COMPAT = path.resolve(__dirname, '..', '..')
const KAFKA_DIR = path.join(COMPAT, 'kafka')
const SLUICE_START_TIMEOUT_MS = 20000
const KAFKA_START_TIMEOUT_MS = 90000
const STOP_TIMEOUT_MS = 30000

// The same on both brokers: groups form quickly without waiting Kafka's default 3 s.
const BROKER_OVERRIDES = { 'group.initial.rebalance.delay.ms': '300' }

function mode() {
  if (process.env.SLUICE_BIN) return 'sluice'
  if (process.env.KAFKA_MANAGED === '1') return 'kafka'
  throw new Error('no broker to test: set SLUICE_BIN=/path/to/sluice or KAFKA_MANAGED=1 (run.sh does)')
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function canBind(port) {
  return new Promise(resolve => {
    const srv = net.createServer()
    srv.once('error', () => resolve(false))
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)))
  })
}

// Below the kernel's ephemeral range (32768+), so a reconnecting client never holds the port.
async function freePort() {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 12000)
    if (await canBind(port)) return port
  }
  throw new Error('no free port in 20000-32000')
}

function portOpen(port) {
  return new Promise(resolve => {
    const sock = net.connect({ host: '127.0.0.1', port })
    sock.setTimeout(500)
    sock.once('connect', () => { sock.destroy(); resolve(true) })
    sock.once('error', () => resolve(false))
    sock.once('timeout', () => { sock.destroy(); resolve(false) })
  })
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0)
  } catch (e) {
    return false
  }
  try { // a zombie still answers kill(0)
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch (e) {
    return false
  }
}

class Broker {
  constructor(kind, root, port, overrides = {}) {
    this.kind = kind
    this.root = root
    this.port = port
    this.overrides = { ...BROKER_OVERRIDES, ...overrides }
    this.bootstrap = `127.0.0.1:${port}`
    this.pid = null
    started.add(this)
  }

  get outputFile() {
    return path.join(this.root, this.kind === 'sluice' ? 'broker.out' : 'kafka.out')
  }

  describe() {
    return `${this.kind} broker at ${this.bootstrap}, root ${this.root}`
  }

  async start() {
    const logDir = path.join(this.root, 'data')
    if (this.kind === 'sluice') {
      fs.mkdirSync(logDir, { recursive: true })
      const args = ['--override', `listeners=PLAINTEXT://127.0.0.1:${this.port}`,
        '--override', `log.dirs=${logDir}`]
      for (const [k, v] of Object.entries(this.overrides)) args.push('--override', `${k}=${v}`)
      const out = fs.openSync(this.outputFile, 'a')
      const child = spawn(process.env.SLUICE_BIN, args, { stdio: ['ignore', out, out] })
      fs.closeSync(out)
      this.pid = child.pid
      let exited = null
      child.once('exit', code => { exited = code })
      this.child = child
      const deadline = Date.now() + SLUICE_START_TIMEOUT_MS
      while (!(await portOpen(this.port))) {
        if (exited !== null) throw new Error(`sluice exited with ${exited} during startup:\n${this.tail()}`)
        if (Date.now() > deadline) {
          this.kill9()
          throw new Error(`sluice did not open port ${this.port} in ${SLUICE_START_TIMEOUT_MS} ms`)
        }
        await sleep(50)
      }
    } else {
      const args = [String(this.port), this.root]
      for (const [k, v] of Object.entries(this.overrides)) args.push(`${k}=${v}`)
      const stdout = execFileSync(path.join(KAFKA_DIR, 'start-kafka.sh'), args,
        { encoding: 'utf8', timeout: KAFKA_START_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'pipe'] })
      this.pid = Number(stdout.trim().split('\n').pop())
    }
    return this
  }

  running() {
    return this.pid !== null && pidAlive(this.pid)
  }

  kill9() {
    if (this.running()) process.kill(this.pid, 'SIGKILL')
  }

  // Graceful stop (SIGTERM); SIGKILL after STOP_TIMEOUT_MS. Returns false when it needed SIGKILL.
  async stop() {
    if (!this.running()) return true
    process.kill(this.pid, 'SIGTERM')
    const deadline = Date.now() + STOP_TIMEOUT_MS
    while (this.running()) {
      if (Date.now() > deadline) {
        this.kill9()
        return false
      }
      await sleep(50)
    }
    if (this.kind === 'kafka') fs.rmSync(path.join(this.root, 'kafka.pid'), { force: true })
    return true
  }

  tail(lines = 40) {
    try {
      return fs.readFileSync(this.outputFile, 'utf8').split('\n').slice(-lines).join('\n')
    } catch (e) {
      return ''
    }
  }
}

function workRoot() {
  const base = process.env.KAFKAJS_WORK || os.tmpdir()
  fs.mkdirSync(base, { recursive: true })
  return fs.mkdtempSync(path.join(base, 'broker-'))
}

const started = new Set() // every broker this process started, so none outlives it
const sharedKafka = new Map() // one Apache Kafka per test file and set of overrides

// What a test opened (kafkajs clients), closed when it ends, before its broker stops: a client
// whose broker is gone retries its disconnect for half a minute.
const closers = new WeakMap()

async function closeAll(t) {
  const list = closers.get(t) || []
  closers.delete(t)
  for (const close of list.reverse()) {
    try { await close() } catch (e) { /* already gone */ }
  }
}

function onClose(t, close) {
  if (!closers.has(t)) {
    closers.set(t, [])
    t.after(() => closeAll(t))
  }
  closers.get(t).push(close)
}

// The broker for one test: `const broker = await brokerFor(t)`, or `brokerFor(t, {key: value})`
// for one with more settings.
async function brokerFor(t, overrides = {}) {
  if (mode() === 'kafka') {
    const key = JSON.stringify(overrides)
    if (!sharedKafka.has(key)) {
      sharedKafka.set(key, new Broker('kafka', workRoot(), await freePort(), overrides).start())
    }
    return sharedKafka.get(key)
  }
  const b = new Broker('sluice', workRoot(), await freePort(), overrides)
  t.after(async () => {
    await closeAll(t)
    const alive = b.running()
    const graceful = await b.stop()
    if (!alive) t.diagnostic(`sluice died during the test:\n${b.tail()}`)
    else if (!graceful) t.diagnostic(`sluice needed SIGKILL to stop:\n${b.tail()}`)
    if (alive && graceful && !process.env.KAFKAJS_KEEP) fs.rmSync(b.root, { recursive: true, force: true })
  })
  closers.set(t, [])
  await b.start()
  return b
}

// Registered when a test file loads this module, so it runs after the file's last test.
after(async () => {
  for (const started of sharedKafka.values()) {
    const b = await started.catch(() => null)
    if (b && (await b.stop()) && !process.env.KAFKAJS_KEEP) fs.rmSync(b.root, { recursive: true, force: true })
  }
  // A kafkajs client that a failed test could not close (a retry timer, a socket) must not
  // keep this test file's process alive: exit once the results are out.
  setTimeout(() => process.exit(), 3000).unref()
})

process.on('exit', () => { // never leave a broker behind
  for (const b of started) b.kill9()
})

module.exports = { brokerFor, onClose, mode, sleep, BROKER_OVERRIDES }
