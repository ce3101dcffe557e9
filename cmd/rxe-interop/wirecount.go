package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/goroce/goroce/wire"
	"github.com/goroce/goroce/wire/pcap"
)

// flow is one direction of a case's capture: what one side sent.
type flow struct {
	Packets  int // RoCEv2 packets
	Bytes    int // their payload bytes (pad excluded)
	Requests int // request packets: SEND, WRITE, READ request, atomic
	// Responses: READ response packets and atomic ACKs; ACKs and NAKs are
	// the plain acknowledgements by syndrome (an RNR NAK counts as a NAK).
	ReadResponses, AtomicACKs, ACKs, NAKs int
	// Retransmits counts request and READ response packets whose PSN this
	// side had already sent to the same QP after a NAK from the other side
	// or at least a QP timeout after the first copy: go-back-N. Duplicates
	// counts the other repeats, which neither a NAK nor a timeout explains:
	// the sender sent the packet twice on its own.
	Retransmits, Duplicates int
	// ReadRepeats counts READ response packets sent again for a READ
	// request that came again (a responder must answer a duplicate READ).
	ReadRepeats int
	// AheadOfACK counts request packets this side sent while it owed an
	// acknowledgement for a request the other side had asked one for
	// (AckReq), before sending it: a NIC acknowledges a message before its
	// completion can wake the program that answers it, so only a device
	// that defers its ACKs sends an answer first (eventOrder).
	AheadOfACK int
	// Data holds, packet by packet, the payloads this side sent (SEND,
	// WRITE, READ response) with their opcodes, for the data checks.
	Data []sentPayload
	// OrigValues holds the original values of this side's atomic ACKs,
	// in order; Atomics this side's atomic requests.
	OrigValues []uint64
	Atomics    []atomicReq
}

// sentPayload is one data-carrying packet's opcode, destination QP, PSN,
// payload, and for the first packet of an RDMA WRITE the address it
// writes to.
type sentPayload struct {
	op      wire.Opcode
	qp      uint32
	psn     wire.PSN
	payload []byte
	va      uint64
}

// atomicReq is one FETCH_ADD's target and addend.
type atomicReq struct {
	va, add uint64
}

// wireCount is a case's capture, both ways.
type wireCount struct {
	goroce, rxe flow
}

// countWire reads the capture at path and sorts its RoCEv2 packets by
// sender: goroceAddr's, and the rest (rxe's). It parses the packets
// itself (wire.Parse), so that it sees their payloads. timeout is the
// QPs' local ACK timeout: a repeat sent that long after the first copy
// is a retransmission. skipCM leaves out CM MADs (packets to QP1): a case
// that does not connect through the CM has none of its own, but the next
// rdma_cm case's REQ may fall inside its capture.
func countWire(path, goroceAddr string, timeout time.Duration, skipCM bool) (wireCount, error) {
	var w wireCount
	f, err := os.Open(path)
	if err != nil {
		return w, err
	}
	defer f.Close()
	r, err := pcap.Open(f)
	if err != nil {
		return w, err
	}
	// A request's PSN is its sender's; a READ response's is the
	// requester's, from the other side's PSN space: they are told apart.
	type psnKey struct {
		qp       uint32
		psn      wire.PSN
		response bool
	}
	first := [2]map[psnKey]time.Time{{}, {}}
	naked := [2]bool{}     // whether the other side has sent a NAK yet
	readAgain := [2]bool{} // whether the other side has sent a READ request again
	owesACK := [2]bool{}   // whether this side owes the other an acknowledgement
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return w, nil
		}
		if err != nil {
			return w, err
		}
		d, ok := rec.RoCEv2()
		if !ok {
			continue
		}
		p, err := wire.Parse(d.Payload)
		if err != nil {
			continue // counted as malformed by goroce pcap's report
		}
		if skipCM && p.BTH().DestQP() == wire.GSIQPN {
			continue // a CM MAD of the next rdma_cm case, caught at the capture's edge
		}
		side, fl := 1, &w.rxe
		if d.Src.Addr().Unmap().String() == goroceAddr {
			side, fl = 0, &w.goroce
		}
		info := p.Info()
		pay := p.Payload()
		switch {
		case info.Has(wire.HasAETH): // an ACK, NAK, READ response or atomic ACK
			owesACK[side] = false
		case info.Request && info.Transport == wire.RC:
			if owesACK[side] {
				fl.AheadOfACK++
			}
			if p.BTH().AckReq() {
				owesACK[1-side] = true
			}
		}
		fl.Packets++
		fl.Bytes += len(pay)
		switch {
		case info.Request:
			fl.Requests++
			if info.Has(wire.HasAtomicETH) {
				a := p.AtomicETH()
				fl.Atomics = append(fl.Atomics, atomicReq{va: a.VA(), add: a.SwapAdd()})
			}
		case info.Op == wire.OpReadResponse:
			fl.ReadResponses++
		case p.Opcode() == wire.RCAtomicAck:
			fl.AtomicACKs++
			fl.OrigValues = append(fl.OrigValues, p.AtomicAckETH().OrigData())
		}
		if info.Has(wire.HasAETH) {
			switch s := p.AETH().Syndrome(); {
			case s.IsNAK(), s.IsRNRNAK():
				fl.NAKs++
			case p.Opcode() == wire.RCAck:
				fl.ACKs++
			}
		}
		if info.Has(wire.HasAETH) {
			if s := p.AETH().Syndrome(); s.IsNAK() || s.IsRNRNAK() {
				naked[1-side] = true
			}
		}
		if info.Request || info.Op == wire.OpReadResponse {
			k := psnKey{p.BTH().DestQP(), p.BTH().PSN(), info.Op == wire.OpReadResponse}
			if t0, ok := first[side][k]; !ok {
				first[side][k] = rec.Time
			} else if info.Op == wire.OpReadResponse && readAgain[side] {
				fl.ReadRepeats++
			} else if naked[side] || rec.Time.Sub(t0) >= timeout {
				fl.Retransmits++
			} else {
				fl.Duplicates++
			}
			if p.Opcode() == wire.RCReadRequest {
				readAgain[1-side] = readAgain[1-side] || first[side][k] != rec.Time
			}
		}
		if info.Payload && len(pay) > 0 {
			sp := sentPayload{op: p.Opcode(), qp: p.BTH().DestQP(), psn: p.BTH().PSN(), payload: append([]byte(nil), pay...)}
			if info.Has(wire.HasRETH) {
				sp.va = p.RETH().VA()
			}
			fl.Data = append(fl.Data, sp)
		}
	}
}

