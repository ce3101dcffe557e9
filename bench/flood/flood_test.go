package flood

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// TestRun floods a victim for a few hundred milliseconds per phase and
// checks the invariants, not the speeds: every legitimate WRITE succeeded
// and landed, nothing else touched the victim's memory, every datagram sent
// is accounted for (counted once by the victim in the counter its kind
// belongs to, or dropped by the kernel), the victim's QP stayed in RTS, the
// heap did not balloon and every goroutine ended.
func TestRun(t *testing.T) {
	cfg := Config{
		Duration: 200 * time.Millisecond, Batch: 32, SampleEvery: 20 * time.Millisecond,
		Victim: netip.MustParseAddr("127.77.11.1"), Peer: netip.MustParseAddr("127.77.11.2"),
		Attacker: netip.MustParseAddr("127.77.11.66"),
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := res.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if !res.OK() {
		t.Error("the run found problems (see the table above)")
	}
	if len(res.Phases) != 3 {
		t.Fatalf("%d phases, want 3", len(res.Phases))
	}
	for _, p := range res.Phases {
		if p.VictimQPState != qp.StateRTS {
			t.Errorf("%s: the victim's QP is in %v", p.Name, p.VictimQPState)
		}
		if n := p.VictimAll.Unaccounted(); n != 0 {
			t.Errorf("%s: %d datagrams the victim read went uncounted", p.Name, n)
		}
		if p.Legit && (p.Writes == 0 || p.SlotsVerified != res.Config.Outstanding) {
			t.Errorf("%s: %d WRITEs completed, %d slots verified", p.Name, p.Writes, p.SlotsVerified)
		}
		if !p.Flood {
			continue
		}
		for _, k := range AllKinds() {
			if p.Sent[k] == 0 {
				t.Errorf("%s: the attacker sent no %v datagram", p.Name, k)
			}
		}
		lost := p.KernelLost()
		if lost < 0 {
			t.Errorf("%s: the victim counted %d drops, more than the %d datagrams sent", p.Name, p.VictimAll.Dropped(), p.SentTotal())
		}
		if k := p.Kernel; k.Known && uint64(lost) > k.SocketDrops+k.BacklogDrops {
			t.Errorf("%s: %d datagrams never reached the victim, but the kernel dropped only %d (socket) + %d (backlog)",
				p.Name, lost, k.SocketDrops, k.BacklogDrops)
		}
	}
	if fl := res.Phase("flood"); fl.VictimAll["rcvd_pkts"] != 0 {
		t.Errorf("the victim's QP accepted %d of the attacker's packets", fl.VictimAll["rcvd_pkts"])
	}
	if g := res.FloodHeapGrowth(); g > 64<<20 {
		t.Errorf("the heap grew by %d MiB during the flood", g>>20)
	}
	if res.GoroutinesEnd > res.GoroutinesStart {
		t.Errorf("%d goroutines after the run, %d before", res.GoroutinesEnd, res.GoroutinesStart)
	}
	if !strings.Contains(out.String(), "summary: flood_pps=") {
		t.Error("the table has no summary line")
	}
}

// TestPackets checks that each kind's packets are what their kind says,
// judged by the same checks the victim makes: the parser, the ICRC from
// the attacker's address, the QPN and the length.
func TestPackets(t *testing.T) {
	tg := target{victim: netip.MustParseAddrPort("127.0.0.1:4791"), qpn: 0x123456, psn: 0xFFFFFE,
		rkey: 0xABCD, va: 0x10000, size: 1 << 16, pathMTU: 1024}
	src := netip.MustParseAddrPort("127.0.0.66:4791")
	m := newPacketMaker(tg, src, 1)
	e := wire.Endpoints{Src: src, Dst: tg.victim}
	for _, k := range AllKinds() {
		ps, err := m.packets(k)
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if len(ps) != variants {
			t.Fatalf("%v: %d packets, want %d", k, len(ps), variants)
		}
		for i, b := range ps {
			p, perr := wire.Parse(b)
			bad := func(why string) { t.Errorf("%v #%d (%d bytes): %s", k, i, len(b), why) }
			switch k {
			case Malformed, ZeroLength:
				if perr == nil {
					bad("parses")
				}
				if (k == ZeroLength) != (len(b) == 0) {
					bad("wrong length")
				}
				continue
			}
			if perr != nil {
				bad("does not parse: " + perr.Error())
				continue
			}
			if got := e.Verify(b); got != (k != BadICRC) {
				bad("ICRC verifies: " + map[bool]string{true: "yes", false: "no"}[got])
			}
			if got := p.BTH().DestQP(); (got == tg.qpn) != (k != UnknownQPN) {
				bad("wrong QPN")
			}
			if n := len(p.Payload()); (n > tg.pathMTU) != (k == Oversize) {
				bad("wrong payload length")
			}
			if va := p.RETH().VA(); va < tg.va || va+uint64(p.RETH().DMALen()) > tg.va+uint64(tg.size) {
				bad("address outside the target region")
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.9")
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"negative duration", Config{Duration: -time.Second}},
		{"batch too big", Config{Batch: 5000}},
		{"empty kinds", Config{Kinds: []Kind{}}},
		{"repeated kind", Config{Kinds: []Kind{BadICRC, BadICRC}}},
		{"unknown kind", Config{Kinds: []Kind{numKinds}}},
		{"write size", Config{WriteSize: 100}},
		{"outstanding", Config{Outstanding: 65}},
		{"MTU", Config{MTU: 1500}},
		{"not loopback", Config{Victim: netip.MustParseAddr("10.0.0.1")}},
		{"IPv6", Config{Attacker: netip.MustParseAddr("::1")}},
		{"same address", Config{Victim: lo, Peer: lo}},
	} {
		if _, err := Run(context.Background(), c.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Run returned %v, want ErrInvalidConfig", c.name, err)
		}
	}
}

func TestParseKinds(t *testing.T) {
	ks, err := ParseKinds("bad_icrc, zero_length")
	if err != nil || len(ks) != 2 || ks[0] != BadICRC || ks[1] != ZeroLength {
		t.Errorf("ParseKinds: %v, %v", ks, err)
	}
	if ks, err := ParseKinds("all"); err != nil || len(ks) != int(numKinds) {
		t.Errorf("ParseKinds(all): %v, %v", ks, err)
	}
	for _, s := range []string{"", "bad_icrc,bogus", "oversize,oversize"} {
		if _, err := ParseKinds(s); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseKinds(%q): %v, want ErrInvalidConfig", s, err)
		}
	}
}
