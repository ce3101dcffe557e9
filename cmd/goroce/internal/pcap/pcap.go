package pcap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

const pcapAbout = `Decodes every RoCEv2 packet (UDP to port 4791) in pcap or pcapng captures,
one line each: time in seconds since the file's first packet, source and
destination address, UDP source port, the transport headers (opcode, QP, PSN,
flags, RETH/AETH/DETH/atomic fields, payload length), for a UD SEND to QP1
the connection-manager message it carries (CM_REQ, CM_REP, CM_RTU, CM_REJ,
CM_DREQ, ... with their key fields), and whether the ICRC verifies against
the captured IP and UDP headers. A packet that does not parse
is printed as malformed; "ce" after the port marks ECN Congestion
Experienced. A capture taken where the kernel had not yet cut a UDP GSO
send into datagrams (on the sending host, on a veth) holds a run of
packets as one datagram: each packet of such a run is printed on its own
line, marked gso=K/N, with the ICRC it has once the kernel gives it its own
IP and UDP headers. Other packets (TCP side channels, ARP, ...) are
skipped. Each file ends with
  summary: packets=N icrc_ok=N icrc_bad=N malformed=N [gso_runs=N]
Exit status: 0 if no packet had a bad ICRC or was malformed, 1 otherwise, 2 if
a file could not be read.`

// Run is `goroce pcap [-json] FILE...`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce pcap [-json] FILE...", pcapAbout)
	asJSON := fs.Bool("json", false, `one JSON object per packet, then {"summary":{...}}`)
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	files := fs.Args()
	if len(files) == 0 {
		fmt.Fprintln(stderr, "goroce pcap: no capture file given")
		fs.Usage()
		return cli.ExitUsage
	}

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	p := &pcapPrinter{w: out, json: *asJSON}
	code := cli.ExitOK
	for _, name := range files {
		if len(files) > 1 {
			p.fileHeader(name)
		}
		sum, err := decodeCaptureFile(ctx, p, name)
		out.Flush() // keep stdout and stderr in order
		if sum.TruncatedIP > 0 {
			fmt.Fprintf(stderr, "goroce pcap: %s: %d IP packets were cut short by the capture's snap length and not checked (capture with -s 0)\n", name, sum.TruncatedIP)
		}
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "goroce pcap: %s: %v\n", name, err)
			code = cli.ExitUsage
		case sum.ICRCBad+sum.Malformed > 0 && code == cli.ExitOK:
			code = cli.ExitFail
		}
		if ctx.Err() != nil {
			break // interrupted: the other files too
		}
	}
	return code
}

// pcapSummary counts what one capture held.
type pcapSummary struct {
	File        string `json:"file"`
	Packets     int    `json:"packets"`   // RoCEv2 datagrams
	ICRCOK      int    `json:"icrc_ok"`   // parsed, ICRC verifies
	ICRCBad     int    `json:"icrc_bad"`  // parsed, ICRC does not verify
	Malformed   int    `json:"malformed"` // rejected by wire.Parse
	GSORuns     int    `json:"gso_runs"`  // datagrams that were GSO runs, each of its packets counted above
	TruncatedIP int    `json:"-"`         // IP packets cut by the snap length, not counted above
}

// decodeCaptureFile opens the named capture and runs decodeCapture on it.
// The summary is printed whenever the file is a capture, even if reading
// it failed part way.
func decodeCaptureFile(ctx context.Context, p *pcapPrinter, name string) (pcapSummary, error) {
	f, err := os.Open(name)
	if err != nil {
		return pcapSummary{File: name}, err
	}
	defer f.Close()
	return decodeCapture(ctx, p, name, f)
}

// decodeCapture prints every RoCEv2 packet of the capture in r and then the
// summary, and returns the summary. It returns an error if r is not a
// capture or could not be read to its end.
func decodeCapture(ctx context.Context, p *pcapPrinter, name string, r io.Reader) (pcapSummary, error) {
	sum := pcapSummary{File: name}
	rd, err := pcap.Open(r)
	if err != nil {
		return sum, err
	}
	defer p.summary(&sum)
	var t0 time.Time
	for first := true; ; first = false {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return sum, nil
		}
		if err != nil {
			return sum, err
		}
		if first {
			t0 = rec.Time
		}
		d, ok := rec.RoCEv2()
		if !ok {
			if rec.IP != nil && rec.Truncated() {
				sum.TruncatedIP++
			}
			continue
		}
		pk := pcapPacket{time: rec.Time.Sub(t0), d: d}
		pk.pkt, pk.err = wire.Parse(d.Payload)
		pk.icrcOK = pk.err == nil && wire.VerifyICRC(d.IP, d.UDP, d.Payload)
		if !pk.icrcOK {
			if segs, ok := wire.SplitGSO(d); ok {
				sum.GSORuns++
				for k, seg := range segs {
					sp := pcapPacket{time: pk.time, d: seg, gso: k + 1, gsoOf: len(segs), icrcOK: true}
					sp.pkt, sp.err = wire.Parse(seg.Payload)
					sum.count(&sp)
					p.packet(&sp)
				}
				continue
			}
		}
		sum.count(&pk)
		p.packet(&pk)
	}
}

