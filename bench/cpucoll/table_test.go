package cpucoll

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseTableGoldens(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []Row
	}{
		{"testdata/goroce_np2.txt", []Row{
			{Bytes: 8, Count: 2, OutOfPlace: Measurement{Usec: 153.4, Valid: true}, InPlace: Measurement{Usec: 321.5, Valid: true}},
			{Bytes: 32, Count: 8, OutOfPlace: Measurement{Usec: 184.3, Valid: true}, InPlace: Measurement{Usec: 230.1, Valid: true}},
		}},
		{"testdata/gloo_np2.txt", []Row{
			{Bytes: 8, Count: 2, OutOfPlace: Measurement{Wrong: -1}, InPlace: Measurement{Usec: 56.04, Valid: true}},
			{Bytes: 32, Count: 8, OutOfPlace: Measurement{Wrong: -1}, InPlace: Measurement{Usec: 89.45, Valid: true}},
		}},
	} {
		f, err := os.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseTable(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d rows, want %d", tc.file, len(got), len(tc.want))
		}
		for i, w := range tc.want {
			if got[i] != w {
				t.Errorf("%s row %d:\n got %+v\nwant %+v", tc.file, i, got[i], w)
			}
		}
	}
}

func TestParseTableKeepsColumns(t *testing.T) {
	rows, err := ParseTable(strings.NewReader(
		"[1] a launcher's note\n" +
			"     1048576        262144     float     sum      -1    242.9    4.32    6.48      0    224.6    4.67    7.00    N/A\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Bytes: 1048576, Count: 262144,
		OutOfPlace: Measurement{Usec: 242.9, AlgBW: 4.32, BusBW: 6.48, Wrong: 0, Valid: true},
		InPlace:    Measurement{Usec: 224.6, AlgBW: 4.67, BusBW: 7.00, Wrong: -1, Valid: true}}
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("got %+v, want [%+v]", rows, want)
	}
}

func TestParseTableRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"# only a header\n",
		"8 2 float sum -1 1.0 0.00 0.00 0\n", // too few fields
		"8 2 float sum -1 fast 0.00 0.00 0 1.0 0.00 0.00 0\n",               // time not a number
		"8 2 float sum -1 1.0 0.00 0.00 -3 1.0 0.00 0.00 0\n",               // negative #wrong
		"8 2 float sum -1 -1.0 0.00 0.00 0 1.0 0.00 0.00 0\n",               // negative time
		"8 2 float sum -1 NaN 0.00 0.00 0 1.0 0.00 0.00 0\n",                // NaN time
		"8 x float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 0\n",                // count not a number
		"8 2 float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 0 extra\n",          // too many fields
		"8 2 float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 zero\n",             // #wrong not a count
		"8 2 float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 0\n8 2 float sum\n", // a bad row after a good one
	} {
		if rows, err := ParseTable(strings.NewReader(in)); !errors.Is(err, ErrTable) {
			t.Errorf("ParseTable(%q) = %v, %v; want ErrTable", in, rows, err)
		}
	}
}
