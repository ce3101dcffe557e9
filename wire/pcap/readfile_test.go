package pcap_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/goroce/goroce/wire/pcap"
)

// ReadFile returns what Next returns, record for record, each with bytes of
// its own (Next's records share one buffer).
func TestReadFile(t *testing.T) {
	const name = "../testdata/rc_pingpong_multi.pcap"
	recs, err := pcap.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs {
		want, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: Next: %v", i+1, err)
		}
		if !bytes.Equal(rec.Frame, want.Frame) || !bytes.Equal(rec.IP, want.IP) || !rec.Time.Equal(want.Time) {
			t.Errorf("record %d differs from Next's", i+1)
		}
	}
	if _, err := r.Next(); err == nil {
		t.Errorf("ReadFile returned %d records, the file has more", len(recs))
	}
	if len(recs) < 2 || &recs[0].Frame[0] == &recs[1].Frame[0] {
		t.Errorf("records share their bytes")
	}
	if _, err := pcap.ReadFile("no-such.pcap"); err == nil {
		t.Error("a missing file gave no error")
	}
}
