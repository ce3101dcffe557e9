package cpucoll

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A Family is one piece of software: what has to be installed and built
// before any of its Libraries can run.
type Family int

// The families measured.
const (
	Goroce  Family = iota // goroce nccl-perf, built from this module
	OpenMPI               // Debian's openmpi-bin and libopenmpi-dev
	Gloo                  // Debian's libgloo-dev
)

func (f Family) String() string {
	switch f {
	case Goroce:
		return "goroce"
	case OpenMPI:
		return "openmpi"
	case Gloo:
		return "gloo"
	}
	return fmt.Sprintf("Family(%d)", int(f))
}

// A Library is one way of running AllReduce: a family and the transport
// and algorithm it is told to use.
type Library struct {
	Name   string // the -only name, and the row label in reports
	Family Family
	About  string // transport and algorithm, one line

	btl  string // Open MPI: the --mca btl list
	algo string // Gloo: gloo_allreduce's --algo
	link string // goroce: nccl-perf's --link, the RNICs' wire
	// ucx (Open MPI): pml ucx instead of ob1 and a btl list, each rank
	// under `goroce exec` on a goroce device of its own (Programs.Goroce).
	ucx bool
}

// Libraries are all the libraries measured, in the order they run and
// are reported. goroce comes first: every ratio is goroce's figure over
// another library's.
var Libraries = []Library{
	{Name: "goroce", Family: Goroce, link: "udp", About: "goroce nccl-perf: RoCEv2 over UDP on loopback, NCCL-style ring/tree"},
	{Name: "goroce-shm", Family: Goroce, link: "shm", About: "goroce nccl-perf: the same RoCEv2 frames through shared-memory rings (--link shm)"},
	{Name: "openmpi-tcp", Family: OpenMPI, btl: "self,tcp", About: "Open MPI ob1 over btl tcp on lo, coll/tuned's choice"},
	{Name: "openmpi-shm", Family: OpenMPI, btl: "self,vader", About: "Open MPI ob1 over btl vader (shared memory), coll/tuned's choice"},
	{Name: "gloo-ring", Family: Gloo, algo: "ring", About: "Gloo allreduce_ring over TCP on 127.0.0.1"},
	{Name: "gloo-ring-chunked", Family: Gloo, algo: "ring_chunked", About: "Gloo allreduce_ring_chunked over TCP on 127.0.0.1"},
	{Name: "gloo-halving-doubling", Family: Gloo, algo: "halving_doubling", About: "Gloo allreduce_halving_doubling over TCP on 127.0.0.1"},
}

// OpenMPIOverGoroce is Open MPI over UCX on goroce devices: pml ucx and
// osc ucx, UCX_TLS naming goroce's transports (rc_verbs, with ud_verbs
// for UCX's wire-up) and self, each rank under `goroce exec` on the
// address Config.AddrBase + its local rank. It is not in Libraries, which
// compare other libraries with goroce's own collectives; Run measures it
// when given it and Programs.Goroce.
var OpenMPIOverGoroce = Library{Name: "openmpi-ucx-goroce", Family: OpenMPI, ucx: true,
	About: "Open MPI pml ucx over goroce's rc_verbs (RoCEv2 over UDP on loopback), coll/tuned's choice"}

// ErrUnknownLibrary is returned by Select for a name that is neither a
// library nor a family.
var ErrUnknownLibrary = errors.New("cpucoll: unknown library")

// Select returns the libraries named in a comma-separated list, in
// Libraries' order. A library's name selects it; a family name that is
// not one (openmpi, gloo) stands for all its libraries; an empty list
// selects everything. "goroce" is goroce over UDP, "goroce-shm" over
// shared memory.
func Select(list string) ([]Library, error) {
	if strings.TrimSpace(list) == "" {
		return Libraries, nil
	}
	want := make(map[string]bool)
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		matches := func(l Library) bool { return name == l.Name }
		if !slices.ContainsFunc(Libraries, matches) {
			matches = func(l Library) bool { return name == l.Family.String() }
		}
		found := false
		for _, l := range Libraries {
			if matches(l) {
				want[l.Name], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w %q (want one of %s, or a family: goroce, openmpi, gloo)", ErrUnknownLibrary, name, names())
		}
	}
	var out []Library
	for _, l := range Libraries {
		if want[l.Name] {
			out = append(out, l)
		}
	}
	return out, nil
}

func names() string {
	var n []string
	for _, l := range Libraries {
		n = append(n, l.Name)
	}
	return strings.Join(n, ", ")
}

// Families returns the families of libs, each once, in order.
func Families(libs []Library) []Family {
	var out []Family
	seen := make(map[Family]bool)
	for _, l := range libs {
		if !seen[l.Family] {
			seen[l.Family] = true
			out = append(out, l.Family)
		}
	}
	return out
}
