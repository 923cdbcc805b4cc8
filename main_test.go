package main

import "testing"

func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		env           string
		current, want int
	}{
		{"", 2, 3}, // the runtime's 2 (CPUs or the cgroup's quota) and one more
		{"", 1, 2},
		{"2", 2, 2}, // GOMAXPROCS set: as the user said
		{"8", 8, 8},
	} {
		if got := procsFor(tc.env, tc.current); got != tc.want {
			t.Errorf("procsFor(%q, %d) = %d, want %d", tc.env, tc.current, got, tc.want)
		}
	}
}
