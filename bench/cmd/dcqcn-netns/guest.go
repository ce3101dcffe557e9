package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The guest router: -router qemu puts the bottleneck in a QEMU/TCG guest
// that runs Debian bookworm's kernel, whose RED qdisc (sch_red) marks CE;
// the host kernel may lack sch_red. The guest boots once per program run
// from the rxe lab's image (/work/shared/rxe-lab: vmlinuz, and an
// initramfs with busybox and iproute2), with an archive appended that
// holds sch_htb, sch_red, virtio_console, iproute2's tc from the lab's
// unpacked packages, and guest-init.sh as /init. Its two NICs are taps
// this program opens in its own namespaces:
//
//	ns s0: eth0 10.213.1.2 ─veth─┐
//	ns s1: eth0 10.213.1.3 ─veth─┤ ns hub: bridge ── tap ── guest "tx" 10.213.1.1
//	 ...                         │                          (forwards IPv4)
//	ns rx: tap eth0 10.213.0.2 ───────────────────────────── guest "rx" 10.213.0.1 ← bottleneck
//
// The host runs commands in the guest (tc, ip) over a virtio serial port.

//go:embed guest-init.sh
var guestInit []byte

// Guest defaults.
const (
	// defaultImageDir is the rxe lab's work directory ($RXE_LAB_DIR there).
	defaultImageDir = "/var/tmp/rxe-lab"
	// guestBootTimeout bounds the boot, from qemu's start to "@@ready".
	guestBootTimeout = 180 * time.Second
	// guestCmdTimeout bounds one command in the guest.
	guestCmdTimeout = 60 * time.Second
	// guestTxMAC and guestRxMAC are the guest's NICs' addresses.
	guestTxMAC = "52:54:00:d3:01:01"
	guestRxMAC = "52:54:00:d3:00:01"
	// guestNice is qemu's nice value: the router is the experiment's
	// switch, which must not wait for the CPU behind the senders and
	// whatever else the machine runs.
	guestNice = -10
	// guestBurst is the htb class's burst in the guest, in frames.
	guestBurst = 16
	// receiverMAC is the receiver's tap's address.
	receiverMAC = "52:54:00:d3:00:02"
)

// errNeedsGuest is preflight's error on a machine that cannot boot the
// guest router.
var errNeedsGuest = errors.New("-router qemu needs qemu-system-x86_64, /dev/net/tun and the rxe lab's image (rxe-lab setup)")

// guestImage is where the guest's parts are.
type guestImage struct {
	vmlinuz, initramfs string // the rxe lab's image
	staging            string // the lab's unpacked .debs
	kernel             string // e.g. 6.1.0-57-amd64
}

// findGuestImage checks that dir holds the rxe lab's image and the files
// the guest router adds to it.
func findGuestImage(dir string) (*guestImage, error) {
	pkg, err := os.ReadFile(filepath.Join(dir, "image", "kernel-package.txt"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNeedsGuest, err)
	}
	img := &guestImage{vmlinuz: filepath.Join(dir, "image", "vmlinuz"),
		initramfs: filepath.Join(dir, "image", "initramfs.cpio.gz"), staging: filepath.Join(dir, "staging"),
		kernel: strings.TrimPrefix(strings.TrimSpace(string(pkg)), "linux-image-")}
	for _, f := range append([]string{img.vmlinuz, img.initramfs}, img.addedFiles()...) {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w: %v", errNeedsGuest, err)
		}
	}
	return img, nil
}

// guestFile is a file the guest router adds to the lab's image: from the
// lab's unpacked packages (path Staged, with KERNEL for the kernel's
// version) to path Guest.
type guestFile struct {
	Staged, Guest string
	Mode          fs.FileMode
}

