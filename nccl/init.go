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
	if err := opts.initDefaults(); err != nil {
		return nil, err
	}
	in := &rankInit{rank: rank, nranks: nranks, job: job, rootAddr: rootAddr, opts: opts,
		log: opts.Logger.With(zap.Int("rank", rank), zap.Int("nranks", nranks))}
	c, err := in.run(ctx)
	if err != nil {
		in.undo()
		in.log.Warn("init failed", zap.Error(err))
		return nil, fmt.Errorf("nccl: CommInitRank rank %d of %d: %w", rank, nranks, err)
	}
	in.log.Info("init done", zap.String("root", rootAddr), zap.Stringer("rnic", c.dev.Addr()))
	return c, nil
}

// initDefaults fills in what CommInitRank needs that o leaves unset: the
// bootstrap timeout and the logger.
func (o *Options) initDefaults() error {
	if o.BootstrapTimeout <= 0 {
		o.BootstrapTimeout = DefaultBootstrapTimeout
	}
	if o.Logger == nil {
		l, err := newLogger(o.Debug, o.DebugFile)
		if err != nil {
			return err
		}
		o.Logger = l
	}
	return nil
}

// rankInit is one rank's CommInitRank under way: each step adds what it
// made, and what undoes it should a later step fail.
type rankInit struct {
	rank, nranks int
	job          bootstrap.Job
	rootAddr     string
	opts         Options
	log          *zap.Logger

	root  *bootstrap.Root   // rank 0's rendezvous
	boot  *bootstrap.Client // this rank's bootstrap connection
	gpu   *gpuRank          // Options.GPU's paths
	ic    ib.Config         // the transport's configuration
	dev   *rnic.Device
	owned []func() error // close the device CommInitRank opened, then flush its capture
	tr    *ib.Transport
	board *noticeBoard

	undos []func() error // run newest first when a step fails
}

// run takes CommInitRank's steps in order.
func (in *rankInit) run(ctx context.Context) (*Comm, error) {
	if err := in.bootstrap(ctx); err != nil {
		return nil, err
	}
	if err := in.attachGPU(); err != nil {
		return nil, err
	}
	// The transport's shape comes first: the device's RC window follows
	// its FIFOs (fifoWindow).
	in.ic = ib.Config{Rank: in.rank, Size: in.nranks, Slots: in.opts.Slots, SlotSize: in.opts.SlotSize,
		MTU: in.opts.MTU, Timeout: in.opts.IBTimeout, RetryCnt: in.opts.IBRetryCnt}
	if err := in.openDevice(); err != nil {
		return nil, err
	}
	if err := in.newTransport(); err != nil {
		return nil, err
	}
	if err := in.connect(ctx); err != nil {
		return nil, err
	}
	if err := in.watch(ctx); err != nil {
		return nil, err
	}
	return in.comm()
}

// undo releases what the steps so far made, newest first.
func (in *rankInit) undo() {
	for i := len(in.undos) - 1; i >= 0; i-- {
		in.undos[i]()
	}
}

// bootstrap starts the rendezvous (rank 0) and joins it.
func (in *rankInit) bootstrap(ctx context.Context) error {
	if in.rank == 0 {
		var ln net.Listener
		if v, ok := listeners.LoadAndDelete(in.job.Magic); ok {
			ln = v.(net.Listener)
		} else {
			var err error
			if ln, err = net.Listen("tcp", in.rootAddr); err != nil {
				return fmt.Errorf("bootstrap root: %w", err)
			}
		}
		in.root = bootstrap.StartRoot(ln, in.nranks, in.job, bootstrap.RootOptions{Timeout: in.opts.BootstrapTimeout,
			Logger: in.log.With(zap.String("bootstrap", "root"))})
		in.undos = append(in.undos, func() error { in.root.Close(); return nil })
	}
	boot, err := bootstrap.Connect(ctx, in.rootAddr, in.rank, in.nranks, in.job, in.opts.BootstrapTimeout)
	if err != nil {
		return err
	}
	in.boot = boot
	in.undos = append(in.undos, boot.Close)
	return nil
}

// attachGPU chooses the paths of Options.GPU's buffers, if it is set.
func (in *rankInit) attachGPU() error {
	if in.opts.GPU == nil {
		return nil
	}
	var err error
	in.gpu, err = newGPURank(*in.opts.GPU, in.opts.GDRLevel, in.rank, in.nranks, in.log)
	return err
}

