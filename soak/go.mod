module github.com/shardsettle/lambdaadapter/soak

go 1.26.0

require github.com/google/go-cmp v0.7.0

replace github.com/shardsettle/lambdaadapter => ../