// String is what a PASS line says of one side: packets and bytes, and the
// acknowledgements, NAKs and retransmissions seen.
func (f flow) String() string {
	s := fmt.Sprintf("%d pkts %d B", f.Packets, f.Bytes)
	if f.ReadResponses > 0 {
		s += fmt.Sprintf(", %d read resp", f.ReadResponses)
	}
	if f.AtomicACKs > 0 {
		s += fmt.Sprintf(", %d atomic acks", f.AtomicACKs)
	}
	s += fmt.Sprintf(", %d acks %d naks %d retx", f.ACKs, f.NAKs, f.Retransmits)
	if f.Duplicates > 0 {
		s += fmt.Sprintf(" %d dup", f.Duplicates)
	}
	return s
}

// flowWant is what one side must have sent in a case on a clean bridge:
// exactly so many request packets (or, with MaxRequests, a number within
// bounds), READ response packets and atomic ACKs, and a number of plain
// ACKs within bounds.
type flowWant struct {
	Requests, ReadResponses, AtomicACKs int
	MaxRequests                         int // 0: exactly Requests
	MinACKs, MaxACKs                    int
}

// wantWire is what each side of case c must send. Every message is
// ceil(size/MTU) packets (a UD datagram one). A ping-pong's RC sides ACK
// each message once: the peer sends the next only after its send
// completed. A perftest's active side (the client) sends -n operations
// (latency tests: both sides -n messages); the passive side answers each
// READ with its response packets and each atomic with an atomic ACK, and
// ACKs SENDs and WRITEs at least once and at most once per packet
// (perftest's bandwidth tests keep many messages in flight, which a
// responder may ACK together).
func wantWire(c interopCase) (goroce, rxe flowWant) {
	pk := (c.Size + c.MTU - 1) / c.MTU
	if c.Transport == "ud" {
		pk = 1
	}
	n := c.Iters
	if c.Perftest == "" {
		w := flowWant{Requests: n * pk}
		if c.Transport == "rc" {
			w.MinACKs, w.MaxACKs = n, n
		}
		if c.Transport == "srq" {
			// ibv_srq_pingpong's client starts one message on each of
			// its QPs, and each side sends again on a QP whose last
			// exchange is done while fewer than -n of its sends have
			// completed: -n to -n + QPs - 1 messages each way, each
			// ACKed once (RC).
			w.MaxRequests = (n + srqQPs - 1) * pk
			w.MinACKs, w.MaxACKs = n, n+srqQPs-1
		}
		return w, w
	}
	var active, passive flowWant
	switch c.Perftest {
	case "write_bw", "send_bw":
		active.Requests = n * pk
		passive.MinACKs, passive.MaxACKs = 1, n*pk
	case "read_bw", "read_lat":
		active.Requests = n
		passive.ReadResponses = n * pk
	case "atomic_bw":
		active.Requests = n
		passive.AtomicACKs = n
	case "send_lat", "write_lat":
		active.Requests, passive.Requests = n*pk, n*pk
		active.MinACKs, active.MaxACKs = 1, n*pk
		passive.MinACKs, passive.MaxACKs = 1, n*pk
	}
	if c.RxeRole == rxeServer {
		return active, passive // goroce is the client
	}
	return passive, active
}

