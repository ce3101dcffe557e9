package cpucoll

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// A Measurement is one mode (out of place or in place) of one row of an
// nccl-tests table.
type Measurement struct {
	Usec  float64 // mean time of one call, microseconds
	AlgBW float64 // bytes / time, GB/s (10^9 bytes)
	BusBW float64 // AlgBW × 2(n−1)/n for AllReduce, GB/s
	Wrong int     // wrong elements over all ranks; -1 when not checked
	Valid bool    // false when the library cannot run this mode (N/A)
}

// A Row is one size of an nccl-tests table.
type Row struct {
	Bytes      int // size of the buffer, bytes
	Count      int // elements
	OutOfPlace Measurement
	InPlace    Measurement
}

// ErrTable is wrapped by every error ParseTable returns.
var ErrTable = errors.New("cpucoll: not an nccl-tests table")

// ParseTable reads the rows of an nccl-tests table (all_reduce_perf's
// layout: size count type redop root, then time algbw busbw #wrong out of
// place and in place). Lines starting with '#', blank lines and lines
// whose first field is not a number (a launcher's notes) are skipped; a
// line that starts with a number but does not have the table's columns is
// an error, and so is a table without rows.
func ParseTable(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue
		}
		row, err := parseRow(f)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v: %q", ErrTable, line, err, sc.Text())
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTable, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrTable)
	}
	return rows, nil
}

// parseRow reads the 13 fields of a row: 5 that describe the call, then
// 4 per mode.
func parseRow(f []string) (Row, error) {
	if len(f) != 13 {
		return Row{}, fmt.Errorf("%d fields, want 13", len(f))
	}
	var row Row
	var err error
	if row.Bytes, err = strconv.Atoi(f[0]); err != nil {
		return Row{}, fmt.Errorf("size: %v", err)
	}
	if row.Count, err = strconv.Atoi(f[1]); err != nil {
		return Row{}, fmt.Errorf("count: %v", err)
	}
	if row.OutOfPlace, err = parseMeasurement(f[5:9]); err != nil {
		return Row{}, fmt.Errorf("out of place: %v", err)
	}
	if row.InPlace, err = parseMeasurement(f[9:13]); err != nil {
		return Row{}, fmt.Errorf("in place: %v", err)
	}
	return row, nil
}

// parseMeasurement reads time, algbw, busbw and #wrong. All four N/A is
// a mode the library does not have; #wrong alone N/A is an unchecked call.
func parseMeasurement(f []string) (Measurement, error) {
	if f[0] == "N/A" && f[1] == "N/A" && f[2] == "N/A" {
		return Measurement{Wrong: -1}, nil
	}
	m := Measurement{Valid: true, Wrong: -1}
	for i, p := range []*float64{&m.Usec, &m.AlgBW, &m.BusBW} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Measurement{}, fmt.Errorf("%q is not a non-negative number", f[i])
		}
		*p = v
	}
	if f[3] != "N/A" {
		w, err := strconv.Atoi(f[3])
		if err != nil || w < 0 {
			return Measurement{}, fmt.Errorf("#wrong %q is not a count", f[3])
		}
		m.Wrong = w
	}
	return m, nil
}
