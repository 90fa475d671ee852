package emf

// The counters of one set of dimension values. Each is written, as a Count,
// only when it is not zero.
const (
	cHandled = iota
	cAck
	cDrop
	cRetry
	cRetryAfter
	cDropped
	cUnsettled
	cRetired
	cPoison
	cExpired
	cCopies
	cDelays
	cDeadLetters
	cReplies
	cWriteFailures
	cBatchItemFailures
	cInvocationsCut
	cRead
	cLeaseTakes
	cLeaseSteals
	cLeaseHandoffs
	cLeaseLosses
	cCheckpointWrites
	cCheckpointFailures
	numCounters
)

// counterNames are the metric names of the counters; see the package
// documentation for what each counts.
var counterNames = [numCounters]string{
	cHandled:            "RecordsHandled",
	cAck:                "RecordsHandledAck",
	cDrop:               "RecordsHandledDrop",
	cRetry:              "RecordsHandledRetry",
	cRetryAfter:         "RecordsHandledRetryAfter",
	cDropped:            "RecordsDropped",
	cUnsettled:          "RecordsUnsettled",
	cRetired:            "RecordsRetired",
	cPoison:             "PoisonRecords",
	cExpired:            "RecordsExpired",
	cCopies:             "Copies",
	cDelays:             "DelayMessages",
	cDeadLetters:        "DeadLetters",
	cReplies:            "Replies",
	cWriteFailures:      "WriteFailures",
	cBatchItemFailures:  "BatchItemFailures",
	cInvocationsCut:     "InvocationsCut",
	cRead:               "RecordsRead",
	cLeaseTakes:         "LeaseTakes",
	cLeaseSteals:        "LeaseSteals",
	cLeaseHandoffs:      "LeaseHandoffs",
	cLeaseLosses:        "LeaseLosses",
	cCheckpointWrites:   "CheckpointWrites",
	cCheckpointFailures: "CheckpointFailures",
}

// The gauges: the last value reported in the interval, written as a Count
// when one was reported.
const (
	gLeasesHeld = iota
	gInFlight
	numGauges
)

var gaugeNames = [numGauges]string{
	gLeasesHeld: "LeasesHeld",
	gInFlight:   "RecordsInFlight",
}

// The value arrays, in Milliseconds. MillisBehindLatest, also a value
// array, is built at Flush from the highest value of each shard.
const (
	sHandler = iota
	sRecordAge
	sInvocation
	sOldest
	numSeries
)

var seriesNames = [numSeries]string{
	sHandler:    "HandlerDuration",
	sRecordAge:  "RecordAge",
	sInvocation: "InvocationDuration",
	sOldest:     "OldestRecordAge",
}

// Names of the metrics, dimensions and root members outside the tables.
const (
	metricColdStart          = "ColdStart"
	metricMillisBehindLatest = "MillisBehindLatest"

	dimService  = "service"
	dimStream   = "Stream"
	dimShard    = "ShardId"
	dimFunction = "function_name"

	memberOldestShard     = "OldestHandledShardId"
	memberOldestSequence  = "OldestHandledSequenceNumber"
	memberPoisonShard     = "LastPoisonShardId"
	memberPoisonSequence  = "LastPoisonSequenceNumber"
	memberFailureKind     = "LastWriteFailureKind"
	memberFailureShard    = "LastWriteFailureShardId"
	memberFailureSequence = "LastWriteFailureSequenceNumber"
	memberBehindShard     = "MillisBehindLatestShardId"
)
