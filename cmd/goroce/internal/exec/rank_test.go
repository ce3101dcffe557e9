package exec

import "testing"

// TestRankAddr checks the address each local rank of a launcher's job
// gets: the base moved on by the local rank, the port kept, and an error
// where the family's addresses run out.
func TestRankAddr(t *testing.T) {
	for _, tc := range []struct {
		base string
		r    int
		want string // "" for an error
	}{
		{"127.0.0.1", 0, "127.0.0.1"},
		{"127.0.0.1", 3, "127.0.0.4"},
		{"127.140.0.254", 3, "127.140.1.1"},
		{"127.140.0.10:5000", 2, "127.140.0.12:5000"},
		{"fd00::1", 2, "fd00::3"},
		{"[fd00::ffff]:4791", 1, "[fd00::1:0]:4791"},
		{"255.255.255.254", 1, "255.255.255.255"},
		{"255.255.255.254", 2, ""},
		{"localhost", 0, ""},
	} {
		got, err := rankAddr(tc.base, tc.r)
		if tc.want == "" && err == nil || tc.want != "" && got != tc.want {
			t.Errorf("rankAddr(%q, %d) = %q, %v; want %q", tc.base, tc.r, got, err, tc.want)
		}
	}
}

// TestRankFile checks the per-rank name of a file: .rankN before the
// extension.
func TestRankFile(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/tmp/job.pcap", "/tmp/job.rank3.pcap"},
		{"/tmp/job", "/tmp/job.rank3"},
		{"/tmp/a.b/job.x.pcap", "/tmp/a.b/job.x.rank3.pcap"},
	} {
		if got := rankFile(tc.path, 3); got != tc.want {
			t.Errorf("rankFile(%q, 3) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
