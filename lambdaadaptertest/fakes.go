package lambdaadaptertest

import "github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"

// The in-memory fakes of the Kinesis and SQS writes the adapter makes; see
// package awsfake.
type (
	// Kinesis is an in-memory fake of PutRecord and PutRecords.
	Kinesis = awsfake.Kinesis
	// Written is one record a fake Kinesis accepted.
	Written = awsfake.Written
	// SQS is an in-memory fake of SendMessage and SendMessageBatch.
	SQS = awsfake.SQS
	// Sent is one message a fake SQS accepted.
	Sent = awsfake.Sent
)

// NewKinesis returns an empty fake Kinesis.
func NewKinesis() *Kinesis { return awsfake.NewKinesis() }

// NewSQS returns an empty fake SQS.
func NewSQS() *SQS { return awsfake.NewSQS() }
