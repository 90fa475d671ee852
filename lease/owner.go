package lease

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// NewOwnerID returns an owner id unique to this process, for Take: the
// ECS task id when there is one, "ecs-task/<id>-<rand>", else the host name,
// "<host>-<rand>", where <rand> is 12 random hex digits (so two processes on
// one host, or a restarted container of one task, never share an id).
//
// ecsTaskID may be the task id or the task ARN
// (arn:aws:ecs:region:account:task/cluster/id); only the part after the last
// '/' is used, and an empty id counts as none. An empty hostname becomes "worker". NewOwnerID only formats:
// the caller (cmd/bootstrap) reads the environment. It is safe for
// concurrent use.
func NewOwnerID(hostname, ecsTaskID string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read documents it)
	suffix := hex.EncodeToString(b[:])
	if id := ecsTaskID[strings.LastIndexByte(ecsTaskID, '/')+1:]; id != "" {
		return "ecs-task/" + id + "-" + suffix
	}
	if hostname == "" {
		hostname = "worker"
	}
	return hostname + "-" + suffix
}
