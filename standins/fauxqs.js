// fauxqs.js starts fauxqs (an in-memory SQS emulator) for the lambdaadapter
// integration tests. scripts/standins.sh runs it; run it by hand with
//
//	LAMBDAADAPTER_SQS_PORT=4576 node standins/fauxqs.js
//
// It exists because fauxqs's own CLI forces a request log on. The port comes
// from LAMBDAADAPTER_SQS_PORT (default 4576). fauxqs 1.9.2 always listens on
// all interfaces (startFauxqs has no bind option), so clients must use
// http://127.0.0.1:PORT. SIGTERM and SIGINT close the server and exit 0.
'use strict'

const raw = process.env.LAMBDAADAPTER_SQS_PORT || '4576'
const port = Number(raw)
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`fauxqs.js: LAMBDAADAPTER_SQS_PORT=${JSON.stringify(raw)} is not a port number`)
  process.exit(2)
}

import('fauxqs').then(async ({ startFauxqs }) => {
  const server = await startFauxqs({ port, logger: false })
  console.log(`fauxqs listening on port ${server.port} (clients: http://127.0.0.1:${server.port})`)
  const stop = () => {
    server.stop().then(() => process.exit(0), () => process.exit(1))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}).catch((err) => {
  console.error('fauxqs.js: cannot start fauxqs:', err && err.stack ? err.stack : err)
  process.exit(1)
})
