// Starts dynalite (the DynamoDB stand-in) with its usual command line, and
// keeps it alive when a client vanishes mid-request: dynalite 4.0.0 throws
// from its request 'error' handler ("aborted", ECONNRESET), which would end
// the process when a test kills a worker (kill -9) with a write in flight.
// A real DynamoDB just drops such a request; so does this launcher.
'use strict'

process.on('uncaughtException', (err) => {
  if (err && (err.message === 'aborted' || err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
    console.error('dynalite launcher: a client went away mid-request (%s); ignored', err.code || err.message)
    return
  }
  console.error(err)
  process.exit(1)
})

require('dynalite/cli.js')
