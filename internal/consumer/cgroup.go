package consumer

import (
	"io/fs"
	"math"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
)

// capacity is the CPU capacity a worker's utilization is measured against
// when Config.CPUs is not set: GOMAXPROCS, or the CPU limit of the
// process's cgroup when that is lower. Go sets GOMAXPROCS from the limit
// but rounds it up and to at least 2, so a task of half a vCPU (Fargate's
// 512 CPU units, template.yaml's default) runs with GOMAXPROCS 2 and,
// measured against it, a task busy all the time would report a quarter of
// its capacity; the planner's minGap, in fractions of a worker's CPU,
// would then be four times too wide.
func capacity() float64 {
	procs := float64(runtime.GOMAXPROCS(0))
	if limit, ok := cpuLimit(os.DirFS("/")); ok && limit < procs {
		return limit
	}
	return procs
}

// cpuLimit returns the CPU limit, in CPUs, of the cgroup this process runs
// in, as the files of fsys (the root of the file system) tell it: cgroup v2
// cpu.max, or v1 cpu.cfs_quota_us over cpu.cfs_period_us, of the process's
// cgroup (in /proc/self/cgroup) or any of its ancestors below the mount
// point, the tightest; ok false when none is set or nothing can be read
// (not Linux, no cgroup file system). It assumes the usual mounts,
// /sys/fs/cgroup for v2 and /sys/fs/cgroup/<controllers> for v1, which is
// what ECS and Docker give a container.
func cpuLimit(fsys fs.FS) (limit float64, ok bool) {
	data, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	limit = math.Inf(1)
	for line := range strings.Lines(string(data)) {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		controllers, dir := parts[1], strings.TrimPrefix(path.Clean("/"+parts[2]), "/")
		var mounts []string
		var read func(fsys fs.FS, dir string) (float64, bool)
		switch {
		case parts[0] == "0" && controllers == "":
			mounts, read = []string{"sys/fs/cgroup"}, readV2
		case hasController(controllers, "cpu"):
			mounts, read = []string{"sys/fs/cgroup/" + controllers}, readV1
			if controllers != "cpu" {
				mounts = append(mounts, "sys/fs/cgroup/cpu")
			}
		default:
			continue
		}
		for _, mount := range mounts {
			for d := dir; ; d = path.Dir(d) {
				if d == "." {
					d = ""
				}
				if l, found := read(fsys, path.Join(mount, d)); found {
					limit = min(limit, l)
				}
				if d == "" {
					break
				}
			}
		}
	}
	if math.IsInf(limit, 1) {
		return 0, false
	}
	return limit, true
}

// hasController reports whether the v1 controller list (comma-separated)
// names c.
func hasController(list, c string) bool {
	for x := range strings.SplitSeq(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// readV2 reads cpu.max ("max 100000", or "50000 100000": a quota and a
// period in µs) of the cgroup directory dir.
func readV2(fsys fs.FS, dir string) (float64, bool) {
	data, err := fs.ReadFile(fsys, path.Join(dir, "cpu.max"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) == 0 || f[0] == "max" {
		return 0, false
	}
	period := "100000"
	if len(f) > 1 {
		period = f[1]
	}
	return quota(f[0], period)
}

// readV1 reads cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us of the
// cgroup directory dir.
func readV1(fsys fs.FS, dir string) (float64, bool) {
	q, err := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, false
	}
	p, err := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, false
	}
	return quota(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

// quota returns quota/period, both in µs, when both are positive integers.
func quota(q, p string) (float64, bool) {
	qn, err1 := strconv.ParseInt(q, 10, 64)
	pn, err2 := strconv.ParseInt(p, 10, 64)
	if err1 != nil || err2 != nil || qn <= 0 || pn <= 0 {
		return 0, false
	}
	return float64(qn) / float64(pn), true
}
