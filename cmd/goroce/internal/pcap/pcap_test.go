package pcap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/cmd/goroce/internal/clitest"
	"github.com/goroce/goroce/wire/pcap"
)

const testdata = "../../../../wire/testdata"

// goldenPackets is how many RoCEv2 packets each rxe capture holds
// (tshark -Y 'udp.dstport==4791').
var goldenPackets = map[string]int{
	"ib_atomic_bw.pcap":        40,
	"ib_read_bw.pcap":          100,
	"ib_send_lat.pcap":         80,
	"ib_write_bw.pcap":         100,
	"rc_pingpong.pcap":         20,
	"rc_pingpong_ipv6.pcap":    20,
	"rc_pingpong_mtu4096.pcap": 18,
	"rc_pingpong_multi.pcap":   24,
	"rping.pcap":               41,
	"uc_pingpong.pcap":         10,
	"ud_pingpong.pcap":         10,
}

func goldenFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, "*.pcap"))
	if err != nil || len(files) != len(goldenPackets) {
		t.Fatalf("golden captures: %v %v", files, err)
	}
	return files
}

// goroce runs `goroce pcap ARGS...` in-process and returns its exit
// status and output.
func goroce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return clitest.Goroce(t, clitest.Command("pcap", Run), args...)
}

func TestPcapGoldens(t *testing.T) {
	for _, name := range goldenFiles(t) {
		code, out, errOut := goroce(t, "pcap", name)
		if code != cli.ExitOK || errOut != "" {
			t.Errorf("%s: exit %d, stderr %q", name, code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		n := goldenPackets[filepath.Base(name)]
		want := fmt.Sprintf("summary: packets=%d icrc_ok=%d icrc_bad=0 malformed=0", n, n)
		if got := lines[len(lines)-1]; got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
		if len(lines) != n+1 {
			t.Errorf("%s: %d lines, want %d packets and the summary", name, len(lines), n)
		}
		for _, l := range lines[:len(lines)-1] {
			if !strings.HasSuffix(l, " icrc=ok") {
				t.Errorf("%s: %q", name, l)
			}
		}
	}
}

// TestPcapLines pins the text form on a few rxe packets (times relative to
// the first record of rping.pcap, an IPv6 MLD report).
func TestPcapLines(t *testing.T) {
	_, out, _ := goroce(t, "pcap", filepath.Join(testdata, "rping.pcap"))
	for _, want := range []string{
		"12.138916 10.99.0.1 > 10.99.0.2 sport=54655 RC_RDMA_READ_REQUEST qp=0x000011 psn=0xe325d2 ackreq reth(va=0x55ecfa7c2d50 rkey=0x0000051d len=64) icrc=ok\n",
		"12.142102 10.99.0.2 > 10.99.0.1 sport=54655 RC_RDMA_READ_RESPONSE_ONLY qp=0x000011 psn=0xe325d2 aeth(ACK msn=1) len=64 icrc=ok\n",
		"12.148824 10.99.0.1 > 10.99.0.2 sport=54655 RC_RDMA_WRITE_ONLY qp=0x000011 psn=0xe325d4 ackreq reth(va=0x55ecfa7c2f30 rkey=0x0000043a len=64) len=64 icrc=ok\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing line %q", want)
		}
	}
}

func TestPcapSeveralFiles(t *testing.T) {
	files := goldenFiles(t)
	code, out, _ := goroce(t, append([]string{"pcap"}, files...)...)
	if code != cli.ExitOK {
		t.Errorf("exit %d", code)
	}
	for _, name := range files {
		if !strings.Contains(out, "==> "+name+" <==\n") {
			t.Errorf("no header for %s", name)
		}
	}
	if got := strings.Count(out, "summary: "); got != len(files) {
		t.Errorf("%d summaries, want %d", got, len(files))
	}
}

// rewrite copies a capture record by record into a new file in t's temp
// directory, letting edit change the raw IP packet of every RoCEv2 record
// (k counts them from 0). edit returns the new IP packet and how many of its
// bytes the capture keeps (the snap length cut).
func rewrite(t *testing.T, name string, edit func(k int, ip []byte) (newIP []byte, keep int)) string {
	t.Helper()
	outName := filepath.Join(t.TempDir(), filepath.Base(name))
	out, err := os.Create(outName)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w := pcapgo.NewWriterNanos(out)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	k := 0
	clitest.EachRecord(t, name, func(rec *pcap.Record) {
		frame, keep := bytes.Clone(rec.Frame), len(rec.Frame)
		if _, ok := rec.RoCEv2(); ok {
			link := len(rec.Frame) - len(rec.IP)
			ip, n := edit(k, bytes.Clone(rec.IP))
			frame, keep = append(frame[:link], ip...), link+n
			k++
		}
		ci := gopacket.CaptureInfo{Timestamp: rec.Time, CaptureLength: keep, Length: len(frame)}
		if err := w.WritePacket(ci, frame[:keep]); err != nil {
			t.Fatal(err)
		}
	})
	return outName
}

