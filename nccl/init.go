package nccl

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/goroce/goroce/nccl/bootstrap"
	"github.com/goroce/goroce/nccl/transport/ib"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
)

// UniqueIDBytes is the size of a UniqueID, NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID names one rendezvous: the root's TCP address, a magic that
// tells its ranks from another rendezvous's, and a secret that proves a
// rank belongs to it (the bootstrap root accepts only hellos made with
// it). Rank 0 makes it with GetUniqueID and ships it to the other ranks
// (any way it likes: it is plain bytes, and should travel only to them).
//
// Layout: magic (8), address length (2), address (at most 86 bytes),
// zeros, secret (the last 32 bytes).
type UniqueID [UniqueIDBytes]byte

// DefaultBootstrapTimeout bounds the rendezvous when Options does not.
const DefaultBootstrapTimeout = 30 * time.Second

// idSecretLen is the size of a UniqueID's secret; it sits at its end.
const (
	idSecretLen = 32
	idSecretOff = UniqueIDBytes - idSecretLen
)

func makeID(magic uint64, secret [idSecretLen]byte, addr string) (UniqueID, error) {
	var id UniqueID
	if len(addr) > idSecretOff-10 {
		return id, fmt.Errorf("%w: root address %q too long for a unique ID", ErrInvalidArgument, addr)
	}
	binary.BigEndian.PutUint64(id[0:], magic)
	binary.BigEndian.PutUint16(id[8:], uint16(len(addr)))
	copy(id[10:], addr)
	copy(id[idSecretOff:], secret[:])
	return id, nil
}

func (id UniqueID) parts() (job bootstrap.Job, addr string, err error) {
	n := int(binary.BigEndian.Uint16(id[8:]))
	if n == 0 || n > idSecretOff-10 {
		return job, "", fmt.Errorf("%w: not a unique ID", ErrInvalidArgument)
	}
	job = bootstrap.Job{Magic: binary.BigEndian.Uint64(id[0:]), Secret: bytes.Clone(id[idSecretOff:])}
	return job, string(id[10 : 10+n]), nil
}

// String returns the root address the ID points at.
func (id UniqueID) String() string {
	_, addr, err := id.parts()
	if err != nil {
		return "invalid"
	}
	return addr
}

// listeners holds the sockets GetUniqueID opened, for rank 0's
// CommInitRank in the same process (so the port cannot be lost to a race).
var listeners sync.Map // magic → net.Listener

