package cm

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/simlink"
	"github.com/goroce/goroce/wire"
)

// attacker is a device with a bare QP1 and no CM: it sends whatever MADs
// a test builds.
type attacker struct {
	dev *rnic.Device
	qp1 *rnic.QP
	pd  *mr.PD
	buf *mr.MR
	ah  *rnic.AH
}

func newAttacker(t *testing.T, network *simlink.Network, addr, victim netip.AddrPort) *attacker {
	t.Helper()
	dev := openDevice(t, simPort(t, network, addr), addr, 1024)
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(4096)
	q, err := dev.CreateGSI(pd, &qp.InitAttr{Type: qp.UD, SendCQ: cq, RecvCQ: cq,
		Cap: qp.Cap{MaxSendWR: 1024, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: wire.MADLen}})
	if err != nil {
		t.Fatal(err)
	}
	if err := readyUD(q, wire.GSIQKey); err != nil {
		t.Fatal(err)
	}
	m, err := pd.RegMR(make([]byte, wire.MADLen), 0)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := dev.CreateAH(pd, qp.AH{GID: victim.Addr(), Port: victim.Port()})
	if err != nil {
		t.Fatal(err)
	}
	return &attacker{dev: dev, qp1: q, pd: pd, buf: m, ah: ah}
}

// sendREQ sends a REQ for service svc with comm ID commID, with an
// rdma_cm header from 10.0.0.3 to the victim.
func (at *attacker) sendREQ(t *testing.T, svc uint64, commID uint32, victim netip.Addr) {
	t.Helper()
	var b [wire.MADLen]byte
	m := newMAD(&b, wire.CMAttrREQ, uint64(commID))
	f := wire.CMReqFields{LocalCommID: commID, ServiceID: svc, LocalQPN: commID & 0xFFFFFF, StartingPSN: 1,
		RemoteCMResponseTimeout: CMResponseTimeout, LocalCMResponseTimeout: CMResponseTimeout, PKey: wire.DefaultPKey,
		PathMTU: 3, MaxCMRetries: MaxCMRetries}
	h := wire.CMAHeaderFields{IPVersion: 4, SrcPort: uint16(commID), SrcIP: at.dev.Addr().Addr(), DstIP: victim}
	h.Encode(wire.CMAHeader(f.PrivateData[:]))
	f.Encode(wire.CMReq(m.Data()))
	copy(at.buf.Bytes(), m)
	if err := at.qp1.PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendInline,
		SGL: []qp.SGE{{Addr: at.buf.Addr(), Length: wire.MADLen, LKey: at.buf.LKey()}},
		AH:  &at.ah.AH, RemoteQPN: wire.GSIQPN, RemoteQKey: wire.GSIQKey}); err != nil {
		t.Fatal(err)
	}
}

