package qemurouter

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

//go:embed init.sh
var guestInit []byte

// Defaults and bounds.
const (
	// DefaultImageDir is the rxe lab's work directory ($RXE_LAB_DIR there).
	DefaultImageDir = "/var/tmp/rxe-lab"
	// BootTimeout bounds the boot, from qemu's start to the guest's
	// "@@ready".
	BootTimeout = 180 * time.Second
	// CmdTimeout bounds one command in the guest.
	CmdTimeout = 60 * time.Second
)

// ErrUnavailable is the error of a machine that cannot boot the guest.
var ErrUnavailable = errors.New("the QEMU router guest needs qemu-system-x86_64, /dev/net/tun and the rxe lab's image (rxe-lab setup)")

// ImageDir is the rxe lab's work directory: $RXE_LAB_DIR, or
// DefaultImageDir.
func ImageDir() string {
	if d := os.Getenv("RXE_LAB_DIR"); d != "" {
		return d
	}
	return DefaultImageDir
}

// Image is where the guest's parts are: the rxe lab's image and its
// unpacked packages.
type Image struct {
	Vmlinuz, Initramfs string // the rxe lab's image
	Staging            string // the lab's unpacked .debs
	Kernel             string // e.g. 6.1.0-57-amd64
	Modules            []string
}

// FindImage checks that this machine can boot the guest: qemu, TUN, and in
// dir the rxe lab's image and the files the guest adds to it, modules
// included. A module is named by its path under the kernel's module tree,
// without ".ko": "net/sched/sch_netem". Its errors wrap ErrUnavailable.
func FindImage(dir string, modules ...string) (*Image, error) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "image", "kernel-package.txt"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	img := &Image{Vmlinuz: filepath.Join(dir, "image", "vmlinuz"),
		Initramfs: filepath.Join(dir, "image", "initramfs.cpio.gz"), Staging: filepath.Join(dir, "staging"),
		Kernel: strings.TrimPrefix(strings.TrimSpace(string(pkg)), "linux-image-"), Modules: modules}
	files := []string{img.Vmlinuz, img.Initramfs}
	for _, f := range img.addedFiles() {
		files = append(files, f.staged)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	return img, nil
}

// addedFile is a file the guest adds to the lab's image: from the lab's
// unpacked packages (staged) to path guest.
type addedFile struct {
	staged, guest string
	mode          fs.FileMode
}

// addedFiles: iproute2's tc (the lab's image has its ip, and all of tc's
// libraries but libxtables), virtio_console and img.Modules, where the
// image keeps its own modules (lib/modules/kernel/...).
func (img *Image) addedFiles() []addedFile {
	files := []addedFile{
		{"sbin/tc", "sbin/tc", 0o755},
		{"usr/lib/x86_64-linux-gnu/libxtables.so.12", "usr/lib/x86_64-linux-gnu/libxtables.so.12", 0o644},
	}
	for _, m := range append([]string{"drivers/char/virtio_console"}, img.Modules...) {
		files = append(files, addedFile{"lib/modules/" + img.Kernel + "/kernel/" + m + ".ko",
			"lib/modules/kernel/" + m + ".ko", 0o644})
	}
	for i := range files {
		files[i].staged = filepath.Join(img.Staging, files[i].staged)
	}
	return files
}

// overlay is the archive appended to the lab's initramfs: /init, the
// added files, and their directories.
func (img *Image) overlay() ([]cpioEntry, error) {
	entries := []cpioEntry{{Name: "init", Mode: 0o755, Data: guestInit}}
	dirs := map[string]bool{}
	for _, f := range img.addedFiles() {
		data, err := os.ReadFile(f.staged) // through symbolic links
		if err != nil {
			return nil, err
		}
		var parents []cpioEntry
		for d := filepath.Dir(f.guest); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			parents = append([]cpioEntry{{Name: d, Mode: fs.ModeDir | 0o755}}, parents...)
		}
		entries = append(append(entries, parents...), cpioEntry{Name: f.guest, Mode: f.mode, Data: data})
	}
	return entries, nil
}