// guestFiles: iproute2's tc (the lab's image has its ip, and all of tc's
// libraries but libxtables), and the modules, where the image keeps its
// own (lib/modules/kernel/...).
var guestFiles = []guestFile{
	{"sbin/tc", "sbin/tc", 0o755},
	{"usr/lib/x86_64-linux-gnu/libxtables.so.12", "usr/lib/x86_64-linux-gnu/libxtables.so.12", 0o644},
	{"lib/modules/KERNEL/kernel/net/sched/sch_htb.ko", "lib/modules/kernel/net/sched/sch_htb.ko", 0o644},
	{"lib/modules/KERNEL/kernel/net/sched/sch_red.ko", "lib/modules/kernel/net/sched/sch_red.ko", 0o644},
	{"lib/modules/KERNEL/kernel/drivers/char/virtio_console.ko", "lib/modules/kernel/drivers/char/virtio_console.ko", 0o644},
}

// addedFiles are the staged files the appended archive carries.
func (img *guestImage) addedFiles() []string {
	var files []string
	for _, f := range guestFiles {
		files = append(files, filepath.Join(img.staging, strings.ReplaceAll(f.Staged, "KERNEL", img.kernel)))
	}
	return files
}

// overlay is the archive appended to the lab's initramfs: /init, the
// guestFiles, and their directories.
func (img *guestImage) overlay() ([]cpioEntry, error) {
	entries := []cpioEntry{{Name: "init", Mode: 0o755, Data: guestInit}}
	dirs := map[string]bool{}
	for i, staged := range img.addedFiles() {
		data, err := os.ReadFile(staged) // through symbolic links
		if err != nil {
			return nil, err
		}
		f := guestFiles[i]
		var parents []cpioEntry
		for d := filepath.Dir(f.Guest); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			parents = append([]cpioEntry{{Name: d, Mode: fs.ModeDir | 0o755}}, parents...)
		}
		entries = append(append(entries, parents...), cpioEntry{Name: f.Guest, Mode: f.Mode, Data: data})
	}
	return entries, nil
}

// guestRouter is a running router guest and its side of the network: the
// hub namespace (a bridge to the guest's "tx" NIC, where sender
// namespaces attach) and the receiver's namespace (a tap to its "rx").
type guestRouter struct {
	fab     *fabric // hub and rx
	hub, rx string
	dir     string // initrd, console log, control socket
	cmd     *exec.Cmd
	exited  chan struct{} // closed when qemu has ended
	waitErr error
	conn    net.Conn // goroce.ctl: shell commands
	in      *bufio.Reader
	tcConn  net.Conn // goroce.tc: tc -batch
	tcIn    *bufio.Reader
}

// guestAddr is the guest router's address, with its prefix, on subnet 0
// (the receiver's) or 1 (the senders'): .1, where the hosts are .2 and up.
func guestAddr(subnet int) string { return hostAddr(subnet, 1).String() + "/24" }