// TestREQFlood floods a listening server with REQs from a third device:
// random comm IDs for the listener's service, and forged service IDs. The
// server's CM holds no more connections than the listener's backlog, its
// consumer sees no more requests than that, every REQ it turns away is
// counted by why, and a legitimate client that connects in the middle of
// the flood still gets its connection, on a retry.
func TestREQFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		a, b := simNode(t, network, addrA), simNode(t, network, addrB)
		at := newAttacker(t, network, addrC, addrA)
		const backlog, batches, batch = 16, 20, 30
		listenBacklog(t, a, rpingPort, backlog)
		svc := wire.ServiceID(wire.PortSpaceTCP, rpingPort)
		r := rand.New(rand.NewPCG(23, 1))
		forged, toListener := 0, 0
		settle := func() {
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		var cli *ID
		for i := range batches {
			for range batch {
				s := svc
				if r.IntN(3) == 0 {
					s = r.Uint64() // a forged service ID
					if s == svc {
						s++
					}
					forged++
				} else {
					toListener++
				}
				at.sendREQ(t, s, r.Uint32()|1, addrA.Addr())
			}
			settle()
			if n := a.cm.Connections(); n > backlog {
				t.Fatalf("batch %d: the server's CM holds %d connections, more than the backlog %d", i, n, backlog)
			}
			if i == 0 {
				// The legitimate client dials into a full backlog.
				cli = dial(t, b, netip.AddrPort{}, netip.AddrPortFrom(addrA.Addr(), rpingPort),
					&ConnParam{PrivateData: []byte("legit"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
				settle()
			}
		}
		a.ch.mu.Lock()
		queued := len(a.ch.queue)
		a.ch.mu.Unlock()
		if queued != backlog {
			t.Errorf("%d events queued for the server's consumer, want the backlog, %d", queued, backlog)
		}
		rx := a.cm.Counter("cm_rx_msgs_req")
		noListener, full := a.cm.Counter("cm_req_no_listener"), a.cm.Counter("cm_req_backlog_full")
		if rx != uint64(batches*batch+1) || noListener != uint64(forged) || full != uint64(toListener+1-backlog) {
			t.Errorf("REQs received %d, rejected for no listener %d, dropped for a full backlog %d; want %d, %d, %d",
				rx, noListener, full, batches*batch+1, forged, toListener+1-backlog)
		}
		if n := a.cm.Counter("cm_tx_msgs_rej"); n != uint64(forged) {
			t.Errorf("%d REJs sent, want one per forged service ID, %d", n, forged)
		}

		// The consumer now turns the flood away and takes the client.
		var srv *ID
		for srv == nil {
			ev := expect(t, a.ch, EventConnectRequest)
			if !bytes.HasPrefix(ev.Param.PrivateData, []byte("legit")) {
				if err := ev.ID.Reject(nil); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := ev.ID.CreateQP(a.pd, rcInit(a.cq)); err != nil {
				t.Fatal(err)
			}
			if err := ev.ID.Accept(rpingParam()); err != nil {
				t.Fatal(err)
			}
			srv = ev.ID
		}
		expect(t, b.ch, EventEstablished)
		expect(t, a.ch, EventEstablished)
		if b.cm.Counter("cm_tx_retries_req") == 0 {
			t.Error("the client's first REQ was not dropped: the test did not dial into a full backlog")
		}
		sendRecv(t, b, a, cli, srv, "through the flood")
		sendRecv(t, a, b, srv, cli, "and back")
		if n := a.cm.Connections(); n != 1 {
			t.Errorf("the server's CM holds %d connections after the flood, want 1", n)
		}
	})
}

// TestAnswerToRoCEPort has a REQ arrive from UDP source port 55410, as
// rxe's do (it draws the port from the flow label): the REJ goes to the
// sender's RoCEv2 port, 4791, not back to 55410.
func TestAnswerToRoCEPort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rejTo []netip.AddrPort
		network := simlink.NewNetwork(simlink.Config{Impairments: []simlink.Impairment{{Action: simlink.Drop,
			Match: func(p *simlink.Packet) bool {
				if isCM(wire.CMAttrREJ)(p) {
					rejTo = append(rejTo, p.Dst)
				}
				return false
			}}}})
		t.Cleanup(func() { network.Close() })
		a := simNode(t, network, addrA)
		at := newAttacker(t, network, netip.AddrPortFrom(addrC.Addr(), 55410), addrA)
		simPort(t, network, addrC) // where 10.0.0.3's RoCEv2 traffic is due
		at.sendREQ(t, wire.ServiceID(wire.PortSpaceTCP, 1), 0x1234, addrA.Addr())
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if want := netip.AddrPortFrom(addrC.Addr(), 4791); len(rejTo) != 1 || rejTo[0] != want {
			t.Errorf("REJs sent to %v, want one to %v", rejTo, want)
		}
		if n := a.cm.Counter("cm_req_no_listener"); n != 1 {
			t.Errorf("cm_req_no_listener = %d, want 1", n)
		}
	})
}

// TestMaxConnections fills a server's connection table (Config.MaxConnections
// 2) with two clients: a third one's REQs are dropped and counted
// (cm_req_no_resources) until one of the first two disconnects and its
// TIMEWAIT ends; then the third connects on a retry.
func TestMaxConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := simlink.NewNetwork(simlink.Config{})
		t.Cleanup(func() { network.Close() })
		a := newNodeConfig(t, simPort(t, network, addrA), addrA, 1024, Config{MaxConnections: 2})
		b := simNode(t, network, addrB)
		srv, cli := connectPair(t, a, b)
		dst := netip.AddrPortFrom(addrA.Addr(), rpingPort)
		dial(t, b, netip.AddrPort{}, dst, rpingParam())
		accept(t, a)
		expect(t, b.ch, EventEstablished)
		expect(t, a.ch, EventEstablished)
		third := dial(t, b, netip.AddrPort{}, dst, rpingParam())
		time.Sleep(cmTimeout / 2)
		synctest.Wait()
		if n, c := a.cm.Counter("cm_req_no_resources"), a.cm.Connections(); n != 1 || c != 2 {
			t.Errorf("cm_req_no_resources = %d with %d connections, want 1 with 2", n, c)
		}
		disconnect(t, a, b, srv, cli)
		srv3 := accept(t, a)
		expect(t, b.ch, EventEstablished)
		expect(t, a.ch, EventEstablished)
		sendRecv(t, b, a, third, srv3, "third time lucky")
	})
}
