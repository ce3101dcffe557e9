// Command dcqcn-netns runs goroce's DCQCN against a real congestion point:
// Linux's queue on a router's port, in network namespaces it creates and
// removes itself. N sender namespaces, each with one goroce device over
// udplink, RDMA WRITE without pause to a receiver namespace through a
// router namespace whose port towards the receiver is an htb class of
// the bottleneck rate. The kernel marks CE there: Linux's RED qdisc with
// ecn where the kernel has it (sch_red), otherwise an nftables token
// bucket marker in front of the htb queue (see markerNFT). The receiver's
// notification point answers the marks with CNPs; the senders' reaction
// points cut their rates.
//
// It prints, per run, the summary line of bench/experiment's simulated
// experiments (goodput_mbps included), the kernel's counters (tc -s) and
// goroce's (CNPs, rate cuts, retransmissions), and a verdict; it writes a
// CSV and a PNG per run (bench/experiment.WriteFiles).
//
// Needs root (network namespaces, tc). Usage:
//
//	dcqcn-netns [-router netns|qemu] [-flows 2,4] [-rate 300] [-duration 6s] [-dcqcn both] [-out dir]
//
// With -router qemu the router is a QEMU guest running Debian's kernel
// (guest.go), booted once for all the runs, for hosts whose kernel lacks
// sch_red. It exits with status 77 where the machine cannot run it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goroce/goroce/bench/experiment"
	"github.com/goroce/goroce/bench/qemurouter"
	cc "github.com/goroce/goroce/dcqcn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := mainErr(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dcqcn-netns:", err)
		if cannotRun(err) {
			os.Exit(exitCannotRun)
		}
		os.Exit(1)
	}
}

// exitCannotRun is the exit status on a machine that cannot run the
// experiment (not root, no iproute2; with -router qemu, no qemu, TUN or
// guest image): 77, as the rxe lab's, which test harnesses report as a
// skip.
const exitCannotRun = 77

// cannotRun reports whether err says the machine cannot run the
// experiment, rather than that it ran and failed.
func cannotRun(err error) bool {
	return errors.Is(err, errNeedsRoot) || errors.Is(err, errNeedsTools) || errors.Is(err, errNeedsGuest)
}