// bootGuest creates the hub and receiver namespaces with their taps and
// boots the router guest on them; mtu is every link's MTU. close undoes
// it all.
func bootGuest(ctx context.Context, img *guestImage, mtu int) (g *guestRouter, err error) {
	fab, err := newFabric()
	if err != nil {
		return nil, err
	}
	g = &guestRouter{fab: fab, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	if g.dir, err = os.MkdirTemp("", "dcqcn-guest-"); err != nil {
		return g, err
	}
	if g.hub, err = fab.add(ctx, "hub"); err != nil {
		return g, err
	}
	if g.rx, err = fab.add(ctx, "rx"); err != nil {
		return g, err
	}
	txTap, err := openTap(g.hub, "guest")
	if err != nil {
		return g, err
	}
	defer txTap.Close() // qemu holds its own copy
	rxTap, err := openTap(g.rx, "eth0")
	if err != nil {
		return g, err
	}
	defer rxTap.Close()
	m := fmt.Sprint(mtu)
	for _, s := range [][]string{
		{"-n", g.hub, "link", "add", "br0", "mtu", m, "type", "bridge"},
		{"-n", g.hub, "link", "set", "guest", "mtu", m, "master", "br0", "up"},
		{"-n", g.hub, "link", "set", "br0", "up"},
		{"-n", g.rx, "link", "set", "eth0", "address", receiverMAC, "mtu", m, "up"},
		// No ARP across the bottleneck: RED with ecn drops packets that
		// cannot carry a CE mark (ARP's) where it would mark.
		{"-n", g.rx, "neigh", "add", hostAddr(0, 1).String(), "lladdr", guestRxMAC, "dev", "eth0", "nud", "permanent"},
		{"-n", g.rx, "addr", "add", hostAddr(0, 2).String() + "/24", "dev", "eth0"},
		{"-n", g.rx, "route", "add", "default", "via", hostAddr(0, 1).String()},
	} {
		if err := run(ctx, "ip", s...); err != nil {
			return g, err
		}
	}
	initrd, err := g.writeInitrd(img)
	if err != nil {
		return g, err
	}
	var lns [2]*net.UnixListener
	for i, name := range []string{"ctl.sock", "tc.sock"} {
		if lns[i], err = net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(g.dir, name), Net: "unix"}); err != nil {
			return g, err
		}
		defer lns[i].Close()
	}
	g.cmd = exec.Command("nice", "-n", fmt.Sprint(guestNice), "qemu-system-x86_64",
		"-machine", "q35", "-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", "512",
		"-kernel", img.vmlinuz, "-initrd", initrd,
		"-append", fmt.Sprintf("console=ttyS0 panic=-1 quiet loglevel=3 gr.tx=%s,%s gr.rx=%s,%s gr.mtu=%d",
			guestTxMAC, guestAddr(1), guestRxMAC, guestAddr(0), mtu),
		"-netdev", "tap,id=tx,fd=3", "-device", "virtio-net-pci,netdev=tx,mac="+guestTxMAC,
		"-netdev", "tap,id=rx,fd=4", "-device", "virtio-net-pci,netdev=rx,mac="+guestRxMAC,
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=ctl,path="+lns[0].Addr().String(), "-device", "virtserialport,chardev=ctl,name=goroce.ctl",
		"-chardev", "socket,id=tc,path="+lns[1].Addr().String(), "-device", "virtserialport,chardev=tc,name=goroce.tc",
		"-display", "none", "-monitor", "none", "-serial", "file:"+g.console(), "-no-reboot", "-nodefaults")
	g.cmd.ExtraFiles = []*os.File{txTap, rxTap}
	var stderr bytes.Buffer
	g.cmd.Stderr = &stderr
	// qemu dies with the thread that started it (Pdeathsig): a goroutine
	// locked to its thread for qemu's lifetime, so that it is this
	// program's end, not a thread's, that takes the guest down.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := g.cmd.Start(); err != nil {
			started <- err
			close(g.exited)
			return
		}
		started <- nil
		err := g.cmd.Wait()
		g.waitErr = fmt.Errorf("qemu: %v: %s", err, strings.TrimSpace(stderr.String()))
		close(g.exited)
	}()
	if err := <-started; err != nil {
		return g, fmt.Errorf("qemu: %w", err)
	}
	for i, c := range []*net.Conn{&g.conn, &g.tcConn} {
		if err := lns[i].SetDeadline(time.Now().Add(guestCmdTimeout)); err != nil {
			return g, err
		}
		if *c, err = lns[i].Accept(); err != nil {
			return g, g.failure(fmt.Errorf("qemu did not connect its ports: %w", err))
		}
	}
	g.in, g.tcIn = bufio.NewReader(g.conn), bufio.NewReader(g.tcConn)
	if err := g.conn.SetReadDeadline(time.Now().Add(guestBootTimeout)); err != nil {
		return g, err
	}
	line, err := g.in.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "@@ready" {
		return g, g.failure(fmt.Errorf("guest did not come up: %q %v", strings.TrimSpace(line), err))
	}
	_, err = g.run(ctx, "/sbin/ip", "neigh", "replace", hostAddr(0, 2).String(), "lladdr", receiverMAC,
		"dev", "rx", "nud", "permanent")
	return g, err
}

