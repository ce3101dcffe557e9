package pcap_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// FuzzReader feeds arbitrary bytes to the Reader as a capture file and
// decodes every RoCEv2 packet it yields the way `goroce pcap` does. Nothing
// may panic, the Reader must stop (every record consumes input), and every
// packet that parses must survive a rebuild with wire.Build. Seeded
// with the rxe captures (their first 16 KiB), a capture from the Writer and a pcapng.
//
//	go test -run '^$' -fuzz FuzzReader ./wire/pcap
func FuzzReader(f *testing.F) {
	// The first 16 KiB of each golden hold its handshake and RoCEv2
	// exchanges; whole 100 KB files make minimizing an input very slow.
	const maxSeed = 16 << 10
	goldens, _ := filepath.Glob("../testdata/*.pcap")
	for _, name := range goldens {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), maxSeed)])
	}
	var w bytes.Buffer
	pw, _ := pcap.NewWriter(&w)
	for _, e := range []wire.Endpoints{rxeFlow, ipv6Flow} {
		for _, p := range testPackets() {
			pw.WriteRoCE(time.Unix(1, 0), e.Src, e.Dst, e.IPv4ID, 0, buildRoCE(f, p, e))
		}
	}
	pw.Close()
	f.Add(w.Bytes())
	var ng bytes.Buffer
	nw, _ := pcapgo.NewNgWriter(&ng, layers.LinkTypeLinuxSLL)
	frame := append(make([]byte, 14), 0x08, 0x00)
	frame = append(frame, w.Bytes()[24+16+14:24+16+100]...) // part of the first IPv4 packet
	nw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(frame), Length: len(frame)}, frame)
	nw.Flush()
	f.Add(ng.Bytes())

	f.Fuzz(func(t *testing.T, file []byte) {
		r, err := pcap.Open(bytes.NewReader(file))
		if err != nil {
			return
		}
		var line []byte
		for n := 0; ; n++ {
			if n > len(file) {
				t.Fatalf("%d records from %d bytes", n, len(file))
			}
			rec, err := r.Next()
			if err != nil {
				return
			}
			d, ok := rec.RoCEv2()
			if !ok {
				continue
			}
			pkt, err := wire.Parse(d.Payload)
			if err != nil {
				continue
			}
			line = wire.AppendText(line[:0], pkt)
			wire.VerifyICRC(d.IP, d.UDP, d.Payload)

			// What parses can be built again, and parses to the same
			// headers (reserved bits aside, which Build writes as zero).
			h := pkt.Headers()
			buf := make([]byte, wire.PacketLen(h.BTH.Opcode, len(pkt.Payload())))
			m, err := wire.Build(buf, &h, pkt.Payload())
			if err != nil {
				t.Fatalf("%v: Build: %v", pkt, err)
			}
			again, err := wire.Parse(buf[:m])
			if err != nil || again.Headers() != h || !bytes.Equal(again.Payload(), pkt.Payload()) {
				t.Fatalf("%v: rebuilt as %v, %v", pkt, again, err)
			}
		}
	})
}
