// Run the kafkajs scenarios (test/*.test.js) with node's test runner against one kind of broker
// and record one result per scenario. Called by run.sh, which installs kafkajs first.
//   node run.mjs --broker sluice --sluice BIN | --broker kafka   [--all | --tests 'a,b']
// Mode: `allow` (default: the scenarios in tests.allow; a failure is retried once, and the run
// fails if any of them does not pass), `all` (every scenario), `tests` (the named ones).
// Results: compat-tests/.cache/results/kafkajs-<broker>-<mode>.json (read by report.py).
import fs from 'node:fs'
import path from 'node:path'
import { run } from 'node:test'
import { spec } from 'node:test/reporters'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const RESULTS = path.resolve(HERE, '..', '.cache', 'results')
const require = createRequire(import.meta.url)
const VERSION = require('kafkajs/package.json').version

function parseArgs(argv) {
  const a = { broker: 'sluice', sluice: null, all: false, tests: null }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    if (k === '--broker') a.broker = argv[++i]
    else if (k === '--sluice') a.sluice = argv[++i]
    else if (k === '--all') a.all = true
    else if (k === '--tests') a.tests = argv[++i].split(',').map(s => s.trim()).filter(Boolean)
    else throw new Error(`run.mjs: unknown argument ${k}`)
  }
  return a
}

// {scenario name: file}, from `test('name', ...)` lines of test/*.test.js.
function scenarios() {
  const out = {}
  const dir = path.join(HERE, 'test')
  for (const f of fs.readdirSync(dir).filter(f => f.endsWith('.test.js')).sort()) {
    const src = fs.readFileSync(path.join(dir, f), 'utf8')
    for (const m of src.matchAll(/^test\('((?:[^'\\]|\\.)+)'/gm)) {
      if (out[m[1]]) throw new Error(`scenario name used twice: ${m[1]}`)
      out[m[1]] = path.join(dir, f)
    }
  }
  return out
}

function readAllow() {
  return fs.readFileSync(path.join(HERE, 'tests.allow'), 'utf8').split('\n')
    .map(l => l.split('#')[0].trim()).filter(Boolean)
}

function firstLine(err) {
  if (!err) return ''
  const e = err.cause || err
  const text = (e && (e.message || String(e))) || String(err)
  return text.split('\n').filter(Boolean).slice(0, 3).join(' ').slice(0, 400)
}

// Run `names` (one file at a time, each file in its own node process); resolve to
// {name: {status, seconds, reason}}.
function runSome(names, all, env) {
  const files = [...new Set(names.map(n => all[n]))]
  process.env.KAFKAJS_SELECT = JSON.stringify(names)
  Object.assign(process.env, env)
  const results = {}
  return new Promise((resolve, reject) => {
    const stream = run({ files, concurrency: 1 })
    const record = (data, status) => {
      if (data.nesting !== 0) return
      const name = all[data.name] ? data.name : `${path.basename(data.file || data.name)} (file)`
      if (data.skip !== undefined || data.todo !== undefined) status = 'skip'
      const d = data.details || {}
      results[name] = { status, seconds: Math.round((d.duration_ms || 0) / 100) / 10,
        reason: status === 'fail' ? firstLine(d.error) : '' }
    }
    stream.on('test:pass', data => record(data, 'pass'))
    stream.on('test:fail', data => record(data, 'fail'))
    const shown = stream.compose(new spec())
    shown.pipe(process.stdout, { end: false })
    shown.on('end', () => resolve(results))
    shown.on('error', reject)
  })
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const all = scenarios()
  const allow = readAllow()
  const unknown = allow.filter(n => !all[n]).concat((args.tests || []).filter(n => !all[n]))
  if (unknown.length) {
    console.error(`run.mjs: no such scenarios: ${JSON.stringify(unknown)}`)
    return 2
  }
  const mode = args.tests ? 'tests' : args.all ? 'all' : 'allow'
  const wanted = args.tests || (args.all ? Object.keys(all) : allow)
  const env = args.broker === 'kafka' ? { KAFKA_MANAGED: '1', SLUICE_BIN: '' } : { SLUICE_BIN: args.sluice }
  if (args.broker === 'kafka') delete process.env.SLUICE_BIN
  const target = args.broker === 'kafka' ? 'Apache Kafka (kafka/start-kafka.sh)' : args.sluice
  console.log(`run.mjs: kafkajs ${VERSION} scenarios against ${args.broker} (${target}); ` +
    `${wanted.length} of ${Object.keys(all).length} scenarios, mode ${mode}`)

  const t0 = Date.now()
  const results = {}
  for (const n of Object.keys(all)) {
    if (!wanted.includes(n)) {
      results[n] = { status: 'not-run', seconds: 0, reason: mode === 'allow' ? 'not in tests.allow' : 'not selected' }
    }
  }
  Object.assign(results, await runSome(wanted, all, env))
  for (const n of wanted) {
    if (!results[n]) results[n] = { status: 'fail', seconds: 0, reason: 'no result: its test file did not run it' }
  }
  if (mode === 'allow') { // a real regression fails twice
    const failed = wanted.filter(n => results[n].status !== 'pass')
    if (failed.length) {
      console.log(`run.mjs: retrying once: ${failed.join(', ')}`)
      const again = await runSome(failed, all, env)
      for (const n of failed) {
        const r = again[n] || { status: 'fail', seconds: 0, reason: 'no result on retry' }
        if (r.status === 'pass') r.reason = `flaky: passed on retry; first run: ${results[n].reason}`.slice(0, 500)
        results[n] = r
      }
    }
  }
  const seconds = Math.round((Date.now() - t0) / 1000)
  const sorted = Object.fromEntries(Object.entries(results).sort(([a], [b]) => a.localeCompare(b)))
  fs.mkdirSync(RESULTS, { recursive: true })
  const out = path.join(RESULTS, `kafkajs-${args.broker}-${mode}.json`)
  fs.writeFileSync(out, JSON.stringify({ suite: 'kafkajs', client: `kafkajs ${VERSION}`,
    client_version: VERSION, broker: args.broker, broker_detail: target, mode,
    date: new Date().toISOString().replace(/\.\d+Z$/, '+00:00'), seconds, tests: sorted }, null, 1) + '\n')

  const ran = Object.entries(results).filter(([, r]) => ['pass', 'fail', 'skip'].includes(r.status))
  const count = s => ran.filter(([, r]) => r.status === s).length
  const failed = ran.filter(([, r]) => r.status === 'fail')
  for (const [n, r] of failed) console.log(`FAIL ${n}: ${r.reason}`)
  if (mode === 'all' && args.broker === 'sluice') {
    const fresh = ran.filter(([n, r]) => r.status === 'pass' && !allow.includes(n)).map(([n]) => n)
    if (fresh.length) console.log(`passing but not in tests.allow (add them):\n  ${fresh.join('\n  ')}`)
  }
  const lost = allow.filter(n => results[n] && ['fail', 'skip'].includes(results[n].status))
  if (lost.length && args.broker === 'sluice') console.log(`REGRESSION: allowlisted scenarios not passing:\n  ${lost.join('\n  ')}`)
  console.log(`run.mjs: ${ran.length} scenarios in ${seconds} s; results in ${out}`)
  console.log(`${count('pass')} passed, ${count('fail')} failed, ${count('skip')} skipped`)
  if (mode === 'allow') return failed.length || count('skip') ? 1 : 0
  return failed.length ? 1 : 0
}

main().then(code => { process.exitCode = code }, e => { console.error(e); process.exitCode = 2 })
