package nccl

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/goroce/goroce/nccl/bootstrap"
	"github.com/goroce/goroce/nccl/transport/ib"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rnic"
	"github.com/goroce/goroce/rnic/link"
	"github.com/goroce/goroce/rnic/shmlink"
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
// socket is at NCCL_COMM_ID (host:port) if set; otherwise an ephemeral
// port on an address the other ranks can reach: GOROCE_ADDR's, else, in a
// job whose launcher names a root on another address than loopback
// (MASTER_ADDR), this host's address on the route to it (a communicator
// split from that job's has its ranks where that job's are), else
// 127.0.0.1.
func GetUniqueID() (UniqueID, error) {
	addr := getenv("NCCL_COMM_ID")
	if addr == "" {
		addr = net.JoinHostPort(bootstrapHost(), "0")
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
// new one at Options.Addr / GOROCE_ADDR / 127.0.0.(10+rank)), creates an RC
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
		if opts.Logger, err = LoggerFromEnv(); err != nil {
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
		if gr, err = newGPURank(*opts.GPU, rank, nranks, log); err != nil {
			return fail(err)
		}
	}
	dev := opts.Device
	ic := ib.Config{Rank: rank, Size: nranks, Slots: opts.Slots, SlotSize: opts.SlotSize, MTU: opts.MTU}
	if err := ibRetryFromEnv(&ic); err != nil {
		return fail(err)
	}
	var obsClose func() error
	if dev == nil {
		addr, err := deviceAddr(opts.Addr, rank, rootAddr)
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
		peerMemory := getenv("GOROCE_PEER_MEMORY") == "1" || (opts.GPU != nil && opts.GPU.PeerMemory)
		busy, err := busyPoll(opts.BusyPoll, addr.Addr(), nranks)
		if err != nil {
			return fail(err)
		}
		// PostInline: a rank's posts leave in the call that makes them, so
		// a collective that returns has put its data on the wire (a staged
		// send is done once posted, and the worker would send it only at
		// its next turn): a rank that exits right after a call, without
		// Destroy, does not fail its peers' copy of that call.
		dc := rnic.Config{Addr: addr, MTU: opts.MTU, Logger: opts.Logger, PeerMemory: peerMemory, BusyPoll: busy,
			PostMode: rnic.PostInline, MaxUnackedPSNs: fifoWindow(ic), AlwaysVerifyICRC: getenv("GOROCE_VERIFY_ICRC") == "1"}
		if dc.Link, err = linkFromEnv(addr, opts.Logger); err != nil {
			return fail(err)
		}
		log.Debug("rnic polling", zap.Duration("busy_poll", busy))
		closeObs, err := observeFromEnv(&dc, rank)
		if err != nil {
			return fail(err)
		}
		cleanup = append(cleanup, closeObs) // runs after dev.Close
		if dev, err = rnic.Open(dc); err != nil {
			if dc.Link != nil {
				dc.Link.Close()
			}
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

// busyPoll picks the device's polling budget: GOROCE_BUSY_POLL, else an
// explicit Options.BusyPoll, else DefaultBusyPoll if this host's ranks fit
// its CPUs. The ranks on this host are LOCAL_WORLD_SIZE or
// OMPI_COMM_WORLD_LOCAL_SIZE when a launcher says, else all of them on a
// loopback address, else one.
func busyPoll(opt time.Duration, addr netip.Addr, nranks int) (time.Duration, error) {
	if s := getenv("GOROCE_BUSY_POLL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%w: GOROCE_BUSY_POLL=%q (want a duration such as 200us, or 0 for off)", ErrInvalidArgument, s)
		}
		return d, nil
	}
	switch {
	case opt < 0:
		return 0, nil
	case opt > 0:
		return opt, nil
	}
	local := 1
	if addr.Unmap().IsLoopback() {
		local = nranks
	}
	for _, k := range []string{"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"} {
		if n, err := strconv.Atoi(getenv(k)); err == nil && n > 0 {
			local = n
			break
		}
	}
	if local > runtime.NumCPU() {
		return 0, nil
	}
	return DefaultBusyPoll, nil
}

// linkFromEnv opens the wire GOROCE_LINK asks for: "shm" a shared-memory
// link at addr (rnic/shmlink, its files in GOROCE_SHM_DIR or the default
// directory), "udp" or unset none, so that rnic.Open opens a UDP socket.
func linkFromEnv(addr netip.AddrPort, log *zap.Logger) (link.Link, error) {
	switch s := getenv("GOROCE_LINK"); s {
	case "", "udp":
		return nil, nil
	case "shm":
		l, err := shmlink.Open(shmlink.Config{Local: addr, Dir: getenv("GOROCE_SHM_DIR"), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("opening the shared-memory link at %v: %w", addr, err)
		}
		return l, nil
	default:
		return nil, fmt.Errorf("%w: GOROCE_LINK=%q (want shm or udp)", ErrInvalidArgument, s)
	}
}

// deviceAddr picks the RNIC address: explicit, else GOROCE_ADDR, else a
// default that follows the bootstrap root, as NCCL picks the interface for
// its sockets. A root on a loopback address is a job on one host: rank r
// gets 127.0.0.(10+r), port 4791. Any other root means ranks may be on
// several hosts: the rank takes this host's address on the interface that
// reaches the root (the source address the kernel's route to the root
// gives), so that ranks started by mpirun -H, srun or torchrun --nnodes
// find each other, with port 4791 + its local rank (LOCAL_RANK,
// OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID, else its rank) so that the
// ranks of one host do not collide. The port is 4791 unless given.
func deviceAddr(explicit string, rank int, root string) (netip.AddrPort, error) {
	s := explicit
	if s == "" {
		s = getenv("GOROCE_ADDR")
	}
	if s == "" {
		return defaultDeviceAddr(rank, root)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: RNIC address %q (GOROCE_ADDR or Options.Addr: want an IP address, or IP:port)", ErrInvalidArgument, s)
	}
	return netip.AddrPortFrom(a, 4791), nil
}

// defaultDeviceAddr is deviceAddr's choice when nothing names an address.
func defaultDeviceAddr(rank int, root string) (netip.AddrPort, error) {
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
	port := 4791 + localRank(rank)
	if port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%w: no default port for local rank %d; set GOROCE_ADDR", ErrInvalidArgument, port-4791)
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

// bootstrapHost is where GetUniqueID listens without NCCL_COMM_ID.
func bootstrapHost() string {
	if v := getenv("GOROCE_ADDR"); v != "" {
		if ap, err := netip.ParseAddrPort(v); err == nil {
			return ap.Addr().String()
		}
		if a, err := netip.ParseAddr(v); err == nil {
			return a.String()
		}
	}
	if e, err := ReadEnv(); err == nil {
		if a, err := defaultDeviceAddr(e.Rank, e.Root); err == nil && !a.Addr().IsLoopback() {
			return a.Addr().String()
		}
	}
	return "127.0.0.1"
}

// localRank is the rank's index among the ranks of its host, as the
// launcher says (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID),
// or rank when it says nothing.
func localRank(rank int) int {
	for _, v := range []string{"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"} {
		if n, err := strconv.Atoi(getenv(v)); err == nil && n >= 0 {
			return n
		}
	}
	return rank
}

// Env is what CommInitFromEnv read from the launcher's environment.
type Env struct {
	Rank, Size, LocalRank int
	Root                  string // host:port of the bootstrap root
	Launcher              string // "torchrun", "openmpi", "slurm"
}

// ErrNoEnv: none of the launcher variables are set.
var ErrNoEnv = errors.New("nccl: no launcher environment (RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS)")

// ReadEnv reads the rank, size and root address the way the usual
// launchers publish them: torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), Open MPI (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK) and Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), in that order of
// preference. The root is NCCL_COMM_ID if set, else MASTER_ADDR:MASTER_PORT
// (defaults 127.0.0.1 and 29500).
func ReadEnv() (Env, error) {
	var e Env
	for _, l := range []struct{ name, rank, size, local string }{
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
		{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	} {
		if getenv(l.rank) == "" {
			continue
		}
		var err error
		if e.Rank, err = strconv.Atoi(getenv(l.rank)); err != nil {
			return e, fmt.Errorf("%w: %s=%q", ErrInvalidArgument, l.rank, getenv(l.rank))
		}
		if e.Size, err = strconv.Atoi(getenv(l.size)); err != nil {
			return e, fmt.Errorf("%w: %s=%q", ErrInvalidArgument, l.size, getenv(l.size))
		}
		if s := getenv(l.local); s != "" {
			if e.LocalRank, err = strconv.Atoi(s); err != nil {
				return e, fmt.Errorf("%w: %s=%q", ErrInvalidArgument, l.local, s)
			}
		}
		e.Launcher = l.name
		break
	}
	if e.Launcher == "" {
		return e, ErrNoEnv
	}
	if e.Size < 1 || e.Rank < 0 || e.Rank >= e.Size {
		return e, fmt.Errorf("%w: rank %d of %d from %s", ErrInvalidArgument, e.Rank, e.Size, e.Launcher)
	}
	e.Root = getenv("NCCL_COMM_ID")
	if e.Root == "" {
		host, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "29500"
		}
		e.Root = net.JoinHostPort(host, port)
	}
	return e, nil
}

// CommInitFromEnv creates this process's communicator from the launcher's
// environment (see ReadEnv): every rank derives the same unique ID from
// the root address, the world size and the job's secret (see JobSecret),
// and rank 0 serves the rendezvous there.
func CommInitFromEnv(ctx context.Context, opts Options) (*Comm, error) {
	e, err := ReadEnv()
	if err != nil {
		return nil, err
	}
	id, err := e.UniqueID()
	if err != nil {
		return nil, err
	}
	return CommInitRank(ctx, e.Size, id, e.Rank, opts)
}

// UniqueID returns the launch's unique ID, the one CommInitFromEnv uses:
// every rank derives its magic from the root address and the world size
// and its secret from JobSecret, and rank 0's CommInitRank serves the
// rendezvous at Root. Bindings that hand out an ID under a launcher
// (ncclGetUniqueId in cmd/goroce-nccl) return it, so every rank's ID
// agrees however the program distributes it.
func (e Env) UniqueID() (UniqueID, error) {
	secret, _ := JobSecret(e)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", e.Root, e.Size)
	return makeID(h.Sum64(), secret, e.Root)
}

// JobSecretEnv is the variable that hands the ranks of a job their shared
// secret: `goroce run` sets it to 32 random bytes in hex for each job.
const JobSecretEnv = "GOROCE_JOB_SECRET"

// jobIDVars are the launcher variables that name a job (the same in every
// rank of it, different in the next job): Slurm's job and step, Open MPI's
// job (ess_base_jobid in Open MPI 4, the PMIx namespace in 5), torchrun's
// run ID (--rdzv-id).
var jobIDVars = []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"}

// JobSecret is the secret the ranks of e prove themselves with at the
// rendezvous, and where it came from:
//
//   - GOROCE_JOB_SECRET, when set (as `goroce run` sets it, or as a user
//     of torchrun, mpirun -x or srun --export can): only processes given
//     the variable can join, so a stranger on the network or another user
//     of the machine who knows MASTER_ADDR, MASTER_PORT and WORLD_SIZE can
//     neither take a rank's place nor be counted in. (A process that can
//     read the ranks' environment, the same user or root, can.)
//   - otherwise the launcher's job identity (jobIDVars) with the root and
//     the size. Those are not secret (squeue, ps and /proc show them), so
//     this guards only against accidental cross-talk: a rank of another
//     job, or a leftover rank of an earlier run, that dials the same
//     MASTER_ADDR:MASTER_PORT is refused instead of joining. It does not
//     stop anyone who wants to join.
//   - with neither (a bare RANK/WORLD_SIZE environment), only the root
//     and the size: no protection beyond the magic's.
func JobSecret(e Env) (secret [idSecretLen]byte, from string) {
	h := sha256.New()
	if v := getenv(JobSecretEnv); v != "" {
		io.WriteString(h, "goroce job secret\x00"+v)
		return [idSecretLen]byte(h.Sum(nil)), JobSecretEnv
	}
	fmt.Fprintf(h, "goroce job identity\x00%s/%d", e.Root, e.Size)
	var used []string
	for _, k := range jobIDVars {
		if v := getenv(k); v != "" {
			fmt.Fprintf(h, "\x00%s=%s", k, v)
			used = append(used, k)
		}
	}
	return [idSecretLen]byte(h.Sum(nil)), strings.Join(used, ",")
}

// ibRetryFromEnv reads NCCL_IB_TIMEOUT (the QPs' local ACK timeout code, 1
// to 31: 4.096 µs × 2^code) and NCCL_IB_RETRY_CNT (1 to 7) into c, as NCCL
// does; unset, c keeps ib's defaults (14, about 67 ms, and 7). A rank that
// is not scheduled for longer than (retry count + 1) × timeout looks dead
// to its peers, so a loaded machine wants a longer timeout.
func ibRetryFromEnv(c *ib.Config) error {
	for _, v := range []struct {
		name     string
		min, max uint64
		dst      *uint8
	}{{"NCCL_IB_TIMEOUT", 1, 31, &c.Timeout}, {"NCCL_IB_RETRY_CNT", 1, 7, &c.RetryCnt}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 8)
		if err != nil || n < v.min || n > v.max {
			return fmt.Errorf("%w: %s=%q (want %d to %d)", ErrInvalidArgument, v.name, s, v.min, v.max)
		}
		*v.dst = uint8(n)
	}
	return nil
}
