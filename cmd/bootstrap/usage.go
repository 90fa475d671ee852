package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// usage is what `bootstrap help` (or -h) prints.
const usage = `bootstrap: lambdaadapter's deployable binary, with a demonstration handler
(a record's JSON payload may choose its outcome, as {"outcome":"retry"}).

Usage:
  bootstrap [-mode=lambda|ecs]             run the adapter: lambda (default) serves
                                           the Lambda runtime API (it fails outside
                                           Lambda or the Runtime Interface Emulator);
                                           ecs reads the stream itself until SIGTERM
  bootstrap leases -table T -stream S      each shard's lease: owner, pending
                                           hand-over, checkpoint, counter, renewal,
                                           lag. S is a stream's name or ARN,
                                           or several, comma-separated (a,b,c):
                                           each stream's leases under its name
  bootstrap leases init -table T           create the lease table (PAY_PER_REQUEST)
                                           with its owner index, or add the index
                                           to an existing table
  bootstrap idempotency init [-table T]    create the idempotency table
  bootstrap help [leases|idempotency]      this text, or a command's flags
  bootstrap version                        the module's version and the VCS
                                           revision the binary was built from

Configuration: LAMBDAADAPTER_* environment variables (LAMBDAADAPTER_MODE,
LAMBDAADAPTER_STREAM, LAMBDAADAPTER_LEASE_TABLE, LAMBDAADAPTER_MAX_ATTEMPTS,
LAMBDAADAPTER_DEAD_LETTER_QUEUE, ...) and the standard AWS configuration
(region, credentials, AWS_ENDPOINT_URL_KINESIS and friends). The whole list
of variables, and the demonstration handler's payload commands:

  go doc github.com/shardsettle/lambdaadapter/cmd/bootstrap

docs/configuration.md lists each; docs/long-running.md explains the service.
`

// versionCommand implements `bootstrap version`: the module path and
// version, the VCS revision, its time and whether the tree was modified
// (when the binary was built from a VCS checkout), and the Go version, all
// from the binary's build information (read, debug.ReadBuildInfo).
func versionCommand(args []string, read func() (*debug.BuildInfo, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "bootstrap version: takes no arguments, got %q\n", args)
		return 2
	}
	bi, ok := read()
	if !ok {
		fmt.Fprintln(stderr, "bootstrap version: the binary carries no build information")
		return 1
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	fmt.Fprintf(stdout, "%s %s\n", bi.Main.Path, version)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(stdout, "revision %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(stdout, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			fmt.Fprint(stdout, ", modified")
		}
		fmt.Fprintln(stdout)
	} else {
		fmt.Fprintln(stdout, "revision unknown (not built from a VCS checkout)")
	}
	fmt.Fprintf(stdout, "built with %s\n", bi.GoVersion)
	return 0
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// helpCommand implements `bootstrap help [command]`.
func helpCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return 0
	}
	switch args[0] {
	case "leases":
		return leasesCommand([]string{"-h"}, getenv, stdout, stdout)
	case "idempotency":
		return idempotencyCommand([]string{"init", "-h"}, getenv, stdout, stdout)
	}
	fmt.Fprintf(stderr, "bootstrap help: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// newFlagSet returns a flag set named name whose -h prints synopsis (one
// usage line per form) and the flags to out.
func newFlagSet(name, synopsis string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n%s\nFlags:\n", indent(synopsis))
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs: done is false to go on; otherwise code
// is the exit code (0 after -h, which printed the usage; 2 for bad flags).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil:
		return 2, true
	}
	return 0, false
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
