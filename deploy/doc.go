// Package deploy checks the repository's deployment files: template.yaml (the
// AWS SAM template of both modes), the Dockerfile and .dockerignore. It is a
// module of its own so that goformation stays out of the library's go.mod.
//
// Load reads a template the way goformation does (YAML short forms become
// their long forms); Template.Evaluate then does what CloudFormation does with
// a set of parameter values: it checks the values against their constraints,
// runs the Rules, decides the Conditions, leaves out the resources and outputs
// whose condition is false, and resolves Ref, Fn::If, Fn::Sub, Fn::Join,
// Fn::Select and Fn::Split. A list parameter (CommaDelimitedList) is split at
// its commas, each element trimmed and checked against the constraints, as
// CloudFormation does. What only exists once the stack does (a
// resource's Ref or attribute, AWS::Region) stays symbolic, written as in
// Fn::Sub: "${DelayQueue}", "${Stream.Arn}", "${AWS::Region}"; a reference to
// a resource that the parameters leave out is an error, as in CloudFormation.
//
// Stack.Decode decodes an evaluated resource into goformation's type for it,
// strictly (an unknown property is an error) and with CloudFormation's own
// leniency for parameter values (the string "3" where a number is wanted).
// goformation's AWS::Serverless::Function model predates properties the
// template needs (LoggingConfig; FunctionResponseTypes on an SQS event;
// MaximumRetryAttempts and friends on a Kinesis event), so Stack.Function
// does what the SAM transform does instead: it decodes the function as an
// AWS::Lambda::Function and each of its events as an
// AWS::Lambda::EventSourceMapping.
//
// The tests (go test ./...) evaluate ../template.yaml for both modes and many
// parameter combinations and check the event sources, every IAM statement
// against an allow-list of the calls the code makes (enhanced fan-out's
// only with FanOutConsumerName; on each stream of AdditionalStreamArns what
// the tasks call on every stream), the ECS task, the wiring of parameters
// into the LAMBDAADAPTER_* environment, the CloudWatch alarms and the
// autoscaling policy: each must watch a metric that observe/emf's
// Exporter, run with the environment the template sets, writes. For that the module requires the
// library itself, from the parent directory (a replace directive in
// go.mod), as bench/e2e does.
package deploy