func unchanged(_ int, ip []byte) ([]byte, int) { return ip, len(ip) }

// The rxe captures are IPv4 with 20-byte headers: the UDP header starts at
// 20 and the RoCEv2 packet at 28.
const roceOff = 28

func TestPcapBadICRC(t *testing.T) {
	name := rewrite(t, filepath.Join(testdata, "rc_pingpong.pcap"), func(k int, ip []byte) ([]byte, int) {
		if k == 2 {
			ip[len(ip)-5] ^= 0x01 // last payload byte, just before the ICRC
		}
		return ip, len(ip)
	})
	code, out, _ := goroce(t, "pcap", name)
	if code != cli.ExitFail {
		t.Errorf("exit %d, want %d", code, cli.ExitFail)
	}
	if !strings.HasSuffix(out, "summary: packets=20 icrc_ok=19 icrc_bad=1 malformed=0\n") || strings.Count(out, "icrc=bad") != 1 {
		t.Errorf("output:\n%s", out)
	}
}

// cut shortens the RoCEv2 packet of an IPv4 datagram to n bytes, keeping
// the IP total length (and checksum) and UDP length consistent, so that it
// is still a well-formed UDP datagram to port 4791.
func cut(ip []byte, n int) []byte {
	ip = ip[:roceOff+n]
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[24:], uint16(8+n))
	fixIPv4Checksum(ip)
	return ip
}

func fixIPv4Checksum(ip []byte) {
	binary.BigEndian.PutUint16(ip[10:], 0)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}

// TestPcapECN: a Congestion Experienced mark shows as "ce" (and "ecn" in
// JSON); the ICRC does not cover the TOS byte, so it still verifies.
func TestPcapECN(t *testing.T) {
	name := rewrite(t, filepath.Join(testdata, "rc_pingpong.pcap"), func(k int, ip []byte) ([]byte, int) {
		if k == 0 {
			ip[1] = 0x03 // DSCP 0, ECN CE
			fixIPv4Checksum(ip)
		}
		return ip, len(ip)
	})
	code, out, _ := goroce(t, "pcap", name)
	if code != cli.ExitOK || !strings.Contains(out, "12.640758 10.99.0.2 > 10.99.0.1 sport=49458 ce RC_SEND_ONLY ") || strings.Count(out, " ce ") != 1 {
		t.Errorf("exit %d:\n%s", code, out)
	}
	_, out, _ = goroce(t, "pcap", "-json", name)
	if strings.Count(out, `"ecn":"ce"`) != 1 || strings.Count(out, `"ecn":"not_ect"`) != 19 {
		t.Errorf("JSON:\n%s", out)
	}
}

func TestJSONSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", 12071137 * time.Microsecond: "12.071137", time.Nanosecond: "0.000000001",
		-1500 * time.Millisecond: "-1.5", 3 * time.Second: "3",
	} {
		if got, _ := jsonSeconds(d).MarshalJSON(); string(got) != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}

