//go:build linux

package stat

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/cm"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
	"github.com/goroce/goroce/wire"
)

// scribble writes, into the ring file at path, a slot whose length is
// beyond the slot and a frame that is no IP datagram, and publishes both,
// as any process of the same user may: the layout is rnic/shmlink's
// (ring.go: slots at byte 8, slot size at 12, head at 64, slots from
// 256, each a 4-byte length and the frame).
func scribble(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	le := binary.LittleEndian
	slots, size, head := uint64(le.Uint32(mem[8:])), uint64(le.Uint32(mem[12:])), le.Uint64(mem[64:])
	slot := func(i uint64) []byte { at := 256 + (i&(slots-1))*size; return mem[at : at+size] }
	le.PutUint32(slot(head), uint32(size)+1) // beyond the slot: the ring is dropped
	le.PutUint64(mem[64:], head+1)           // published
	le.PutUint32(slot(head+1), 40)           // 40 bytes of zeros (a fresh slot): no IPv4 header
	le.PutUint64(mem[64:], head+2)           // published after the receiver dropped the ring's contents
}

// badMAD is a MAD of the CM's class with a class version ib_cm does not
// speak, which it drops (cm_rx_drop_bad_mad).
func badMAD() []byte {
	m := make([]byte, wire.MADLen)
	m[0], m[1], m[2], m[3] = wire.MADBaseVersion, wire.MgmtClassCM, 9, wire.MADMethodSend
	binary.BigEndian.PutUint16(m[16:], wire.CMAttrREQ)
	return m
}

// metric returns the value of the Prometheus counter goroce_NAME_total
// in the body of a /metrics scrape, or -1.
func metric(body []byte, name string) int {
	m := regexp.MustCompile(`(?m)^goroce_` + name + `_total\{[^}]*\} (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return int(v)
}

// TestDropsReachMetricsAndStat: a device over shared memory whose ring
// another process scribbles on, and whose CM gets a MAD it cannot speak,
// drops both, and its /metrics and goroce stat show why: shmlink's
// shm_rx_bad_ring and shm_rx_bad_frame, and ib_cm's cm_rx_msgs_* beside
// the CM's cm_rx_drop_bad_mad.
func TestDropsReachMetricsAndStat(t *testing.T) {
	dir := t.TempDir()
	addr := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s + ":4791") }
	openDev := func(a netip.AddrPort) *rnic.Device {
		l, err := shmlink.Open(shmlink.Config{Local: a, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		d, err := rnic.Open(rnic.Config{Addr: a, Link: l})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	victim, sender := openDev(addr("127.137.2.1")), openDev(addr("127.137.2.2"))
	c, err := cm.Open(victim, cm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	metricsAddr := clitest.ServeMetrics(t, victim)

	// A third process's link makes a ring to the victim, then writes
	// into it what no honest sender would.
	raw, err := shmlink.Open(shmlink.Config{Local: addr("127.137.2.3"), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if _, err := raw.WriteBatch([]link.Packet{{Buf: make([]byte, 64), Addr: victim.Addr()}}); err != nil {
		t.Fatal(err)
	}
	scribble(t, filepath.Join(dir, "127.137.2.3:4791,127.137.2.1:4791.ring"))

	// A UD QP of the sender's sends the bad MAD to the victim's QP1 (with
	// QP1's Q_Key, its own: a WR's Q_Key with the high bit set means the
	// QP's).
	pd, _ := sender.AllocPD()
	cq, _ := sender.CreateCQ(4)
	q, err := sender.CreateQP(pd, &qp.InitAttr{Type: qp.UD, SendCQ: cq, RecvCQ: cq, Cap: qp.Cap{MaxSendWR: 2, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		attr qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, QKey: wire.GSIQKey, PortNum: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS}, qp.AttrState | qp.AttrSQPSN},
	} {
		if err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	m, err := pd.RegMR(badMAD(), mr.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: m.Addr(), Length: wire.MADLen, LKey: m.LKey()}},
		AH: &qp.AH{GID: victim.GID()}, RemoteQPN: wire.GSIQPN, RemoteQKey: wire.GSIQKey}); err != nil {
		t.Fatal(err)
	}

	want := map[string]int{"shm_rx_bad_ring": 1, "shm_rx_bad_frame": 1, "cm_rx_drop_bad_mad": 1, "cm_rx_msgs_req": 0}
	var body []byte
	scrape := func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		for name, v := range want {
			if metric(body, name) != v {
				return false
			}
		}
		return true
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !scrape() {
		select {
		case <-tick.C:
		case <-deadline:
			got := map[string]int{}
			for name := range want {
				got[name] = metric(body, name)
			}
			t.Fatalf("waited 30 s for /metrics to count %v; it shows %v\n%v", want, got, victim.Counters())
		}
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"stat", metricsAddr}, &out, &errOut); code != cli.ExitOK {
		t.Fatalf("goroce stat exit %d: %s", code, errOut.String())
	}
	for name, v := range want {
		if !regexp.MustCompile(fmt.Sprintf(`\b%s %d\b`, name, v)).Match(out.Bytes()) {
			t.Errorf("goroce stat does not print %s %d:\n%s", name, v, out.String())
		}
	}
}
