package wire_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// analysisOpcodes are the IBTA opcode numbers (IB spec vol. 1, table 38)
// of the names the analysis files use, written out here rather than taken
// from wire's opcode table, which is under test.
var analysisOpcodes = map[string]wire.Opcode{
	"RC_SEND_FIRST":       0x00,
	"RC_SEND_MIDDLE":      0x01,
	"RC_SEND_LAST":        0x02,
	"RC_SEND_ONLY":        0x04,
	"RC_READ_REQUEST":     0x0C,
	"RC_READ_RESP_FIRST":  0x0D,
	"RC_READ_RESP_MIDDLE": 0x0E,
	"RC_READ_RESP_LAST":   0x0F,
	"RC_READ_RESP_ONLY":   0x10,
	"RC_ACK":              0x11,
	"RC_ATOMIC_ACK":       0x12,
	"RC_COMPARE_SWAP":     0x13,
	"RC_FETCH_ADD":        0x14,
}

// analysisRow is one packet line of a NAME.analysis.txt: the header fields
// of one RoCEv2 packet as the capture's own dissector printed them, an
// oracle written apart from goroce.
type analysisRow struct {
	line   string
	fields []string // no time src dst opcode dqp psn A, then the tail
	aeth   []string // "ACK(credits=31)" and the MSN, or nothing
	ip     []string // ipid DF tos ttl sport
	icrc   []string // "OK" and the ICRC value
	extra  map[string]string
}

// readAnalysis reads the packet lines (keyed by record number, from 1) and
// the summary counts of an analysis file.
func readAnalysis(t *testing.T, name string) (map[int]analysisRow, map[string]int) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, summary := map[int]analysisRow{}, map[string]int{}
	inSummary := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fs := strings.Fields(line)
		switch {
		case len(fs) == 0 || strings.HasPrefix(line, "# ") || fs[0] == "no":
		case strings.HasPrefix(line, "## summary"):
			inSummary = true
		case inSummary:
			// "NAME words   count"; the IPv4 ID sequences have no count.
			if n, err := strconv.Atoi(fs[len(fs)-1]); err == nil {
				summary[strings.Join(fs[:len(fs)-1], " ")] = n
			}
		default:
			no, err := strconv.Atoi(fs[0])
			k := indexOf(fs, "OK")
			if err != nil || k < 13 {
				t.Fatalf("%s: cannot read %q", name, line)
			}
			row := analysisRow{line: line, fields: fs[:8], aeth: fs[8 : k-5], ip: fs[k-5 : k], icrc: fs[k : k+2], extra: map[string]string{}}
			for _, kv := range fs[k+2:] {
				key, v, _ := strings.Cut(kv, "=")
				row.extra[key] = v
			}
			rows[no] = row
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, summary
}

func indexOf(fs []string, s string) int {
	for i, f := range fs {
		if f == s {
			return i
		}
	}
	return -1
}

// TestGoldenAnalysis checks every header field goroce decodes from the rxe
// captures that have a NAME.analysis.txt (ib_read_bw, ib_atomic_bw,
// rc_pingpong_ipv6, rc_pingpong_mtu4096) against that file, packet by
// packet: opcode, destination QP, PSN, AckReq, AETH syndrome and MSN,
// RETH, AtomicETH, AtomicAckETH, the stored ICRC, and the IP fields
// around them (Identification, DF, TOS or traffic class, TTL or hop
// limit, UDP source port). The summary's per-header counts (IPv4 DF, TOS,
// TTL; IPv6 traffic class, flow label, hop limit; UDP checksum) are
// recounted from the packets.
func TestGoldenAnalysis(t *testing.T) {
	files, err := filepath.Glob("testdata/*.analysis.txt")
	if err != nil || len(files) != 4 {
		t.Fatalf("analysis files: %v %v, want 4", files, err)
	}
	for _, name := range files {
		base := strings.TrimSuffix(filepath.Base(name), ".analysis.txt")
		t.Run(base, func(t *testing.T) {
			rows, summary := readAnalysis(t, name)
			counts := checkAnalysis(t, "testdata/"+base+".pcap", rows)
			for key, n := range summary {
				if strings.HasPrefix(key, "ipv4 ") || strings.HasPrefix(key, "ipv6 ") || key == "icrc_ok" {
					if counts[key] != n {
						t.Errorf("summary %q: %d packets, the analysis counts %d", key, counts[key], n)
					}
				}
			}
			for key, n := range counts {
				if _, ok := summary[key]; !ok {
					t.Errorf("%d packets with %q, which the analysis summary does not have", n, key)
				}
			}
		})
	}
}