// openDevice takes Options.Device, or opens the RNIC deviceConfig
// describes, capturing to Options.Pcap.
func (in *rankInit) openDevice() error {
	if in.dev = in.opts.Device; in.dev != nil {
		return nil
	}
	dc, err := in.deviceConfig()
	if err != nil {
		return err
	}
	closeCapture, err := openCapture(&dc, in.opts.Pcap, in.rank)
	if err != nil {
		return err
	}
	in.undos = append(in.undos, closeCapture) // runs after dev.Close
	if in.dev, err = rnic.Open(dc); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			// Say which setting picks another address.
			err = fmt.Errorf("%w: another device has UDP port 4791 at %v: give this rank another address "+
				"(Options.Addr, GOROCE_ADDR, or goroce run's --addr-base)", err, dc.Addr.Addr())
		}
		return fmt.Errorf("opening the RNIC at %v: %w", dc.Addr, err)
	}
	in.undos = append(in.undos, in.dev.Close)
	in.owned = []func() error{in.dev.Close, closeCapture}
	return nil
}

// deviceConfig is Options.RNIC completed for this rank: its address, the
// MTU of its interface, its polling, and the post mode and window nccl's
// transport wants.
func (in *rankInit) deviceConfig() (rnic.Config, error) {
	opts := &in.opts
	dc := opts.RNIC
	if dc.Link != nil {
		return dc, fmt.Errorf("%w: Options.RNIC.Link is set: give the device (Options.Device) instead", ErrInvalidArgument)
	}
	addr, err := deviceAddr(opts.Addr, in.rank, in.rootAddr, opts.Launch)
	if err != nil {
		return dc, err
	}
	if opts.MTU == 0 && !addr.Addr().IsLoopback() {
		// On a real interface the path MTU must fit its frames, as rxe
		// takes its active MTU from the netdev's.
		if m := interfaceMTU(addr.Addr()); m > 0 {
			opts.MTU, in.ic.MTU = m, m
		}
	}
	busy := busyPoll(opts.BusyPoll, addr.Addr(), in.nranks, opts.Launch.LocalSize)
	in.log.Debug("rnic polling", zap.Duration("busy_poll", busy))
	// PostInline: a rank's posts leave in the call that makes them, so a
	// collective that returns has put its data on the wire (a staged send
	// is done once posted, and the worker would send it only at its next
	// turn): a rank that exits right after a call, without Destroy, does
	// not fail its peers' copy of that call.
	dc.Addr, dc.MTU, dc.Logger, dc.BusyPoll = addr, opts.MTU, opts.Logger, busy
	dc.PostMode, dc.MaxUnackedPSNs = rnic.PostInline, fifoWindow(in.ic)
	dc.PeerMemory = dc.PeerMemory || (opts.GPU != nil && opts.GPU.PeerMemory)
	return dc, nil
}

// newTransport creates the RC QPs and receive FIFOs, one per peer, on the
// device.
func (in *rankInit) newTransport() error {
	in.ic.Device = in.dev
	if in.ic.MTU == 0 {
		// A device given (CommSplit's parent's, or the caller's) may be
		// on an interface whose frames hold less than 4096: take its
		// active MTU, as a verbs program reads it from ibv_query_port.
		if pa, err := in.dev.QueryPort(1); err == nil {
			in.ic.MTU = pa.ActiveMTU.Bytes()
		}
	}
	if in.gpu != nil {
		in.ic.SlotMemory = in.gpu.slotMemory
	}
	tr, err := ib.New(in.ic)
	if err != nil {
		return err
	}
	in.tr = tr
	in.undos = append(in.undos, tr.Close)
	return nil
}

// connect swaps the QPs' details through the bootstrap, connects them,
// and meets the other ranks at a barrier: nobody writes before every QP
// is ready to receive.
func (in *rankInit) connect(ctx context.Context) error {
	infos, err := in.boot.AllGather(ctx, in.tr.LocalInfo())
	if err != nil {
		return err
	}
	if err := in.tr.Connect(infos); err != nil {
		return err
	}
	return in.boot.Barrier(ctx)
}

// watch keeps the bootstrap connections open as the failure channel:
// every rank hears which rank died, even one not talking to it
// (notice.go).
func (in *rankInit) watch(ctx context.Context) error {
	board := newNoticeBoard()
	if err := in.boot.Watch(ctx, func(n bootstrap.Notice) { board.record(n) }); err != nil {
		return err
	}
	board.send = func(n notice) {
		if err := in.boot.Report(n); err != nil {
			in.log.Warn("could not report a failure to the other ranks", zap.Error(err))
		}
	}
	in.board = board
	return nil
}

// comm makes the communicator over the connected transport and hands it
// what it must close.
func (in *rankInit) comm() (*Comm, error) {
	c, err := NewComm(in.tr, in.opts)
	if err != nil {
		return nil, err
	}
	c.dev = in.dev
	c.board = in.board
	if in.gpu != nil {
		c.attachGPU(in.gpu)
	}
	c.closers = append(c.closers, in.boot.Close)
	if root := in.root; root != nil {
		// Destroy leaves the root serving the other ranks' notices until
		// they have all said goodbye; Abort stops it.
		c.closers = append(c.closers, func() error {
			if errors.Is(context.Cause(c.ctx), ErrAborted) {
				root.Close()
			}
			return nil
		})
	}
	c.closers = append(c.closers, in.owned...)
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