func TestPcapMalformed(t *testing.T) {
	name := rewrite(t, filepath.Join(testdata, "rc_pingpong.pcap"), func(k int, ip []byte) ([]byte, int) {
		// Packets 0, 2 and 4 are SEND_ONLYs, 1 and 3 their ACKs.
		switch k {
		case 0:
			ip = cut(ip, 10) // shorter than a BTH and an ICRC
		case 2:
			ip[roceOff] = 0x4A // an RD opcode
		case 3:
			ip = cut(ip, 0) // an empty UDP datagram to 4791
		case 4:
			ip = cut(ip, 16)      // a SEND_ONLY with no payload...
			ip[roceOff+1] |= 0x30 // ...but 3 pad bytes
		}
		return ip, len(ip)
	})
	code, out, errOut := goroce(t, "pcap", name)
	if code != cli.ExitFail || errOut != "" {
		t.Errorf("exit %d, stderr %q; want %d", code, errOut, cli.ExitFail)
	}
	for _, want := range []string{
		"12.640758 10.99.0.2 > 10.99.0.1 sport=49458 malformed (packet shorter than its opcode's headers and ICRC)\n",
		"12.674720 10.99.0.2 > 10.99.0.1 sport=49458 malformed (packet shorter than its opcode's headers and ICRC)\n",
		"12.675804 10.99.0.2 > 10.99.0.1 sport=49458 malformed (pad count larger than the payload area)\n",
		"malformed (unknown opcode 0x4a)\n",
		"summary: packets=20 icrc_ok=",
		" malformed=4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, " malformed ("); got != 4 {
		t.Errorf("%d malformed lines, want 4:\n%s", got, out)
	}
}

// TestPcapSnapLength: packets the capture cut short are not counted, but
// the command says how many there were.
func TestPcapSnapLength(t *testing.T) {
	name := rewrite(t, filepath.Join(testdata, "ud_pingpong.pcap"), func(k int, ip []byte) ([]byte, int) {
		if k < 3 {
			return ip, 60
		}
		return ip, len(ip)
	})
	code, out, errOut := goroce(t, "pcap", name)
	if code != cli.ExitOK || !strings.HasSuffix(out, "summary: packets=7 icrc_ok=7 icrc_bad=0 malformed=0\n") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(errOut, ": 3 IP packets were cut short by the capture's snap length") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestPcapJSON(t *testing.T) {
	name := rewrite(t, filepath.Join(testdata, "rping.pcap"), func(k int, ip []byte) ([]byte, int) {
		if k == 3 { // an RC_SEND_ONLY
			ip = cut(ip, 12)
		}
		return ip, len(ip)
	})
	code, out, _ := goroce(t, "pcap", "--json", name)
	if code != cli.ExitFail {
		t.Errorf("exit %d, want %d", code, cli.ExitFail)
	}
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var o map[string]any
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		objs = append(objs, o)
	}
	if len(objs) != 42 {
		t.Fatalf("%d objects, want 41 packets and the summary", len(objs))
	}
	sum, ok := objs[41]["summary"].(map[string]any)
	if !ok || sum["packets"] != 41.0 || sum["icrc_ok"] != 40.0 || sum["icrc_bad"] != 0.0 || sum["malformed"] != 1.0 || sum["file"] != name {
		t.Errorf("summary %v", objs[41])
	}
	if objs[3]["malformed"] != "packet shorter than its opcode's headers and ICRC" || objs[3]["opcode"] != nil || objs[3]["src"] != "10.99.0.2" {
		t.Errorf("malformed object %v", objs[3])
	}
	read := objs[5] // RC_RDMA_READ_REQUEST, the line TestPcapLines pins
	reth, _ := read["reth"].(map[string]any)
	if read["opcode"] != "RC_RDMA_READ_REQUEST" || read["qp"] != 17.0 || read["psn"] != float64(0xe325d2) ||
		read["ackreq"] != true || read["icrc"] != "ok" || read["sport"] != 54655.0 || read["src"] != "10.99.0.1" ||
		reth["va"] != "0x55ecfa7c2d50" || reth["rkey"] != "0x0000051d" || reth["dma_len"] != 64.0 || read["len"] != nil {
		t.Errorf("read request object %v", read)
	}
	resp := objs[6]
	aeth, _ := resp["aeth"].(map[string]any)
	if resp["opcode"] != "RC_RDMA_READ_RESPONSE_ONLY" || aeth["kind"] != "ack" || aeth["value"] != 31.0 || aeth["msn"] != 1.0 || resp["len"] != 64.0 {
		t.Errorf("read response object %v", resp)
	}
	ud := objs[0]
	deth, _ := ud["deth"].(map[string]any)
	if deth["qkey"] != "0x80010000" || deth["src_qp"] != 1.0 || ud["ip_id"] == nil || ud["ecn"] != "not_ect" {
		t.Errorf("UD object %v", ud)
	}
	// The CM REQ to QP1, as tshark decodes it: class 0x07, attribute 0x0010,
	// transaction ID 0x0000000279349ee8.
	mad, _ := ud["mad"].(map[string]any)
	if mad["class"] != "0x07" || mad["attr_id"] != "0x0010" || mad["tid"] != "0x0000000279349ee8" ||
		!strings.HasPrefix(fmt.Sprint(mad["text"]), "CM_REQ comm_id=0xe89e3479 service_id=0x0000000001061c06 ") {
		t.Errorf("UD object's mad %v", ud["mad"])
	}
	if read["mad"] != nil {
		t.Errorf("an RC packet with a mad object: %v", read)
	}
}

func TestPcapUsage(t *testing.T) {
	golden := filepath.Join(testdata, "rc_pingpong.pcap")
	notCapture := filepath.Join(testdata, "rc_pingpong.txt")
	tests := []struct {
		args     []string
		code     int
		stdout   string // a substring
		stderr   string // a substring
		noStdout bool
	}{
		{args: []string{"pcap"}, code: cli.ExitUsage, stderr: "no capture file given", noStdout: true},
		{args: []string{"pcap", "-h"}, code: cli.ExitOK, stdout: "usage: goroce pcap [-json] FILE..."},
		{args: []string{"pcap", "--help"}, code: cli.ExitOK, stdout: "-json"},
		{args: []string{"help", "pcap"}, code: cli.ExitOK, stdout: "summary: packets=N"},
		{args: []string{"pcap", "-bogus", golden}, code: cli.ExitUsage, stderr: "flag provided but not defined: -bogus", noStdout: true},
		{args: []string{"pcap", "/nonexistent.pcap"}, code: cli.ExitUsage, stderr: "/nonexistent.pcap"},
		{args: []string{"pcap", notCapture}, code: cli.ExitUsage, stderr: "not a pcap or pcapng capture"},
		{args: []string{"pcap", notCapture, golden}, code: cli.ExitUsage, stdout: "summary: packets=20 icrc_ok=20"},
		{args: []string{"pcap", "-json", golden}, code: cli.ExitOK, stdout: `{"summary":{"file":`},
	}
	for _, tt := range tests {
		code, out, errOut := goroce(t, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) || tt.noStdout && out != "" {
			t.Errorf("goroce %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), code, tt.code, out, errOut)
		}
	}
}

// TestPcapCutFile: a capture that ends in the middle of a record still
// prints what it had, and the status says the file could not be read.
func TestPcapCutFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata, "rc_pingpong.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(name, b[:len(b)-30], 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := goroce(t, "pcap", name)
	if code != cli.ExitUsage || !strings.Contains(out, "summary: packets=") || !strings.Contains(errOut, "unexpected EOF") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

func TestPcapCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	if code := Run(ctx, []string{filepath.Join(testdata, "rping.pcap")}, &out, &errOut); code != cli.ExitUsage || !strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}

// FuzzPcap feeds arbitrary bytes as a capture file to the whole `goroce
// pcap` decoder, text and JSON. Nothing may panic; when the bytes are a
// capture, the counts add up and there is one line per packet plus the
// summary, and every JSON line parses. Seeded with the rxe captures' first
// 16 KiB.
//
//	go test -run '^$' -fuzz FuzzPcap ./cmd/goroce
func FuzzPcap(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdata, "*.pcap"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 16<<10)])
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		for _, asJSON := range []bool{false, true} {
			var out bytes.Buffer
			bw := bufio.NewWriter(&out)
			p := &pcapPrinter{w: bw, json: asJSON}
			sum, err := decodeCapture(context.Background(), p, "fuzz", bytes.NewReader(file))
			bw.Flush()
			if out.Len() == 0 {
				continue // not a capture
			}
			if sum.Packets != sum.ICRCOK+sum.ICRCBad+sum.Malformed {
				t.Fatalf("%+v does not add up", sum)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != sum.Packets+1 {
				t.Fatalf("%d lines for %d packets (%v)", len(lines), sum.Packets, err)
			}
			if asJSON {
				for _, l := range lines {
					if !json.Valid([]byte(l)) {
						t.Fatalf("invalid JSON %q", l)
					}
				}
			}
		}
	})
}

