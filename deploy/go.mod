module github.com/shardsettle/lambdaadapter/deploy

go 1.26.0

require (
	github.com/awslabs/goformation/v7 v7.14.9
	github.com/google/go-cmp v0.7.0
	github.com/shardsettle/lambdaadapter v0.0.0
	gopkg.in/yaml.v3 v3.0.1
)

require google.golang.org/protobuf v1.36.12 // indirect

replace github.com/shardsettle/lambdaadapter => ../
