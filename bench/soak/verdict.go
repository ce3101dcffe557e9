package soak

import (
	"fmt"

	"github.com/goroce/goroce/qp"
)

// Verdict is the outcome of a soak: OK, or the list of what failed.
type Verdict struct {
	OK       bool
	Problems []string
}

// Judge decides a soak from the lanes' final counts and the baseline and
// final resource samples:
//
//   - every lane finished rounds, had no errors and no mismatched payload;
//   - every send WR completed exactly once, with success;
//   - every receive WR completed or was flushed; on RC, one receive per
//     consuming send (SEND, SEND_WITH_IMM, RDMA_WRITE_WITH_IMM) and none
//     flushed; on UC and UD, no more receives than consuming sends;
//   - final RSS ≤ baseline × (1 + RSSFactor) + RSSBytes, and final
//     goroutines ≤ baseline + Goroutines.
func Judge(lanes []LaneCounts, baseline, final Resources, tol Tolerance) Verdict {
	var v Verdict
	fail := func(format string, args ...any) { v.Problems = append(v.Problems, fmt.Sprintf(format, args...)) }
	for i := range lanes {
		c := &lanes[i]
		if c.Rounds == 0 {
			fail("%s: no round finished", c.Lane)
		}
		if c.Errors > 0 {
			fail("%s: %d errors, first: %q", c.Lane, c.Errors, c.FirstErrors)
		}
		if c.Mismatches > 0 {
			fail("%s: %d payloads not what was sent", c.Lane, c.Mismatches)
		}
		for op, o := range c.Sends {
			if o.Posted != o.Completed || o.Failed > 0 {
				fail("%s: %v: %d posted, %d completed with success, %d failed", c.Lane, qp.WROpcode(op), o.Posted, o.Completed, o.Failed)
			}
		}
		if c.RecvPosted != c.RecvCompleted+c.RecvFlushed {
			fail("%s: %d receives posted, %d completed + %d flushed", c.Lane, c.RecvPosted, c.RecvCompleted, c.RecvFlushed)
		}
		switch consuming := c.Consuming(); {
		case c.Transport == qp.RC && (c.RecvCompleted != consuming || c.RecvFlushed != 0):
			fail("%s: %d consuming sends but %d receives completed, %d flushed", c.Lane, consuming, c.RecvCompleted, c.RecvFlushed)
		case c.RecvCompleted > consuming:
			fail("%s: %d receives completed for %d consuming sends", c.Lane, c.RecvCompleted, consuming)
		}
	}
	if limit := uint64(float64(baseline.RSS)*(1+tol.RSSFactor)) + tol.RSSBytes; final.RSS > limit {
		fail("RSS grew from %s after warm-up to %s, above the limit %s (+%.0f%% + %s)",
			MiB(baseline.RSS), MiB(final.RSS), MiB(limit), 100*tol.RSSFactor, MiB(tol.RSSBytes))
	}
	if final.Goroutines > baseline.Goroutines+tol.Goroutines {
		fail("goroutines grew from %d after warm-up to %d (+%d allowed)", baseline.Goroutines, final.Goroutines, tol.Goroutines)
	}
	v.OK = len(v.Problems) == 0
	return v
}

// MiB formats a byte count in mebibytes.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
