package consumer

import (
	"testing"
	"testing/fstest"
)

func TestCPULimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		fs    fstest.MapFS
		limit float64
		ok    bool
	}{
		{"no cgroup file (not Linux)", fstest.MapFS{}, 0, false},
		{"v2, half a CPU (Fargate 512)", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("50000 100000\n"),
		}, 0.5, true},
		{"v2, no limit", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("max 100000\n"),
		}, 0, false},
		{"v2, quota without a period", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("150000\n"),
		}, 1.5, true},
		{"v2, a tighter ancestor", fstest.MapFS{
			"proc/self/cgroup":          file("0::/a/b\n"),
			"sys/fs/cgroup/a/b/cpu.max": file("max 100000\n"),
			"sys/fs/cgroup/a/cpu.max":   file("200000 100000\n"),
			"sys/fs/cgroup/cpu.max":     file("400000 100000\n"),
		}, 2, true},
		{"v1, one and a half CPUs", fstest.MapFS{
			"proc/self/cgroup": file("5:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n"),
			"sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us":  file("150000\n"),
			"sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us": file("100000\n"),
		}, 1.5, true},
		{"v1 under /sys/fs/cgroup/cpu, the container's own view", fstest.MapFS{
			"proc/self/cgroup":                         file("2:cpuacct:/\n1:cpu:/\n0::/\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":       file("25000\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us":      file("100000\n"),
			"sys/fs/cgroup/unified/cgroup.controllers": file(""),
		}, 0.25, true},
		{"v1, no quota (-1)", fstest.MapFS{
			"proc/self/cgroup":                    file("1:cpu:/\n0::/\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("-1\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 0, false},
		{"unreadable figures", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\ngarbage\n"),
			"sys/fs/cgroup/cpu.max": file("lots 100000\n"),
		}, 0, false},
		{"a zero period", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("50000 0\n"),
		}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, ok := cpuLimit(tc.fs)
			if limit != tc.limit || ok != tc.ok {
				t.Errorf("cpuLimit = %v, %v; want %v, %v", limit, ok, tc.limit, tc.ok)
			}
		})
	}
}