// NIC is one of the guest's network interfaces: a virtio NIC whose host
// side is tap Tap in network namespace Netns (a name under /run/netns).
// The tap is down and unaddressed: the caller sets it up. It goes with
// the guest.
type NIC struct {
	Name  string // the interface's name in the guest, e.g. "rx"
	MAC   string // its address, e.g. "52:54:00:d3:00:01"
	Addr  string // its IPv4 address with prefix, e.g. "10.213.0.1/24"
	Netns string // the host namespace of its tap
	Tap   string // the tap's name there
}

// Config is what Boot boots.
type Config struct {
	Image *Image
	NICs  []NIC
	MTU   int // every NIC's MTU, in the guest
	// Nice is qemu's nice value; a router that must not wait for the
	// CPU behind the programs it serves takes a negative one (root).
	Nice int
}

// Router is a running router guest.
type Router struct {
	dir     string // initrd, console log, control sockets
	cmd     *exec.Cmd
	exited  chan struct{} // closed when qemu has ended
	waitErr error
	conn    net.Conn // goroce.ctl: shell commands
	in      *bufio.Reader
	tcConn  net.Conn // goroce.tc: tc -batch
	tcIn    *bufio.Reader
}

// Boot creates cfg's taps and boots the guest on them; it returns once
// the guest has named and addressed its NICs and forwards. Close stops
// it.
func Boot(ctx context.Context, cfg Config) (r *Router, err error) {
	r = &Router{exited: make(chan struct{})}
	defer func() {
		if err != nil {
			r.Close()
			r = nil
		}
	}()
	if r.dir, err = os.MkdirTemp("", "qemurouter-"); err != nil {
		return r, err
	}
	var taps []*os.File
	defer func() {
		for _, f := range taps {
			f.Close() // qemu holds its own copies
		}
	}()
	args := []string{"-n", strconv.Itoa(cfg.Nice), "qemu-system-x86_64",
		"-machine", "q35", "-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", "512",
		"-kernel", cfg.Image.Vmlinuz}
	appendLine := fmt.Sprintf("console=ttyS0 panic=-1 quiet loglevel=3 gr.mtu=%d gr.mods=%s",
		cfg.MTU, strings.Join(cfg.Image.Modules, ","))
	for i, nic := range cfg.NICs {
		tap, err := openTap(nic.Netns, nic.Tap)
		if err != nil {
			return r, err
		}
		taps = append(taps, tap)
		appendLine += fmt.Sprintf(" gr.nic=%s,%s,%s", nic.Name, nic.MAC, nic.Addr)
		id := fmt.Sprintf("n%d", i)
		args = append(args, "-netdev", fmt.Sprintf("tap,id=%s,fd=%d", id, 3+i),
			"-device", "virtio-net-pci,netdev="+id+",mac="+nic.MAC)
	}
	initrd, err := r.writeInitrd(cfg.Image)
	if err != nil {
		return r, err
	}
	var lns [2]*net.UnixListener
	for i, name := range []string{"ctl.sock", "tc.sock"} {
		if lns[i], err = net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(r.dir, name), Net: "unix"}); err != nil {
			return r, err
		}
		defer lns[i].Close()
	}
	args = append(args, "-initrd", initrd, "-append", appendLine,
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=ctl,path="+lns[0].Addr().String(), "-device", "virtserialport,chardev=ctl,name=goroce.ctl",
		"-chardev", "socket,id=tc,path="+lns[1].Addr().String(), "-device", "virtserialport,chardev=tc,name=goroce.tc",
		"-display", "none", "-monitor", "none", "-serial", "file:"+r.console(), "-no-reboot", "-nodefaults")
	r.cmd = exec.Command("nice", args...)
	r.cmd.ExtraFiles = taps
	var stderr bytes.Buffer
	r.cmd.Stderr = &stderr
	// qemu dies with the thread that started it (Pdeathsig): a goroutine
	// locked to its thread for qemu's lifetime, so that it is this
	// program's end, not a thread's, that takes the guest down.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.cmd.Start(); err != nil {
			started <- err
			close(r.exited)
			return
		}
		started <- nil
		err := r.cmd.Wait()
		r.waitErr = fmt.Errorf("qemu: %v: %s", err, strings.TrimSpace(stderr.String()))
		close(r.exited)
	}()
	if err := <-started; err != nil {
		return r, fmt.Errorf("qemu: %w", err)
	}
	for i, c := range []*net.Conn{&r.conn, &r.tcConn} {
		if err := lns[i].SetDeadline(time.Now().Add(CmdTimeout)); err != nil {
			return r, err
		}
		if *c, err = lns[i].Accept(); err != nil {
			return r, r.failure(fmt.Errorf("qemu did not connect its ports: %w", err))
		}
	}
	r.in, r.tcIn = bufio.NewReader(r.conn), bufio.NewReader(r.tcConn)
	if err := r.conn.SetReadDeadline(time.Now().Add(BootTimeout)); err != nil {
		return r, err
	}
	line, err := r.in.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "@@ready" {
		return r, r.failure(fmt.Errorf("guest did not come up: %q %v", strings.TrimSpace(line), err))
	}
	return r, nil
}