// GetUniqueID opens the bootstrap root's listening socket and returns the
// ID naming it (ncclGetUniqueId). Call it in the process of rank 0. The
// socket is at opts.CommID (NCCL_COMM_ID) if set; otherwise an ephemeral
// port on an address the other ranks can reach: opts.Addr's, else, in a
// job whose launcher names a root on another address than loopback
// (opts.Launch), this host's address on the route to it (a communicator
// split from that job's has its ranks where that job's are), else
// 127.0.0.1.
func GetUniqueID(opts Options) (UniqueID, error) {
	addr := opts.CommID
	if addr == "" {
		addr = net.JoinHostPort(bootstrapHost(opts), "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return UniqueID{}, fmt.Errorf("nccl: bootstrap listen: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	magic := binary.BigEndian.Uint64(b[:])
	var secret [idSecretLen]byte
	rand.Read(secret[:])
	id, err := makeID(magic, secret, ln.Addr().String())
	if err != nil {
		ln.Close()
		return id, err
	}
	listeners.Store(magic, ln)
	return id, nil
}

// CommInitRank creates rank's member of a communicator of nranks ranks
// (ncclCommInitRank). Every rank calls it with the same ID. Rank 0 runs the
// bootstrap root. Each rank opens a goroce device (Options.Device, or a
// new one at Options.Addr or its default, see deviceAddr), creates an RC
// QP and receive slots per peer, swaps their details through the
// bootstrap, connects, and meets the others at a barrier. Fails within
// Options.BootstrapTimeout naming the ranks that did not show up.
func CommInitRank(ctx context.Context, nranks int, id UniqueID, rank int, opts Options) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrInvalidArgument, rank, nranks)
	}
	job, rootAddr, err := id.parts()
	if err != nil {
		return nil, err
	}
	if opts.BootstrapTimeout <= 0 {
		opts.BootstrapTimeout = DefaultBootstrapTimeout
	}
	if opts.Logger == nil {
		if opts.Logger, err = newLogger(opts.Debug, opts.DebugFile); err != nil {
			return nil, err
		}
	}
	log := opts.Logger.With(zap.Int("rank", rank), zap.Int("nranks", nranks))
	var cleanup []func() error
	fail := func(err error) (*Comm, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		log.Warn("init failed", zap.Error(err))
		return nil, fmt.Errorf("nccl: CommInitRank rank %d of %d: %w", rank, nranks, err)
	}

	var root *bootstrap.Root
	if rank == 0 {
		var ln net.Listener
		if v, ok := listeners.LoadAndDelete(job.Magic); ok {
			ln = v.(net.Listener)
		} else if ln, err = net.Listen("tcp", rootAddr); err != nil {
			return fail(fmt.Errorf("bootstrap root: %w", err))
		}
		root = bootstrap.StartRoot(ln, nranks, job, bootstrap.RootOptions{Timeout: opts.BootstrapTimeout,
			Logger: log.With(zap.String("bootstrap", "root"))})
		cleanup = append(cleanup, func() error { root.Close(); return nil })
	}
	boot, err := bootstrap.Connect(ctx, rootAddr, rank, nranks, job, opts.BootstrapTimeout)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, boot.Close)

	var gr *gpuRank
	if opts.GPU != nil {
		if gr, err = newGPURank(*opts.GPU, opts.GDRLevel, rank, nranks, log); err != nil {
			return fail(err)
		}
	}
	dev := opts.Device
	ic := ib.Config{Rank: rank, Size: nranks, Slots: opts.Slots, SlotSize: opts.SlotSize, MTU: opts.MTU,
		Timeout: opts.IBTimeout, RetryCnt: opts.IBRetryCnt}
	var obsClose func() error
	if dev == nil {
		if opts.RNIC.Link != nil {
			return fail(fmt.Errorf("%w: Options.RNIC.Link is set: give the device (Options.Device) instead", ErrInvalidArgument))
		}
		addr, err := deviceAddr(opts.Addr, rank, rootAddr, opts.Launch)
		if err != nil {
			return fail(err)
		}
		if opts.MTU == 0 && !addr.Addr().IsLoopback() {
			// On a real interface the path MTU must fit its frames, as
			// rxe takes its active MTU from the netdev's.
			if m := interfaceMTU(addr.Addr()); m > 0 {
				opts.MTU, ic.MTU = m, m
			}
		}
		busy := busyPoll(opts.BusyPoll, addr.Addr(), nranks, opts.Launch.LocalSize)
		// PostInline: a rank's posts leave in the call that makes them, so
		// a collective that returns has put its data on the wire (a staged
		// send is done once posted, and the worker would send it only at
		// its next turn): a rank that exits right after a call, without
		// Destroy, does not fail its peers' copy of that call.
		dc := opts.RNIC
		dc.Addr, dc.MTU, dc.Logger, dc.BusyPoll = addr, opts.MTU, opts.Logger, busy
		dc.PostMode, dc.MaxUnackedPSNs = rnic.PostInline, fifoWindow(ic)
		dc.PeerMemory = dc.PeerMemory || (opts.GPU != nil && opts.GPU.PeerMemory)
		log.Debug("rnic polling", zap.Duration("busy_poll", busy))
		closeObs, err := openCapture(&dc, opts.Pcap, rank)
		if err != nil {
			return fail(err)
		}
		cleanup = append(cleanup, closeObs) // runs after dev.Close
		if dev, err = rnic.Open(dc); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				// Say which setting picks another address.
				err = fmt.Errorf("%w: another device has UDP port 4791 at %v: give this rank another address "+
					"(Options.Addr, GOROCE_ADDR, or goroce run's --addr-base)", err, addr.Addr())
			}
			return fail(fmt.Errorf("opening the RNIC at %v: %w", addr, err))
		}
		cleanup = append(cleanup, dev.Close)
		obsClose = closeObs
	}
	ic.Device = dev
	if ic.MTU == 0 {
		// A device given (CommSplit's parent's, or the caller's) may be
		// on an interface whose frames hold less than 4096: take its
		// active MTU, as a verbs program reads it from ibv_query_port.
		if pa, err := dev.QueryPort(1); err == nil {
			ic.MTU = pa.ActiveMTU.Bytes()
		}
	}
	if gr != nil {
		ic.SlotMemory = gr.slotMemory
	}
	tr, err := ib.New(ic)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, tr.Close)
	infos, err := boot.AllGather(ctx, tr.LocalInfo())
	if err != nil {
		return fail(err)
	}
	if err := tr.Connect(infos); err != nil {
		return fail(err)
	}
	// Nobody writes before every QP is ready to receive.
	if err := boot.Barrier(ctx); err != nil {
		return fail(err)
	}
	// The bootstrap connections stay open as the failure channel: every
	// rank hears which rank died, even one not talking to it (notice.go).
	board := newNoticeBoard()
	if err := boot.Watch(ctx, func(n bootstrap.Notice) { board.record(n) }); err != nil {
		return fail(err)
	}
	board.send = func(n notice) {
		if err := boot.Report(n); err != nil {
			log.Warn("could not report a failure to the other ranks", zap.Error(err))
		}
	}
	c, err := NewComm(tr, opts)
	if err != nil {
		return fail(err)
	}
	c.dev = dev
	c.board = board
	if gr != nil {
		c.attachGPU(gr)
	}
	c.closers = append(c.closers, boot.Close)
	if root != nil {
		// Destroy leaves the root serving the other ranks' notices until
		// they have all said goodbye; Abort stops it.
		c.closers = append(c.closers, func() error {
			if errors.Is(context.Cause(c.ctx), ErrAborted) {
				root.Close()
			}
			return nil
		})
	}
	if opts.Device == nil {
		c.closers = append(c.closers, dev.Close, obsClose)
	}
	log.Info("init done", zap.String("root", rootAddr), zap.Stringer("rnic", dev.Addr()))
	return c, nil
}

