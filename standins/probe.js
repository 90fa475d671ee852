// probe.js is the readiness and port check of scripts/standins.sh. It uses only
// Node's standard library (global fetch, net), so it works before and after
// `npm ci`.
//
//	node probe.js wait SECONDS SERVICE=PORT[@PID]...
//	    Polls a real API call per service on 127.0.0.1:PORT until every one
//	    answers or SECONDS pass: Kinesis ListStreams, DynamoDB ListTables, SQS
//	    ListQueues (the services are named kinesis, dynamodb and sqs). With
//	    @PID it gives up on a service as soon as that process has exited.
//	    Prints one line per service, "ok SERVICE SECONDS" or
//	    "fail SERVICE REASON", and exits 0 only when all are ok.
//	node probe.js free PORT...
//	    Exits 0 when every port can be bound on all interfaces (kinesis-local
//	    and fauxqs bind 0.0.0.0); otherwise prints "busy PORT REASON" per port
//	    and exits 1.
'use strict'

const net = require('net')

// The probes send the headers kinesis-local and dynalite insist on
// (X-Amz-Date and an Authorization header; neither checks the signature).
const probes = {
  kinesis: {
    contentType: 'application/x-amz-json-1.1',
    target: 'Kinesis_20131202.ListStreams',
    scope: 'kinesis',
    key: 'StreamNames',
  },
  dynamodb: {
    contentType: 'application/x-amz-json-1.0',
    target: 'DynamoDB_20120810.ListTables',
    scope: 'dynamodb',
    key: 'TableNames',
  },
  sqs: {
    contentType: 'application/x-amz-json-1.0',
    target: 'AmazonSQS.ListQueues',
    scope: 'sqs',
    key: null, // an empty ListQueues answer may omit QueueUrls
  },
}

function usage () {
  console.error('usage: node probe.js wait SECONDS SERVICE=PORT[@PID]... | node probe.js free PORT...')
  process.exit(2)
}

function amzDate (d) {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '')
}

async function probeOnce (name, port) {
  const p = probes[name]
  const date = amzDate(new Date())
  const res = await fetch(`http://127.0.0.1:${port}/`, {
    method: 'POST',
    headers: {
      'Content-Type': p.contentType,
      'X-Amz-Target': p.target,
      'X-Amz-Date': date,
      Authorization: `AWS4-HMAC-SHA256 Credential=test/${date.slice(0, 8)}/us-east-1/${p.scope}/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=${'0'.repeat(64)}`,
    },
    body: '{}',
    signal: AbortSignal.timeout(2000),
  })
  const text = await res.text()
  if (res.status !== 200) {
    throw new Error(`${p.target} answered HTTP ${res.status}: ${text.slice(0, 200)}`)
  }
  let body
  try {
    body = JSON.parse(text)
  } catch (err) {
    throw new Error(`${p.target} answered a body that is not JSON: ${text.slice(0, 200)}`)
  }
  if (p.key && !Array.isArray(body[p.key])) {
    throw new Error(`${p.target} answered without ${p.key}: ${text.slice(0, 200)}`)
  }
}

function alive (pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function waitFor (name, port, pid, deadline, start, seconds) {
  let last = 'no answer yet'
  for (;;) {
    if (pid && !alive(pid)) {
      return `fail ${name} process ${pid} exited before answering (${last})`
    }
    try {
      await probeOnce(name, port)
      return `ok ${name} ${((Date.now() - start) / 1000).toFixed(2)}`
    } catch (err) {
      last = err.cause && err.cause.code ? err.cause.code : err.message
    }
    if (Date.now() >= deadline) {
      return `fail ${name} no answer on 127.0.0.1:${port} within ${seconds}s (last error: ${last})`
    }
    await sleep(100)
  }
}

async function wait (args) {
  const seconds = Number(args[0])
  if (!(seconds > 0) || args.length < 2) usage()
  const start = Date.now()
  const deadline = start + seconds * 1000
  const jobs = args.slice(1).map((arg) => {
    const m = /^(kinesis|dynamodb|sqs)=(\d+)(?:@(\d+))?$/.exec(arg)
    if (!m) usage()
    return waitFor(m[1], Number(m[2]), m[3] ? Number(m[3]) : 0, deadline, start, seconds)
  })
  const lines = await Promise.all(jobs)
  for (const line of lines) console.log(line)
  process.exit(lines.every((l) => l.startsWith('ok ')) ? 0 : 1)
}

function tryBind (port) {
  return new Promise((resolve) => {
    const srv = net.createServer()
    srv.once('error', (err) => resolve(`busy ${port} ${err.code || err.message}`))
    srv.listen({ port, host: '0.0.0.0', exclusive: true }, () => srv.close(() => resolve(null)))
  })
}

async function free (args) {
  if (args.length === 0) usage()
  const ports = args.map(Number)
  if (!ports.every((p) => Number.isInteger(p) && p > 0 && p < 65536)) usage()
  const busy = (await Promise.all(ports.map(tryBind))).filter(Boolean)
  for (const line of busy) console.log(line)
  process.exit(busy.length === 0 ? 0 : 1)
}

const [cmd, ...rest] = process.argv.slice(2)
if (cmd === 'wait') wait(rest)
else if (cmd === 'free') free(rest)
else usage()