// checkAnalysis compares the RoCEv2 packets of a capture with the rows and
// returns the summary keys it counted.
func checkAnalysis(t *testing.T, name string, rows map[int]analysisRow) map[string]int {
	counts := map[string]int{}
	seen := 0
	forRecords(t, name, func(no int, rec *pcap.Record) {
		d, ok := rec.RoCEv2()
		row, listed := rows[no]
		switch {
		case !ok && listed:
			t.Errorf("record %d: the analysis has a RoCEv2 packet, goroce's reader found none", no)
			return
		case !ok:
			return
		case !listed:
			t.Errorf("record %d: a RoCEv2 packet the analysis does not list", no)
			return
		}
		seen++
		pkt, err := wire.Parse(d.Payload)
		if err != nil {
			t.Errorf("record %d: Parse: %v", no, err)
			return
		}
		for _, bad := range compareRow(pkt, d, row) {
			t.Errorf("record %d: %s\n  %s", no, bad, row.line)
		}
		if wire.VerifyICRC(d.IP, d.UDP, d.Payload) {
			counts["icrc_ok"]++
		}
		udpSum := binary.BigEndian.Uint16(d.UDP[6:])
		if d.IP[0]>>4 == 4 {
			df := int(d.IP[6]>>6) & 1
			counts[fmt.Sprintf("ipv4 DF=%d TOS=0x%02x TTL=%d udpcsum=0x%04x", df, d.IP[1], d.IP[8], udpSum)]++
		} else {
			v := binary.BigEndian.Uint32(d.IP)
			counts[fmt.Sprintf("ipv6 tclass=0x%02x flow=0x%05x hlim=%d udpcsum=0x%04x", v>>20&0xFF, v&0xFFFFF, d.IP[7], udpSum)]++
		}
	})
	if seen != len(rows) {
		t.Errorf("%d RoCEv2 packets matched, the analysis lists %d", seen, len(rows))
	}
	return counts
}

// forRecords calls fn on every record of the capture name, numbered from 1
// as tcpdump and the analysis files number them.
func forRecords(t testing.TB, name string, fn func(no int, rec *pcap.Record)) {
	t.Helper()
	recs, err := pcap.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		fn(i+1, &recs[i])
	}
}

