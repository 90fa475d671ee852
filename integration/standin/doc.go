// Package standin connects integration tests to the project's local stand-ins
// for AWS — kinesis-local for Kinesis, fauxqs for SQS and dynalite for
// DynamoDB — and gives them short helpers for the resources a test needs.
//
// The stand-ins run as separate processes, started by scripts/standins.sh
// (make test does this):
//
//	scripts/standins.sh install && scripts/standins.sh start
//	eval "$(scripts/standins.sh env)"
//	(cd integration && go test -tags integration -count=1 ./...)
//	scripts/standins.sh stop
//
// Require checks that each stand-in answers a real API call and fails the test
// with that instruction when one does not; it never skips. A test then asks
// its Env for what it needs:
//
//	env := standin.Require(t)
//	stream, _ := env.NewStream(t, 2)   // ACTIVE, deleted when the test ends
//	queue := env.NewQueue(t, nil)      // deleted when the test ends
//	// ... run the code under test against stream and queue ...
//	records := env.ReadAll(t.Context(), t, stream, 10, 10*time.Second)
//	messages := env.ReceiveAll(t.Context(), t, queue, 1, 10*time.Second)
//
// ReadAll and ReceiveAll never race the machine's speed. They return as soon
// as they have the number wanted; otherwise they wait until nothing more has
// arrived for the given quiet window, a window that starts only once what was
// already there has been read (every shard at its tip, the queue empty). So
// want = n+1 with a short window proves that there are exactly n, and
// want = n with a long window waits for n that are still being written. An
// overall cap of the window plus two minutes fails the test should items keep
// trickling in without ever reaching the number wanted.
//
// The clients use static credentials test/test, region us-east-1 and
// endpoints on a loopback IP address only (never a host name, which might
// resolve elsewhere), so a test can never reach real AWS. Every resource name
// is unique (the test's name plus a random suffix), so tests may run in
// parallel against one set of stand-ins.
//
// Helpers that take a testing.TB report failures with t.Fatalf and so must
// be called from the goroutine running the test.
package standin
