'use strict'
// `test` for the scenarios: node:test's, except that run.mjs picks which scenarios run
// (KAFKAJS_SELECT, a JSON list of names); the others are not registered at all.
// Declare each scenario as `test('literal name', opts, fn)` at the start of a line: run.mjs
// finds the names in the sources.
const nodeTest = require('node:test')

const selected = process.env.KAFKAJS_SELECT ? new Set(JSON.parse(process.env.KAFKAJS_SELECT)) : null

function test(name, opts, fn) {
  if (selected && !selected.has(name)) return undefined
  if (!opts || typeof opts.timeout !== 'number') throw new Error(`scenario ${name}: no timeout`)
  return nodeTest.test(name, opts, fn)
}

module.exports = { test }