// openTap creates tap device name in namespace ns and returns its queue;
// the device goes when the last descriptor of it closes.
func openTap(ns, name string) (*os.File, error) {
	var f *os.File
	err := InNetns(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: /dev/net/tun: %v", ErrUnavailable, err)
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

// InNetns runs fn on an OS thread moved into network namespace ns (a name
// under /run/netns), then moves the thread back. Sockets and devices fn
// opens belong to ns for good, whichever thread uses them later; nothing
// else fn starts should expect to stay in ns (goroutines it starts run on
// other threads). If the thread cannot be moved back it is left locked,
// and the Go runtime ends it with the goroutine rather than reuse it.
func InNetns(ns string, fn func() error) error {
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer home.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(fnErr, fmt.Errorf("setns back from %s: %w", ns, err)) // the thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// writeInitrd writes the lab's initramfs with the overlay appended and
// returns its path.
func (r *Router) writeInitrd(img *Image) (string, error) {
	entries, err := img.overlay()
	if err != nil {
		return "", err
	}
	base, err := os.ReadFile(img.Initramfs)
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
	path := filepath.Join(r.dir, "initrd")
	return path, os.WriteFile(path, b.Bytes(), 0o644)
}

// console is the path of the guest's serial console log.
func (r *Router) console() string { return filepath.Join(r.dir, "console.log") }

// failure adds what the guest and qemu said to err.
func (r *Router) failure(err error) error {
	log, _ := os.ReadFile(r.console())
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	lines = lines[max(0, len(lines)-8):]
	select {
	case <-r.exited:
		err = errors.Join(err, r.waitErr)
	default:
	}
	return fmt.Errorf("%w\nguest console (last lines):\n  %s", err, strings.Join(lines, "\n  "))
}

// Run runs a command in the guest and returns its standard output. The
// guest's shell, busybox's, runs its own applets before PATH's programs:
// iproute2's are /sbin/ip and /sbin/tc.
func (r *Router) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	deadline := time.Now().Add(CmdTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := r.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	line := name
	for _, a := range args {
		line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	if _, err := r.conn.Write([]byte(line + "\n")); err != nil {
		return nil, r.failure(fmt.Errorf("guest: %s: %w", line, err))
	}
	var out []byte
	for {
		l, err := r.in.ReadBytes('\n')
		if err != nil {
			return nil, r.failure(fmt.Errorf("guest: %s: %w", line, err))
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

// Qdiscs returns `tc -s -j qdisc show dev dev` in the guest, from the one
// tc -batch the guest keeps running: no process per sample.
func (r *Router) Qdiscs(ctx context.Context, dev string) ([]byte, error) {
	deadline := time.Now().Add(CmdTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := r.tcConn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(r.tcConn, "qdisc show dev %s\n", dev); err != nil {
		return nil, r.failure(fmt.Errorf("guest tc -batch: %w", err))
	}
	line, err := r.tcIn.ReadBytes('\n')
	if err != nil {
		return nil, r.failure(fmt.Errorf("guest tc -batch: %w", err))
	}
	return line, nil
}

// Running reports whether qemu is still running.
func (r *Router) Running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return r.cmd != nil
	}
}

// Close stops the guest, which takes its taps with it, and removes its
// files.
func (r *Router) Close() error {
	if r.cmd != nil && r.cmd.Process != nil {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
	for _, c := range []net.Conn{r.conn, r.tcConn} {
		if c != nil {
			c.Close()
		}
	}
	if r.dir != "" {
		return os.RemoveAll(r.dir)
	}
	return nil
}
