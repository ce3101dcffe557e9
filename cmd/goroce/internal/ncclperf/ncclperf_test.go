//go:build unix

package ncclperf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/nccl"
	"github.com/goroce/goroce/nccl/reduce"
	"github.com/goroce/goroce/nccl/transport"
)

// nccl-perf -np 2 all_reduce: the table parses, has one row per size,
// counts and bus bandwidths as nccl-tests defines them, and no wrong
// element.
func TestNcclPerfAllReduceNp2(t *testing.T) {
	code, out, errOut := clitest.Goroce(t, run, "nccl-perf", "all_reduce", "-np", "2", "-b", "8", "-e", "1M", "-f", "4", "-c", "1",
		"-n", "5", "-w", "1", "--addr-base", clitest.TestBase())
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 5 agg iters: 1 validation: 1 graph: 0\n",
		"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n",
		"#  Rank  1 Group  0 Pid",
		"# Out of bounds values : 0 OK\n",
		"# Avg bus bandwidth    : ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var sizes []int
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 13 {
			t.Fatalf("row %q has %d fields, want 13", line, len(f))
		}
		size, _ := strconv.Atoi(f[0])
		count, _ := strconv.Atoi(f[1])
		sizes = append(sizes, size)
		if count != size/4 || f[2] != "float" || f[3] != "sum" || f[4] != "-1" {
			t.Errorf("row %q: want count size/4, float, sum, root -1", line)
		}
		for _, half := range [][]string{f[5:9], f[9:13]} {
			var v [3]float64
			for i := range v {
				var err error
				if v[i], err = strconv.ParseFloat(half[i], 64); err != nil || v[i] < 0 {
					t.Errorf("row %q: field %q", line, half[i])
				}
			}
			// 2 ranks: busbw = algbw × 2(n-1)/n = algbw.
			if v[0] <= 0 || math.Abs(v[1]-v[2]) > 0.0051 || half[3] != "0" {
				t.Errorf("row %q: time %v algbw %v busbw %v #wrong %s", line, v[0], v[1], v[2], half[3])
			}
		}
	}
	if fmt.Sprint(sizes) != "[8 32 128 512 2048 8192 32768 131072 524288]" {
		t.Errorf("sizes %v", sizes)
	}
}

// Every collective, every way nccl-perf runs it (out of place and in
// place, several types and ops, rooted at the last rank), on 3 ranks in
// memory: the references agree with the library, and a corrupted element
// is counted.
func TestPerfCollsCheck(t *testing.T) {
	const n = 3
	type dtOp struct {
		dt nccl.DataType
		op nccl.Op
	}
	// The reducing collectives run every type with every op, checked
	// against the plain reference; the others a few types.
	var all []dtOp
	for _, dt := range reduce.DataTypes {
		for _, op := range reduce.Ops {
			all = append(all, dtOp{dt, op})
		}
	}
	some := []dtOp{{nccl.Float32, nccl.Sum}, {nccl.BFloat16, nccl.Prod}, {nccl.Int8, nccl.Min}, {nccl.Float64, nccl.Avg}, {nccl.Uint32, nccl.Max}}
	for _, coll := range perfColls {
		cases := some
		if coll.reduces {
			cases = all
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%v/%v", coll.name, tc.dt, tc.op), func(t *testing.T) {
				f := transport.NewMemFabric(n)
				comms := make([]*nccl.Comm, n)
				cases := make([]*perfCase, n)
				for r := range n {
					c, err := nccl.NewComm(f.Rank(r), nccl.Options{})
					if err != nil {
						t.Fatal(err)
					}
					defer c.Abort()
					comms[r] = c
					cases[r] = newPerfCase(&coll, r, n, 3*100*tc.dt.Size()+5, tc.dt, tc.op, n-1)
				}
				for _, inPlace := range []bool{true, false} {
					reqs := make([]*nccl.Request, n)
					for r, pc := range cases {
						pc.prepare(inPlace)
						reqs[r] = pc.call(comms[r], inPlace)
					}
					for r, q := range reqs {
						if err := q.Wait(t.Context()); err != nil {
							t.Fatalf("rank %d, %s: %v", r, placeName(inPlace), err)
						}
					}
					for r, pc := range cases {
						w := pc.wrong(inPlace)
						if inPlace && !coll.checkInPlace {
							if w != -1 {
								t.Errorf("rank %d in place: wrong %d, want -1 (not checked)", r, w)
							}
							continue
						}
						if w != 0 {
							t.Errorf("rank %d, %s: %d wrong elements", r, placeName(inPlace), w)
						}
					}
				}
				// Corrupt the root's out-of-place result, the last one
				// computed (every collective defines the root's).
				pc := cases[n-1]
				_, recv := pc.buffers(false)
				if pc.count > 0 {
					recv[len(recv)-1] ^= 0x40
					if w := pc.wrong(false); w < 1 {
						t.Errorf("corrupted result: wrong %d", w)
					}
				}
			})
		}
	}
}

func TestNcclPerfUsage(t *testing.T) {
	for _, args := range [][]string{
		{"nccl-perf"},
		{"nccl-perf", "all_reduce", "broadcast"},
		{"nccl-perf", "allreduce"},
		{"nccl-perf", "all_reduce", "-b", "1M", "-e", "8"},
		{"nccl-perf", "all_reduce", "-d", "float8"},
		{"nccl-perf", "all_reduce", "-o", "xor"},
		{"nccl-perf", "all_reduce", "-g", "2"},
		{"nccl-perf", "all_reduce", "-f", "0"},
	} {
		if code, _, errOut := clitest.Goroce(t, run, args...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, cli.ExitUsage, errOut)
		}
	}
}