// fifoWindow is the RC window of the QPs of a device nccl opens for a
// transport configured as ic: twice the packets one connection's FIFO
// holds, so that the credits, not the window, bound what is in flight. A
// fragment then leaves when it is posted, right after the reduction or
// copy that made it, while it is still in the cache, instead of when an
// ACK opens rxe's window of 128 PSNs (docs/nccl-tuning.md has the
// measurement).
func fifoWindow(ic ib.Config) int {
	return min(max(2*ic.FIFOPackets(), qp.DefaultMaxUnackedPSNs), qp.MaxWindowPSNs)
}

// busyPoll picks the device's polling budget: an explicit opt (negative:
// off), else DefaultBusyPoll if this host's ranks fit its CPUs. The ranks
// on this host are localSize when a launcher says (Env.LocalSize), else
// all of them on a loopback address, else one.
func busyPoll(opt time.Duration, addr netip.Addr, nranks, localSize int) time.Duration {
	switch {
	case opt < 0:
		return 0
	case opt > 0:
		return opt
	}
	local := 1
	if addr.Unmap().IsLoopback() {
		local = nranks
	}
	if localSize > 0 {
		local = localSize
	}
	if local > runtime.NumCPU() {
		return 0
	}
	return DefaultBusyPoll
}

// deviceAddr picks the RNIC address: explicit (Options.Addr), else a
// default that follows the bootstrap root, as NCCL picks the interface for
// its sockets. A root on a loopback address is a job on one host: rank r
// gets 127.0.0.(10+r), port 4791. Any other root means ranks may be on
// several hosts: the rank takes this host's address on the interface that
// reaches the root (the source address the kernel's route to the root
// gives), so that ranks started by mpirun -H, srun or torchrun --nnodes
// find each other, with port 4791 + its local rank (launch.LocalRank under
// a launcher, else its rank) so that the ranks of one host do not collide.
// The port is 4791 unless given.
func deviceAddr(explicit string, rank int, root string, launch Env) (netip.AddrPort, error) {
	if explicit != "" {
		ap, err := parseRNICAddr(explicit)
		if err != nil {
			return ap, fmt.Errorf("%w: RNIC address %q (Options.Addr, GOROCE_ADDR): %v", ErrInvalidArgument, explicit, err)
		}
		return ap, nil
	}
	return defaultDeviceAddr(rank, hostRank(rank, launch), root)
}