// compareRow returns a line for every field of pkt (and its datagram d)
// that differs from the analysis row.
func compareRow(pkt wire.Packet, d wire.Datagram, row analysisRow) []string {
	var bad []string
	check := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			bad = append(bad, fmt.Sprintf("%s: goroce reads %v, the analysis %v", what, got, want))
		}
	}
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("cannot read %q", s))
		}
		return v
	}
	dec := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("cannot read %q", s))
		}
		return v
	}
	fs, bth := row.fields, pkt.BTH()
	check("source", d.Src.Addr(), fs[2])
	check("destination", d.Dst.Addr(), fs[3])
	op, ok := analysisOpcodes[fs[4]]
	if !ok {
		bad = append(bad, fmt.Sprintf("opcode %s is not in analysisOpcodes", fs[4]))
	}
	check("opcode", bth.Opcode(), op)
	check("dest QP", uint64(bth.DestQP()), hex(fs[5]))
	check("PSN", uint64(bth.PSN()), dec(fs[6]))
	check("AckReq", bth.AckReq(), fs[7] == "1")

	aeth := pkt.AETH()
	switch {
	case len(row.aeth) == 0:
		check("AETH", aeth != nil, false)
	case aeth == nil:
		bad = append(bad, "no AETH, the analysis has "+strings.Join(row.aeth, " "))
	default:
		var credits uint8
		if _, err := fmt.Sscanf(row.aeth[0], "ACK(credits=%d)", &credits); err != nil {
			bad = append(bad, "cannot read "+row.aeth[0])
		}
		check("AETH syndrome", uint8(aeth.Syndrome()), credits) // ACK: 0b000 then the credit count
		check("AETH MSN", uint64(aeth.MSN()), dec(row.aeth[1]))
	}

	ipid, df, tos, ttl, sport := row.ip[0], row.ip[1], row.ip[2], row.ip[3], row.ip[4]
	if d.IP[0]>>4 == 4 {
		check("IPv4 ID", uint64(binary.BigEndian.Uint16(d.IP[4:])), hex(ipid))
		check("IPv4 DF", d.IP[6]>>6&1, dec(df))
		check("IPv4 TTL", d.IP[8], dec(ttl))
	} else {
		check("IPv4 ID on IPv6", ipid+df, "--")
		check("IPv6 hop limit", d.IP[7], dec(ttl))
	}
	check("TOS/traffic class", uint64(d.TOS), hex(tos))
	check("UDP source port", d.Src.Port(), dec(sport))
	check("ICRC", uint64(pkt.ICRC()), hex(row.icrc[1]))

	reth, atomic, ack := pkt.RETH(), pkt.AtomicETH(), pkt.AtomicAckETH()
	x := row.extra
	check("RETH present", reth != nil, x["len"] != "")
	check("AtomicETH present", atomic != nil, x["swap"] != "")
	check("AtomicAckETH present", ack != nil, x["orig"] != "")
	switch {
	case reth != nil:
		check("RETH VA", reth.VA(), hex(x["va"]))
		check("RETH rkey", uint64(reth.RKey()), hex(x["rkey"]))
		check("RETH DMA length", uint64(reth.DMALen()), dec(x["len"]))
	case atomic != nil:
		check("AtomicETH VA", atomic.VA(), hex(x["va"]))
		check("AtomicETH rkey", uint64(atomic.RKey()), hex(x["rkey"]))
		check("AtomicETH swap/add", atomic.SwapAdd(), dec(x["swap"]))
		check("AtomicETH compare", atomic.Compare(), dec(x["cmp"]))
	case ack != nil:
		check("AtomicAckETH original data", ack.OrigData(), dec(x["orig"]))
	}
	return bad
}

// TestGoldenIPv6ICRCMask takes the IPv6 packets rxe sent (traffic class 0,
// flow label 0, hop limit 64) and checks what the ICRC covers: rewriting
// the traffic class (DSCP and ECN), the flow label and the hop limit, as
// routers and ECN marking may, leaves it valid; changing an address or the
// payload length breaks it. The same packets verify from their endpoints
// alone, the way a device checks them without the real IPv6 header.
func TestGoldenIPv6ICRCMask(t *testing.T) {
	n := 0
	forRecords(t, "testdata/rc_pingpong_ipv6.pcap", func(_ int, rec *pcap.Record) {
		d, ok := rec.RoCEv2()
		if !ok {
			return
		}
		if d.IP[0]>>4 != 6 {
			t.Fatalf("rc_pingpong_ipv6: a RoCEv2 packet from %v is not IPv6", d.Src)
		}
		n++
		e := wire.Endpoints{Src: d.Src, Dst: d.Dst}
		if !e.Verify(d.Payload) {
			t.Errorf("packet %d: does not verify from its endpoints %v > %v", n, d.Src, d.Dst)
		}
		for _, m := range []struct {
			name  string
			edit  func(ip []byte)
			valid bool
		}{
			{"traffic class 0xb8, flow label 0xabcde", func(ip []byte) {
				binary.BigEndian.PutUint32(ip, 6<<28|0xb8<<20|0xabcde)
			}, true},
			{"ECN CE (traffic class 0x03)", func(ip []byte) { ip[1] |= 0x03 << 4 }, true},
			{"hop limit 1", func(ip []byte) { ip[7] = 1 }, true},
			{"source address", func(ip []byte) { ip[23] ^= 1 }, false},
			{"destination address", func(ip []byte) { ip[8+16] ^= 0x80 }, false},
			{"payload length", func(ip []byte) { ip[5]++ }, false},
		} {
			ip := append([]byte(nil), d.IP...)
			m.edit(ip)
			if got := wire.VerifyICRC(ip, d.UDP, d.Payload); got != m.valid {
				t.Errorf("packet %d, %s: ICRC verifies %v, want %v", n, m.name, got, m.valid)
			}
		}
	})
	if n != 20 {
		t.Errorf("%d IPv6 RoCEv2 packets, want 20", n)
	}
}