// TestPcapGSORuns decodes a capture that holds two GSO runs of goroce's as
// datagrams (wire/testdata/gso/veth.txt): each packet of a run gets its own
// line, marked, with its ICRC verified under the headers the kernel gave it.
func TestPcapGSORuns(t *testing.T) {
	code, out, errOut := goroce(t, "pcap", filepath.Join(testdata, "gso", "veth.pcap"))
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := []string{
		"0.000000 10.215.198.2 > 10.215.198.1 sport=4792 RC_RDMA_WRITE_FIRST qp=0x7cb7c4 psn=0x2fa7fb reth(va=0x2d034595ff40 rkey=0x6946da01 len=131008) len=1024 icrc=ok gso=1/2",
		"0.000000 10.215.198.2 > 10.215.198.1 sport=4792 RC_RDMA_WRITE_MIDDLE qp=0x7cb7c4 psn=0x2fa7fc len=1024 icrc=ok gso=2/2",
		"0.007666 10.215.198.2 > 10.215.198.1 sport=4792 RC_RDMA_WRITE_MIDDLE qp=0x7cb7c4 psn=0x2fa879 len=1024 icrc=ok gso=1/2",
		"0.007666 10.215.198.2 > 10.215.198.1 sport=4792 RC_RDMA_WRITE_LAST_WITH_IMMEDIATE qp=0x7cb7c4 psn=0x2fa87a ackreq imm=0x0001ffc0 len=960 icrc=ok gso=2/2",
		"summary: packets=4 icrc_ok=4 icrc_bad=0 malformed=0 gso_runs=2",
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
	code, out, _ = goroce(t, "pcap", "-json", filepath.Join(testdata, "gso", "veth.pcap"))
	if code != cli.ExitOK || !strings.Contains(out, `"gso":2,"gso_of":2`) || !strings.Contains(out, `"gso_runs":2`) {
		t.Errorf("-json: exit %d\n%s", code, out)
	}
}