// options are the command's flags.
type options struct {
	flows      []int
	rate       cc.Rate
	duration   time.Duration
	interval   time.Duration
	modes      []bool // DisableDCQCN per mode run
	marker     string
	out        string
	mtu        int
	red        cc.RED
	buffer     int
	failOnMiss bool
	judge      string // judgeAll or judgeMechanism
	retries    int
	stretch    float64
	router     string
	imageDir   string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("dcqcn-netns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flows := fs.String("flows", "2,4", "comma-separated sender counts, one run each")
	rate := fs.Float64("rate", 0, fmt.Sprintf("bottleneck rate, Mb/s (0: %v with -router netns, %v with -router qemu)",
		defaultRate, defaultGuestRate))
	o := &options{}
	fs.DurationVar(&o.duration, "duration", defaultDuration, "length of each run")
	fs.DurationVar(&o.interval, "interval", defaultInterval, "sampling interval (each sample runs tc)")
	mode := fs.String("dcqcn", "both", "on, off or both")
	fs.StringVar(&o.router, "router", routerNetns, `where the bottleneck router runs: "netns" (a namespace on this kernel), "qemu" (a QEMU guest running Debian's kernel, with sch_red)`)
	imageDir := qemurouter.ImageDir()
	fs.StringVar(&o.imageDir, "guest-image", imageDir, "-router qemu: the rxe lab's work directory, with its image and unpacked packages (env RXE_LAB_DIR)")
	fs.StringVar(&o.marker, "marker", "auto", `-router netns: what marks CE: "red" (sch_red), "nft" (nftables limit), "auto" (red if the kernel has it); -router qemu: red`)
	fs.StringVar(&o.out, "out", "dcqcn-netns-out", "directory for the CSV and PNG files (empty: none)")
	fs.IntVar(&o.mtu, "mtu", defaultMTU, "goroce's path MTU")
	fs.IntVar(&o.red.Kmin, "kmin", 0, "RED Kmin, bytes (0: scaled to the rate, see scaledRED)")
	fs.IntVar(&o.red.Kmax, "kmax", 0, "RED Kmax, bytes (0: scaled to the rate)")
	fs.Float64Var(&o.red.Pmax, "pmax", 0, "RED Pmax (0: the paper's)")
	fs.IntVar(&o.buffer, "buffer", 0, "bottleneck queue limit, bytes (0: scaled to the rate)")
	fs.Float64Var(&o.stretch, "stretch", defaultStretch, "factor on DCQCN's timers and on the thresholds' queueing delays")
	fs.BoolVar(&o.failOnMiss, "verdict", true, "exit non-zero when a run misses its verdict")
	fs.StringVar(&o.judge, "judge", judgeAll, `what a run's verdict holds it to: "all" (the loop's mechanism and the real-time performance targets) or "mechanism" (the loop alone: marks, CNPs, no ICRC error, every flow to the end; the performance figures are printed, not judged)`)
	fs.IntVar(&o.retries, "retries", 0, "run a configuration again, up to this many times, when it misses only the real-time performance verdict (drops, Jain, utilisation), never the mechanism's")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for f := range strings.SplitSeq(*flows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxSenders {
			return nil, fmt.Errorf("-flows %q: want numbers 1 ... %d", *flows, maxSenders)
		}
		o.flows = append(o.flows, n)
	}
	if o.judge != judgeAll && o.judge != judgeMechanism {
		return nil, fmt.Errorf("-judge %q: want %q or %q", o.judge, judgeAll, judgeMechanism)
	}
	switch *mode {
	case "on":
		o.modes = []bool{false}
	case "off":
		o.modes = []bool{true}
	case "both":
		o.modes = []bool{false, true}
	default:
		return nil, fmt.Errorf("-dcqcn %q: want on, off or both", *mode)
	}
	switch o.router {
	case routerNetns:
		o.rate = defaultRate
	case routerQEMU:
		o.rate = defaultGuestRate
	default:
		return nil, fmt.Errorf("-router %q: want %q or %q", o.router, routerNetns, routerQEMU)
	}
	if *rate > 0 {
		o.rate = cc.Rate(*rate) * cc.Mbps
	}
	return o, nil
}

// mainErr runs every configuration the flags ask for and reports.
func mainErr(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if err := preflight(ctx); err != nil {
		return err
	}
	var img *qemurouter.Image
	if o.router == routerQEMU {
		if img, err = guestPreflight(o.imageDir); err != nil {
			return err
		}
	}
	if stale, err := removeStale(ctx); err != nil {
		return fmt.Errorf("removing stale namespaces: %w", err)
	} else if len(stale) > 0 {
		fmt.Fprintf(stdout, "removed stale namespaces: %s\n", strings.Join(stale, " "))
	}
	var guest *guestRouter
	marker := markerRED
	if img != nil {
		// One guest for every configuration: it boots in tens of seconds.
		if guest, err = bootGuest(ctx, img, linkMTU); err != nil {
			return err
		}
		defer guest.close()
	} else if marker, err = pickMarker(ctx, o.marker); err != nil {
		return err
	}
	// After the guest's start: qemu's nice adds to this process's.
	if err := raisePriority(guestNice); err != nil {
		return err
	}
	var missed []string
	for _, n := range o.flows {
		for _, off := range o.modes {
			cfg := newConfig(n, o, off, marker, guest)
			var bad []string
			for attempt := 0; ; attempt++ {
				out, err := runNetns(ctx, cfg)
				if err != nil {
					return fmt.Errorf("%s: %w", experiment.FileStem(&cfg.sc), err)
				}
				bad = report(stdout, out, o.out)
				if o.judge == judgeMechanism {
					bad = mechanism(out)
					fmt.Fprintf(stdout, "judged on the mechanism alone (-judge mechanism): %s\n", okOr(bad))
				}
				if len(bad) == 0 || len(mechanism(out)) > 0 || attempt >= o.retries {
					break
				}
				// A real-time run on a shared machine: a sender woken late
				// can overrun the queue once. The mechanism held; run the
				// configuration again, and say so.
				fmt.Fprintf(stdout, "retrying %s (attempt %d of %d): the loop worked, the real-time numbers missed\n",
					experiment.FileStem(&cfg.sc), attempt+2, o.retries+1)
			}
			if len(bad) > 0 {
				missed = append(missed, fmt.Sprintf("%s: %s", experiment.FileStem(&cfg.sc), strings.Join(bad, "; ")))
			}
		}
	}
	if len(missed) > 0 && o.failOnMiss {
		return errors.New("verdicts missed:\n  " + strings.Join(missed, "\n  "))
	}
	return nil
}