// openTap creates tap device name in namespace ns and returns its queue;
// the device goes when the last descriptor of it closes.
func openTap(ns, name string) (*os.File, error) {
	var f *os.File
	err := inNetns(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: /dev/net/tun: %v", errNeedsGuest, err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s in %s: %w", name, ns, err)
		}
		f = os.NewFile(uintptr(fd), "tap "+name)
		return nil
	})
	return f, err
}

// writeInitrd writes the lab's initramfs with the overlay appended and
// returns its path.
func (g *guestRouter) writeInitrd(img *guestImage) (string, error) {
	entries, err := img.overlay()
	if err != nil {
		return "", err
	}
	base, err := os.ReadFile(img.initramfs)
	if err != nil {
		return "", err
	}
	// Compressed like the lab's: the kernel takes an uncompressed archive
	// after a compressed one only at an offset that is a multiple of 4.
	var b bytes.Buffer
	b.Write(base)
	z := gzip.NewWriter(&b)
	if err := writeCPIO(z, entries); err != nil {
		return "", err
	}
	if err := z.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(g.dir, "initrd")
	return path, os.WriteFile(path, b.Bytes(), 0o644)
}

// console is the path of the guest's serial console log.
func (g *guestRouter) console() string { return filepath.Join(g.dir, "console.log") }

// failure adds what the guest and qemu said to err.
func (g *guestRouter) failure(err error) error {
	log, _ := os.ReadFile(g.console())
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	lines = lines[max(0, len(lines)-8):]
	select {
	case <-g.exited:
		err = errors.Join(err, g.waitErr)
	default:
	}
	return fmt.Errorf("%w\nguest console (last lines):\n  %s", err, strings.Join(lines, "\n  "))
}

// run runs a command in the guest and returns its standard output. The
// guest's shell, busybox's, runs its own applets before PATH's programs:
// iproute2's are /sbin/ip and /sbin/tc.
func (g *guestRouter) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	deadline := time.Now().Add(guestCmdTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := g.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	line := name
	for _, a := range args {
		line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	if _, err := g.conn.Write([]byte(line + "\n")); err != nil {
		return nil, g.failure(fmt.Errorf("guest: %s: %w", line, err))
	}
	var out []byte
	for {
		l, err := g.in.ReadBytes('\n')
		if err != nil {
			return nil, g.failure(fmt.Errorf("guest: %s: %w", line, err))
		}
		if rc, ok := bytes.CutPrefix(l, []byte("@@rc=")); ok {
			// The guest ends the command's output with an empty line, then
			// its standard error if it failed.
			code, _ := strconv.Atoi(strings.TrimSpace(string(rc)))
			if code != 0 {
				return nil, fmt.Errorf("guest: %s: exit status %d: %s", line, code, strings.TrimSpace(string(out)))
			}
			return bytes.TrimSuffix(out, []byte("\n")), nil
		}
		out = append(out, l...)
	}
}

// qdiscs returns `tc -s -j qdisc show dev dev` in the guest, from its tc
// -batch.
func (g *guestRouter) qdiscs(ctx context.Context, dev string) ([]byte, error) {
	deadline := time.Now().Add(guestCmdTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := g.tcConn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(g.tcConn, "qdisc show dev %s\n", dev); err != nil {
		return nil, g.failure(fmt.Errorf("guest tc -batch: %w", err))
	}
	line, err := g.tcIn.ReadBytes('\n')
	if err != nil {
		return nil, g.failure(fmt.Errorf("guest tc -batch: %w", err))
	}
	return line, nil
}

// close stops the guest and removes the namespaces and files.
func (g *guestRouter) close() error {
	if g.cmd != nil && g.cmd.Process != nil {
		select {
		case <-g.exited:
		default:
			_ = g.cmd.Process.Kill()
			<-g.exited
		}
	}
	for _, c := range []net.Conn{g.conn, g.tcConn} {
		if c != nil {
			c.Close()
		}
	}
	err := g.fab.remove()
	if g.dir != "" {
		err = errors.Join(err, os.RemoveAll(g.dir))
	}
	return err
}
