// Package integration holds the end-to-end tests of lambdaadapter: the
// deployable binary (cmd/bootstrap) run under local stand-ins for AWS. It has
// no code of its own; the tests build only with the integration tag. It is a
// module of its own (integration/go.mod), with the stand-in helpers
// (integration/standin) and the demo driver (integration/demo), so that the
// product module neither builds nor depends on them:
//
//	scripts/install-rie.sh   # or: make tools (builds bin/aws-lambda-rie)
//	cd integration && go test -tags integration -count=1 -v ./...
//
// The tests never skip: a missing stand-in fails them with the command that
// installs it. LAMBDAADAPTER_RIE overrides the path of the Lambda Runtime
// Interface Emulator.
package integration
