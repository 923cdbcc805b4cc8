package tune

import "testing"

func TestLimitFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int64
	}{
		{0, limitFloor},
		{4 * mib, limitFloor},        // an ordinary run: the floor
		{18 * mib, limitFloor},       // a steady refresh of 2,000 sessions: 18 + 16 MiB
		{24 * mib, 40 * mib},         // live + 16 MiB
		{30 * mib, smallCeiling},     // 30 + 16 MiB: the ceiling of a small heap
		{39 * mib, 51 * mib},         // a million entries read: live + 12 MiB
		{56 * mib, 70 * mib},         // verify of a million entries: live + a quarter
		{1 << 30, (1 << 30) * 5 / 4}, // whatever it holds, a quarter again above it
	} {
		if got := limitFor(tc.live); got != tc.want {
			t.Errorf("limitFor(%d MiB) = %d MiB, want %d MiB", tc.live/mib, got/mib, tc.want/mib)
		}
	}
}