// hostRank is rank's index among the ranks of its host: the launcher's
// (launch.LocalRank), else rank.
func hostRank(rank int, launch Env) int {
	if launch.Launcher != "" {
		return launch.LocalRank
	}
	return rank
}

// parseRNICAddr reads an RNIC address: an IP address, or IP:port; the
// port defaults to 4791.
func parseRNICAddr(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, errors.New("want an IP address, or IP:port")
	}
	return netip.AddrPortFrom(a, 4791), nil
}

// defaultDeviceAddr is deviceAddr's choice when nothing names an address,
// for rank, the localRank-th rank of its host.
func defaultDeviceAddr(rank, localRank int, root string) (netip.AddrPort, error) {
	rootIP := netip.MustParseAddr("127.0.0.1")
	if host, _, err := net.SplitHostPort(root); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil {
			rootIP = ip.Unmap()
		} else if ips, err := net.LookupIP(host); err == nil && len(ips) > 0 {
			rootIP, _ = netip.AddrFromSlice(ips[0])
			rootIP = rootIP.Unmap()
		}
	}
	if rootIP.IsLoopback() {
		if rank > 245 {
			return netip.AddrPort{}, fmt.Errorf("%w: no default loopback address for rank %d; set GOROCE_ADDR", ErrInvalidArgument, rank)
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + rank)}), 4791), nil
	}
	// A UDP "connect" sends nothing: it only asks the kernel for the route.
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(rootIP, 4791)))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: no route to the bootstrap root %s to take this host's address from (%v); set GOROCE_ADDR", ErrInvalidArgument, root, err)
	}
	local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	c.Close()
	port := 4791 + localRank
	if port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%w: no default port for local rank %d; set GOROCE_ADDR", ErrInvalidArgument, localRank)
	}
	return netip.AddrPortFrom(local, uint16(port)), nil
}

// interfaceMTU returns the largest RoCE path MTU (256 ... 4096) whose
// packets fit the MTU of the interface that holds ip, headers included
// (IPv6 40, UDP 8, BTH 12, the largest extended header 28, ICRC 4; 100
// bytes in all, rounded up); 0 if no interface holds ip.
func interfaceMTU(ip netip.Addr) int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == ip {
				for _, m := range []int{4096, 2048, 1024, 512, 256} {
					if m+100 <= ifc.MTU {
						return m
					}
				}
				return 0
			}
		}
	}
	return 0
}

// bootstrapHost is where GetUniqueID listens without Options.CommID.
func bootstrapHost(opts Options) string {
	if ap, err := parseRNICAddr(opts.Addr); err == nil {
		return ap.Addr().String()
	}
	if e := opts.Launch; e.Launcher != "" {
		if a, err := defaultDeviceAddr(e.Rank, e.LocalRank, e.Root); err == nil && !a.Addr().IsLoopback() {
			return a.Addr().String()
		}
	}
	return "127.0.0.1"
}