// count adds a packet to the summary.
func (s *pcapSummary) count(pk *pcapPacket) {
	s.Packets++
	switch {
	case pk.err != nil:
		s.Malformed++
	case pk.icrcOK:
		s.ICRCOK++
	default:
		s.ICRCBad++
	}
}

// pcapPacket is one RoCEv2 datagram of a capture and what was found in it.
type pcapPacket struct {
	time   time.Duration // since the capture's first record
	d      wire.Datagram
	pkt    wire.Packet // valid if err is nil
	err    error       // why wire.Parse rejected the datagram
	icrcOK bool
	// gso and gsoOf number a packet of a GSO run: packet gso of gsoOf (0
	// for a datagram that is one packet).
	gso, gsoOf int
}

// malformedReason says why wire.Parse rejected the packet, without the
// package prefix of its error.
func (pk *pcapPacket) malformedReason() string {
	if errors.Is(pk.err, wire.ErrBadOpcode) {
		return fmt.Sprintf("unknown opcode %#02x", pk.d.Payload[0])
	}
	return strings.TrimPrefix(pk.err.Error(), "wire: ")
}

// ecnName names the ECN codepoint in the low two bits of the IP TOS byte.
func ecnName(tos uint8) string {
	return [4]string{"not_ect", "ect1", "ect0", "ce"}[tos&3]
}

// pcapPrinter writes the output of `goroce pcap` as text or JSON lines.
type pcapPrinter struct {
	w    *bufio.Writer
	json bool
	line []byte // reused for each text line
}

// fileHeader starts a file's output when several files are decoded.
func (p *pcapPrinter) fileHeader(name string) {
	if p.json {
		p.writeJSON(struct {
			File string `json:"file"`
		}{name})
		return
	}
	fmt.Fprintf(p.w, "==> %s <==\n", name)
}

// summary ends a file's output.
func (p *pcapPrinter) summary(s *pcapSummary) {
	if p.json {
		p.writeJSON(struct {
			Summary *pcapSummary `json:"summary"`
		}{s})
		return
	}
	fmt.Fprintf(p.w, "summary: packets=%d icrc_ok=%d icrc_bad=%d malformed=%d",
		s.Packets, s.ICRCOK, s.ICRCBad, s.Malformed)
	if s.GSORuns > 0 {
		fmt.Fprintf(p.w, " gso_runs=%d", s.GSORuns)
	}
	fmt.Fprintln(p.w)
}

// packet prints one RoCEv2 datagram:
//
//	0.000123 10.99.0.2 > 10.99.0.1 sport=49152 RC_SEND_ONLY qp=0x000011 psn=0x439fb4 ackreq len=64 icrc=ok
//	0.000456 10.99.0.2 > 10.99.0.1 sport=49152 malformed (unknown opcode 0x4a)
//
// An ECN Congestion Experienced mark shows as "ce" after the port.
func (p *pcapPrinter) packet(pk *pcapPacket) {
	if p.json {
		p.writeJSON(newPacketJSON(pk))
		return
	}
	b := strconv.AppendFloat(p.line[:0], pk.time.Seconds(), 'f', 6, 64)
	b = append(b, ' ')
	b = pk.d.Src.Addr().AppendTo(b)
	b = append(b, " > "...)
	b = pk.d.Dst.Addr().AppendTo(b)
	b = append(b, " sport="...)
	b = strconv.AppendUint(b, uint64(pk.d.Src.Port()), 10)
	if pk.d.TOS&3 == 3 {
		b = append(b, " ce"...)
	}
	b = append(b, ' ')
	if pk.err != nil {
		b = append(b, "malformed ("...)
		b = append(b, pk.malformedReason()...)
		b = append(b, ')')
	} else {
		b = wire.AppendText(b, pk.pkt)
		if pk.icrcOK {
			b = append(b, " icrc=ok"...)
		} else {
			b = append(b, " icrc=bad"...)
		}
		if pk.gso > 0 {
			b = fmt.Appendf(b, " gso=%d/%d", pk.gso, pk.gsoOf)
		}
	}
	b = append(b, '\n')
	p.w.Write(b)
	p.line = b
}

func (p *pcapPrinter) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Not expected: only structs of strings, numbers and booleans.
		b = fmt.Appendf(nil, `{"error":%q}`, err.Error())
	}
	p.w.Write(b)
	p.w.WriteByte('\n')
}
