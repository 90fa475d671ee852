// Package idempotency wraps a lambdaadapter.Handler so that a record that
// was already handled successfully is acknowledged without running the
// handler again, in both modes. Its state is kept in a DynamoDB table with
// the layout of AWS Lambda Powertools' idempotency utility, so one table can
// serve Go consumers and Powertools functions alike. It is opt-in: import
// it and wrap the handler.
//
//	h, err := idempotency.New(handler, dynamodb.NewFromConfig(cfg), "idempotency",
//		idempotency.WithKeyFunc(func(m *lambdaadapter.Message) (string, error) {
//			var o Order
//			err := json.Unmarshal(m.Payload, &o)
//			return o.ID, err
//		}))
//	if err != nil { ... }
//	lambdaadapter.Handle(h, lambdaadapter.WithConcurrency(32))
//
// Create the table once with `bootstrap idempotency init -table NAME` (or
// CreateTable, or the template's Idempotency parameter).
//
// # What it guarantees
//
// A record's key is claimed in the table (a conditional PutItem) before the
// handler runs, and marked completed (a conditional UpdateItem) after it
// returns Ack or Drop. A delivery that finds its key completed is
// acknowledged without running the handler; one that finds it claimed by a
// run in progress stays unsettled (Retry, matching ErrInProgress) and
// comes again, in every retry configuration (see Counted retries); it is
// never dropped, retired or copied. A run that returns Retry or RetryAfter,
// or panics, deletes its claim, so the adapter's retry path runs as without
// this package.
//
// Side effects happen exactly once only when the handler's side effect is
// complete before the completion is written: a crash (kill -9, a frozen or
// timed-out Lambda invocation) between the side effect and that write
// leaves the claim behind, and a delivery of the record after the claim's
// in-progress expiry runs the handler again. At least once remains the
// floor; this package narrows the window to that crash. A handler whose
// side effect is itself idempotent (a conditional write keyed like the
// record) needs none of this.
//
// The default key (DefaultKey) identifies one record: stream, shard,
// sequence number and sub-sequence number of the original. It recognises
// Lambda's redeliveries of a batch after a reported failure, records
// redelivered to the next owner of a shard in long-running mode after a
// crash, the user records of a KPL aggregate that Lambda redelivers whole,
// and the counted copies of a record: a copy has a sequence number of its
// own, but carries the original's coordinates in its x-lambdaadapter-origin
// header (set on the first copy and kept on later
// ones), and the default key is taken from that header when it is present.
// An original and its copies therefore share one key, and two copies of one
// record (two copy chains, which a crash between a copy's write and the
// checkpoint can start) run the handler once. A record a producer wrote
// twice has two sequence numbers and no such header: to recognise it,
// derive the key from the payload with WithKeyFunc. The header is trusted
// as it is: a producer that sets it on a record of its own makes that
// record share the key it names.
//
// # Counted retries
//
// With WithMaxAttempts or a dead-letter target, a Retry becomes a counted
// copy, and the attempt at the cap a dead letter or a retired record. A
// delivery refused because its key is in progress elsewhere is none of
// these: the handler did not run. Its Retry matches ErrInProgress, which
// the adapter recognises: the record stays unsettled whatever the cap or
// target, no attempt is counted and nothing is written. So does the Retry
// of a delivery whose claim (or the read after a refused claim) failed at
// DynamoDB (ErrStore: throttling, a 5xx, an unreachable table): a store
// outage holds the records it meets, and never retires, copies or
// dead-letters one unhandled. In Lambda mode it
// is reported and Lambda delivers it again (with everything after it on
// its shard); in long-running mode it is delivered again in process after
// the retry backoff, with the same Attempt. When the other run completes,
// the next delivery is acknowledged without running; when it fails (and
// releases its claim), the next delivery runs the handler. A record is
// therefore never retired or dead-lettered unhandled because another run
// held it, and never handled on a copy while that run holds its key. The
// cost: a claim left behind by a crash holds its record (and, in Lambda
// mode, its shard) until the claim's in-progress expiry; a claim without
// one (written by Powertools) holds until the item expires.
//
// # Table layout
//
// One item per key, under the attribute names of Powertools (its
// defaults), partition key id of type S, time to live on expiration:
//
//	id                      S  PREFIX#KEY (see below)
//	expiration              N  epoch seconds: the claim's time plus the TTL, then
//	                           the completion's time plus the TTL (WithTTL,
//	                           default 1 hour); the table's TTL attribute
//	in_progress_expiration  N  epoch milliseconds: when the claim may be taken over
//	status                  S  INPROGRESS or COMPLETED
//	data                    S  on COMPLETED: {"outcome":"ack"} or
//	                           {"outcome":"drop","reason":"..."}
//	validation              S  with WithPayloadValidation: hex SHA-256 of the payload
//	claim_token             S  not Powertools': a random token of the claim that wrote
//	                           the item, new for each claim (see below)
//
// The claim is Powertools' conditional PutItem of an INPROGRESS item:
//
//	attribute_not_exists(id) OR expiration < :now
//	  OR (status = INPROGRESS AND in_progress_expiration < :now_ms)
//
// Completing (UpdateItem) and releasing (DeleteItem) a claim are
// conditional on status = INPROGRESS AND in_progress_expiration = the
// value the claim wrote: the in-progress expiration is the claim's fencing
// token, since a later claim can only take over once it has passed, and so
// always writes a greater one. A run whose claim was taken over therefore
// never overwrites the other run's item.
//
// # Lost answers
//
// A write whose answer is lost after DynamoDB applied it (a timeout, a
// reset connection, a 500 after the write) is sent again by the SDK's
// retryer, and the retry's condition fails because of the first attempt.
// Each of the three writes recognises its own applied write in the item
// that failed the condition (returned by DynamoDB, or read back with a
// consistent GetItem where the service returns none, as dynalite does):
//
//   - a claim whose item is INPROGRESS with its own claim_token, in-progress
//     expiration, expiration and validation was applied: the handler runs.
//     Without the token, it would take its own claim for a run in progress
//     elsewhere and leave the record unsettled until the claim expired.
//   - a completion whose item is COMPLETED with its claim_token, expiration
//     and data was applied: nothing is logged.
//   - a release that finds no item, or the item of a later claim (another
//     claim_token), has nothing of its own left to delete: nothing is
//     logged and nothing is deleted.
//
// A claim whose call got no answer at all (it ran out of its deadline, or
// failed after the client's retries, so no retry saw the condition) leaves
// the record unsettled, uncounted, without running the handler; the
// Handler remembers it (per id, in the process). When the record's next
// delivery finds an INPROGRESS item carrying that claim's token, expiries
// and validation, the claim was applied: the handler runs under it at
// once, instead of waiting for its in-progress expiry as for a run
// elsewhere. In another process (another Lambda execution environment, a
// worker that took the shard over) the claim is not known and holds off
// the record until its in-progress expiry.
//
// A token is 128 random bits (crypto/rand.Text) and only its own claim
// writes it, so no other delivery's item is taken for this one's, even
// one claimed at the same millisecond.
//
// # Ids and sharing a table
//
// An id is the key prefix, "#", and the key: "orders-fn#arn:aws:kinesis:
// us-east-1:123456789012:stream/orders#shardId-000000000000#4959...#0" with
// the default key, "orders-fn#order-1234" with a key function. A key
// longer than 1,024 bytes is replaced by "sha256:" and its SHA-256 in hex.
// The prefix (WithKeyPrefix) defaults to the Lambda function's name, or
// "lambdaadapter" outside Lambda. Powertools writes ids of the form
// "FUNCTION.HANDLER#HASH"; a Lambda function name has no "." or "#", so
// the two never collide in a shared table. Give every consumer application
// that shares a table a prefix of its own, in long-running mode above all:
// two consumers of one stream under one prefix take each other's records as
// handled.
//
// # In-progress expiry
//
// A claim holds until its in-progress expiry: by default the time left
// until the handler context's deadline (in Lambda mode, the invocation's
// deadline less the adapter's margin, so a timed-out invocation's claims
// have expired when Lambda retries the batch), or DefaultInProgressExpiry
// (one minute) when the context has none (long-running mode). In
// long-running mode, a record interrupted by a crash is taken over by the
// shard's next owner after the lease duration; it retries in process until
// the claim expires, then runs. WithInProgressExpiry sets the expiry
// explicitly; keep it above the handler's longest run.
//
// # Outcomes
//
//	found / returned          what the Handler returns           item afterwards
//	no item, or expired       the handler's outcome               claimed, then:
//	  handler Ack / Drop      Ack / Drop                          COMPLETED, expiration now+TTL
//	  Retry, RetryAfter,      the same (a panic passes on)        deleted
//	  Outcome{}, panic,
//	  a failed Message.Reply
//	COMPLETED (by Ack)        Ack, handler not run                unchanged
//	COMPLETED (by Drop)       Drop (ErrDuplicate), not run        unchanged
//	INPROGRESS, not expired   Retry (ErrInProgress), not run;     unchanged
//	                          unsettled even when counted
//	no key (WithKeyFunc err)  Retry (ErrKey), not run             none
//	claim fails (DynamoDB)    Retry (ErrStore), not run;          unchanged
//	                          unsettled even when counted
//	completion fails          the handler's outcome; logged       INPROGRESS until its expiry
//
// A completed drop is repeated as a Drop so that WithDeadLetterDrops still
// writes the record's dead letter when the first delivery's could not be
// written. With WithPayloadValidation, a completed key whose stored payload
// hash differs from the delivery's is dropped with ErrPayloadMismatch.
//
// # Cost
//
// Each delivery that runs the handler costs one PutItem and one UpdateItem
// (or DeleteItem); one that is skipped, one PutItem (DynamoDB returns the
// item that refused the claim; a service that does not, such as dynalite,
// costs a GetItem more, as does a completion or release whose condition
// fails there). The IAM actions are dynamodb:PutItem, UpdateItem,
// DeleteItem and GetItem on the table.
package idempotency