// maxRxeDuplicates bounds the request packets rxe may send twice in one
// case. rxe (Debian's 6.1 kernel) now and then sends a request packet a
// second time within milliseconds, before any ACK, NAK or timeout could
// call for it (seen once in a 20-message latency test, both roles); the
// copy is a duplicate the responder must ACK again, which goroce's
// counts then show. goroce itself may send none.
const maxRxeDuplicates = 2

// exampleRetries is the retry count (retry_cnt) rdma-core's ping-pong
// examples give their RC QPs: a message is sent at most 1 + 7 times.
const exampleRetries = 7

// timedOutRetransmits is how many retransmissions of goroce's and of
// rxe's case c allows: in a preloaded ping-pong, those after a timeout,
// when neither side sent a NAK, up to exampleRetries per message; else
// none. rdma-core's examples fix their QPs' ACK timeout at 14 (67 ms; not
// a flag), and on a loaded host either side may stall longer than that:
// the TCG guest, the preloaded program, and rxe against rxe itself
// (testdata/chk_srq_pingpong.pcap), so the sender rightly goes back N.
// The goroce pingpong cases run goroce with -u 18 (1 s) and allow none.
func timedOutRetransmits(c interopCase, w wireCount) (goroce, rxe int) {
	if !c.Preload || c.Perftest != "" || w.goroce.NAKs > 0 || w.rxe.NAKs > 0 {
		return 0, 0
	}
	wg, _ := wantWire(c)
	limit := exampleRetries * max(wg.Requests, wg.MaxRequests)
	return min(w.goroce.Retransmits, limit), min(w.rxe.Retransmits, limit)
}

// wireProblems lists how a capture differs from what case c should send
// on a clean bridge: any NAK or retransmission, a goroce duplicate, more
// than maxRxeDuplicates of rxe's, or a count off.
func wireProblems(c interopCase, w wireCount) []string {
	var ps []string
	wg, wr := wantWire(c)
	// rxe's duplicates are requests too, and goroce ACKs each again, or
	// answers a READ again.
	wr.Requests += w.rxe.Duplicates
	wg.MaxACKs += w.rxe.Duplicates
	wg.ReadResponses += w.goroce.ReadRepeats
	if pk := (c.Size + c.MTU - 1) / c.MTU; w.goroce.ReadRepeats > w.rxe.Duplicates*pk {
		ps = append(ps, fmt.Sprintf("goroce answered READs again %d times for %d repeated requests", w.goroce.ReadRepeats, w.rxe.Duplicates))
	}
	if c.Events && w.goroce.AheadOfACK > 0 {
		ps = append(ps, fmt.Sprintf("goroce sent %d requests ahead of an ACK it owed, in event mode (eventOrder)", w.goroce.AheadOfACK))
	}
	if w.goroce.Duplicates > 0 || w.rxe.Duplicates > maxRxeDuplicates {
		ps = append(ps, fmt.Sprintf("duplicate requests: goroce %d, rxe %d (at most %d of rxe's)",
			w.goroce.Duplicates, w.rxe.Duplicates, maxRxeDuplicates))
	}
	// Go-back-N after a timeout, in a preloaded ping-pong only: each
	// copy is a request; rxe ACKs each duplicate again, goroce at least
	// once per run of them it reads together.
	goroceRetx, rxeRetx := timedOutRetransmits(c, w)
	wg.Requests += goroceRetx
	wr.Requests += rxeRetx
	if wg.MaxRequests > 0 {
		wg.MaxRequests += goroceRetx
		wr.MaxRequests += rxeRetx
	}
	wr.MinACKs += goroceRetx
	wr.MaxACKs += goroceRetx
	wg.MaxACKs += rxeRetx
	for _, s := range []struct {
		who    string
		got    flow
		want   flowWant
		okRetx int
	}{{"goroce", w.goroce, wg, goroceRetx}, {"rxe", w.rxe, wr, rxeRetx}} {
		g, x := s.got, s.want
		if g.NAKs > 0 || g.Retransmits > s.okRetx {
			ps = append(ps, fmt.Sprintf("%s sent %d NAKs and %d retransmissions on a clean bridge", s.who, g.NAKs, g.Retransmits))
		}
		requestsOK := g.Requests == x.Requests
		wantRequests := strconv.Itoa(x.Requests)
		if x.MaxRequests > 0 {
			requestsOK = g.Requests >= x.Requests && g.Requests <= x.MaxRequests
			wantRequests = fmt.Sprintf("%d..%d", x.Requests, x.MaxRequests)
		}
		if !requestsOK || g.ReadResponses != x.ReadResponses || g.AtomicACKs != x.AtomicACKs {
			ps = append(ps, fmt.Sprintf("%s sent %d requests, %d read responses, %d atomic ACKs; want %s, %d, %d",
				s.who, g.Requests, g.ReadResponses, g.AtomicACKs, wantRequests, x.ReadResponses, x.AtomicACKs))
		}
		if g.ACKs < x.MinACKs || g.ACKs > x.MaxACKs {
			ps = append(ps, fmt.Sprintf("%s sent %d ACKs, want %d..%d", s.who, g.ACKs, x.MinACKs, x.MaxACKs))
		}
	}
	return ps
}
