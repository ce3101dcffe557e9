//go:build unix

package ncclperf

import (
	"regexp"
	"sync"
	"testing"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
)

// TestTwoDemosAtOnce runs two goroce demos at the same time with the
// default flags but small sizes: both must succeed, their ranks on
// different, freshly drawn loopback addresses (with the one fixed base
// 127.0.0.10, the second demo's ranks could not bind).
func TestTwoDemosAtOnce(t *testing.T) {
	t.Setenv("NCCL_IB_TIMEOUT", clitest.KillIBTimeout) // see TestDemo
	var codes [2]int
	var outs, errOuts [2]string
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			codes[i], outs[i], errOuts[i] = clitest.Goroce(t, run, "demo", "-n", "2", "--size", "64K", "--iters", "1", "--device=false")
		})
	}
	wg.Wait()
	rank0 := regexp.MustCompile(`with a software RNIC each at (127\.\d+\.\d+\.10):4791 `)
	var addrs [2]string
	for i := range 2 {
		if codes[i] != cli.ExitOK {
			t.Errorf("demo %d: exit %d\nstdout:\n%s\nstderr:\n%s", i, codes[i], outs[i], errOuts[i])
			continue
		}
		m := rank0.FindStringSubmatch(outs[i])
		if m == nil {
			t.Errorf("demo %d: no rank 0 device at 127.A.B.10:\n%s", i, outs[i])
			continue
		}
		addrs[i] = m[1]
	}
	if addrs[0] != "" && addrs[0] == addrs[1] {
		t.Errorf("both demos put rank 0 at %s", addrs[0])
	}
}
