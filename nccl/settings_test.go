package nccl

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
	"github.com/goroce/goroce/mr/gpu"
	"github.com/goroce/goroce/rnic"
)

// lookup is a getenv over env.
func lookup(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// settingCases are environments with good values and the Options they
// give, one variable (or one launcher) at a time.
var settingCases = []struct {
	env  map[string]string
	want Options
}{
	{nil, Options{}},
	{map[string]string{"GOROCE_ADDR": "127.1.2.3"}, Options{Addr: "127.1.2.3"}},
	{map[string]string{"GOROCE_ADDR": "127.1.2.3:5000"}, Options{Addr: "127.1.2.3:5000"}},
	{map[string]string{"GOROCE_ADDR": "fd00::7"}, Options{Addr: "fd00::7"}},
	{map[string]string{"GOROCE_BUSY_POLL": "1ms"}, Options{BusyPoll: time.Millisecond}},
	{map[string]string{"GOROCE_BUSY_POLL": "0"}, Options{BusyPoll: -1}},
	{map[string]string{"GOROCE_LINK": "udp"}, Options{RNIC: rnic.Config{Wire: rnic.Wire{Kind: "udp"}}}},
	{map[string]string{"GOROCE_LINK": "shm", "GOROCE_SHM_DIR": "/run/x"}, Options{RNIC: rnic.Config{Wire: rnic.Wire{Kind: "shm", ShmDir: "/run/x"}}}},
	{map[string]string{"GOROCE_SHM_DIR": "/run/x"}, Options{RNIC: rnic.Config{Wire: rnic.Wire{ShmDir: "/run/x"}}}},
	{map[string]string{"GOROCE_PEER_MEMORY": "1"}, Options{RNIC: rnic.Config{PeerMemory: true}}},
	{map[string]string{"GOROCE_PEER_MEMORY": "0"}, Options{}},
	{map[string]string{"GOROCE_VERIFY_ICRC": "1"}, Options{RNIC: rnic.Config{AlwaysVerifyICRC: true}}},
	{map[string]string{"GOROCE_VERIFY_ICRC": "0"}, Options{}},
	{map[string]string{"GOROCE_TRACE": "1"}, Options{RNIC: rnic.Config{Trace: os.Stderr}}},
	{map[string]string{"GOROCE_TRACE": "yes"}, Options{RNIC: rnic.Config{Trace: os.Stderr}}},
	{map[string]string{"GOROCE_PCAP": "/tmp/run"}, Options{Pcap: "/tmp/run"}},
	{map[string]string{"NCCL_ALGO": "Ring"}, Options{Algo: AlgoRing}},
	{map[string]string{"NCCL_ALGO": "tree"}, Options{Algo: AlgoRecursiveDoubling}},
	{map[string]string{"NCCL_COMM_ID": "127.0.0.1:1234"}, Options{CommID: "127.0.0.1:1234"}},
	{map[string]string{"NCCL_COMM_ID": "[::1]:999"}, Options{CommID: "[::1]:999"}},
	{map[string]string{"NCCL_DEBUG": "info", "NCCL_DEBUG_FILE": "/tmp/nccl.%p"}, Options{Debug: "info", DebugFile: "/tmp/nccl.%p"}},
	{map[string]string{"NCCL_DEBUG_FILE": "/tmp/nccl.%p"}, Options{DebugFile: "/tmp/nccl.%p"}},
	{map[string]string{"NCCL_IB_TIMEOUT": "18"}, Options{IBTimeout: 18}},
	{map[string]string{"NCCL_IB_TIMEOUT": "16", "NCCL_IB_RETRY_CNT": "3"}, Options{IBTimeout: 16, IBRetryCnt: 3}},
	// The ends of their ranges.
	{map[string]string{"NCCL_IB_TIMEOUT": "31", "NCCL_IB_RETRY_CNT": "1"}, Options{IBTimeout: 31, IBRetryCnt: 1}},
	{map[string]string{"NCCL_IB_TIMEOUT": "1", "NCCL_IB_RETRY_CNT": "7"}, Options{IBTimeout: 1, IBRetryCnt: 7}},
	{map[string]string{"NCCL_NET_GDR_LEVEL": "phb"}, Options{GDRLevel: "phb"}},
	{map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.5", "MASTER_PORT": "1234"},
		Options{Launch: Env{Rank: 3, Size: 4, LocalRank: 1, Root: "127.0.0.5:1234", Launcher: "torchrun"}}},
	{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_ess_base_jobid": "77"},
		Options{Launch: Env{Rank: 0, Size: 2, LocalSize: 2, Root: "127.0.0.1:29500", Launcher: "openmpi",
			JobIDs: []string{"OMPI_MCA_ess_base_jobid=77"}}}},
	{map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "NCCL_COMM_ID": "[::1]:999",
		"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"},
		Options{CommID: "[::1]:999", Launch: Env{Rank: 5, Size: 8, LocalRank: 1, Root: "[::1]:999", Launcher: "slurm",
			JobIDs: []string{"SLURM_JOB_ID=12", "SLURM_STEP_ID=0"}}}},
	// A launcher that names no local rank: the rank's own; Slurm's under
	// torchrun's.
	{map[string]string{"RANK": "2", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3", JobSecretEnv: "f00d"},
		Options{Launch: Env{Rank: 2, Size: 3, LocalRank: 2, LocalSize: 3, Root: "127.0.0.1:29500", Launcher: "torchrun", Secret: "f00d"}}},
	{map[string]string{"RANK": "2", "WORLD_SIZE": "3", "SLURM_LOCALID": "0"},
		Options{Launch: Env{Rank: 2, Size: 3, LocalRank: 0, Root: "127.0.0.1:29500", Launcher: "torchrun"}}},
	// Without a launcher only the host's size and the job's names count.
	{map[string]string{"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "r", "PMIX_NAMESPACE": "p"},
		Options{Launch: Env{LocalSize: 2, JobIDs: []string{"PMIX_NAMESPACE=p", "TORCHELASTIC_RUN_ID=r"}}}},
}

// badSettings are environments with one bad value each and what the
// error must say.
var badSettings = []struct {
	env  map[string]string
	says string
}{
	{map[string]string{"GOROCE_ADDR": "nonsense"}, `GOROCE_ADDR="nonsense": want an IP address, or IP:port`},
	{map[string]string{"GOROCE_BUSY_POLL": "fast"}, `GOROCE_BUSY_POLL="fast": want a duration such as 200us, or 0 for off`},
	{map[string]string{"GOROCE_BUSY_POLL": "-1ms"}, `GOROCE_BUSY_POLL="-1ms": want a duration`},
	{map[string]string{"GOROCE_LINK": "bogus"}, `GOROCE_LINK="bogus": want udp or shm`},
	{map[string]string{"GOROCE_LINK": "tcp"}, `GOROCE_LINK="tcp": want udp or shm`},
	{map[string]string{"GOROCE_PEER_MEMORY": "yes"}, `GOROCE_PEER_MEMORY="yes": want 1 (on) or 0 (off)`},
	{map[string]string{"GOROCE_VERIFY_ICRC": "true"}, `GOROCE_VERIFY_ICRC="true": want 1 (on) or 0 (off)`},
	{map[string]string{"NCCL_ALGO": "CollNet"}, `NCCL_ALGO="CollNet": want Ring, Tree or RecursiveDoubling`},
	{map[string]string{"NCCL_COMM_ID": "127.0.0.1"}, `NCCL_COMM_ID="127.0.0.1": want host:port`},
	{map[string]string{"NCCL_COMM_ID": "127.0.0.1:0"}, `NCCL_COMM_ID="127.0.0.1:0": want host:port`},
	{map[string]string{"NCCL_DEBUG": "bogus"}, `NCCL_DEBUG="bogus": want VERSION, WARN, INFO or TRACE`},
	{map[string]string{"NCCL_IB_TIMEOUT": "0"}, `NCCL_IB_TIMEOUT="0": want 1 to 31`},
	{map[string]string{"NCCL_IB_TIMEOUT": "32"}, `NCCL_IB_TIMEOUT="32": want 1 to 31`},
	{map[string]string{"NCCL_IB_RETRY_CNT": "8"}, `NCCL_IB_RETRY_CNT="8": want 1 to 7`},
	{map[string]string{"NCCL_IB_RETRY_CNT": "x"}, `NCCL_IB_RETRY_CNT="x": want 1 to 7`},
	{map[string]string{"NCCL_NET_GDR_LEVEL": "NVL"}, `NCCL_NET_GDR_LEVEL="NVL": want LOC, PIX, PXB, PHB or SYS`},
	{map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, `RANK="x": want a whole number from 0`},
	{map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, `WORLD_SIZE="0": want a whole number from 1`},
	{map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, `RANK=4: want below WORLD_SIZE=4`},
	{map[string]string{"RANK": "0"}, `RANK="0" without WORLD_SIZE`},
	{map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "two"}, `OMPI_COMM_WORLD_SIZE="two": want a whole number from 1`},
	{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "-1"}, `SLURM_LOCALID="-1": want a whole number from 0`},
	{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "one"}, `LOCAL_RANK="one": want a whole number from 0`},
	{map[string]string{"LOCAL_WORLD_SIZE": "0"}, `LOCAL_WORLD_SIZE="0": want a whole number from 1`},
	{map[string]string{"OMPI_COMM_WORLD_LOCAL_SIZE": "many"}, `OMPI_COMM_WORLD_LOCAL_SIZE="many": want a whole number from 1`},
	{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "99999"}, `MASTER_PORT="99999": want a port number, 1 to 65535`},
}

// OptionsFromEnv reads each variable into its field, and refuses each bad
// value with an error that names the variable, the value and what it
// wants. The tables cover every variable it reads.
func TestOptionsFromEnv(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range settingCases {
		got, err := OptionsFromEnv(lookup(c.env))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v:\n got %+v, %v\nwant %+v", c.env, got, err, c.want)
		}
		for k := range c.env {
			covered[k] = true
		}
	}
	for _, c := range badSettings {
		_, err := OptionsFromEnv(lookup(c.env))
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want ErrInvalidArgument saying %s", c.env, err, c.says)
		}
	}
	for _, name := range settingNames() {
		if !covered[name] {
			t.Errorf("%s: no good value in settingCases", name)
		}
	}

	// Every bad value is reported, not only the first.
	_, err := OptionsFromEnv(lookup(map[string]string{"GOROCE_LINK": "tcp", "NCCL_ALGO": "CollNet", "RANK": "x", "WORLD_SIZE": "2"}))
	for _, name := range []string{"GOROCE_LINK", "NCCL_ALGO", "RANK"} {
		if err == nil || !strings.Contains(err.Error(), name+"=") {
			t.Errorf("three bad variables: %v, want %s named", err, name)
		}
	}
}

// settingNames are the names of every variable OptionsFromEnv reads.
func settingNames() []string {
	var names []string
	for _, v := range envSettings {
		names = append(names, v.name)
	}
	for _, l := range launchers {
		names = append(names, l.rank, l.size, l.local)
	}
	names = append(names, localSizeVars...)
	names = append(names, jobIDVars...)
	return append(names, JobSecretEnv, "MASTER_ADDR", "MASTER_PORT")
}

// The package doc lists every variable OptionsFromEnv reads.
func TestSettingsDocumented(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range settingNames() {
		if !strings.Contains(string(b), name) {
			t.Errorf("doc.go does not mention %s", name)
		}
	}
}

// envFuncs are the functions that read or change the process's
// environment, by package.
var envFuncs = map[string][]string{
	"os":      {"Getenv", "LookupEnv", "Environ", "ExpandEnv", "Setenv", "Unsetenv", "Clearenv"},
	"syscall": {"Getenv", "Environ", "Setenv", "Unsetenv", "Clearenv"},
}

// No library code of nccl, rnic or the packages under them refers to a
// function that reads the environment: settings reach them as options,
// which OptionsFromEnv builds from a getenv its caller passes. Tests and
// commands (package main, such as nccl/examples) are edges that may.
func TestLibrariesDoNotReadTheEnvironment(t *testing.T) {
	var found []string
	for _, root := range []string{".", filepath.Join("..", "rnic")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			found = append(found, envReads(t, path)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("the libraries read the environment (take the setting as an option, from OptionsFromEnv):\n%s",
			strings.Join(found, "\n"))
	}
}

// envReads lists where the Go file at path, unless it is a command's,
// refers to an envFuncs function.
func envReads(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{} // the name a file gives a package → its path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = p
	}
	if f.Name.Name == "main" {
		return nil
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(envFuncs[local[x.Name]], sel.Sel.Name) {
			found = append(found, fmt.Sprintf("%v: %s.%s", fset.Position(sel.Pos()), local[x.Name], sel.Sel.Name))
		}
		return true
	})
	return found
}

// A process whose every variable is set to a bad value still gets the
// communicator its options ask for: rendezvous, RNICs on UDP, an
// AllReduce checked against a plain sum, a GPU's path; the library read
// none of them. OptionsFromEnv, given the same environment, refuses it.
func TestPoisonedEnvironmentIsNotRead(t *testing.T) {
	if testing.Short() {
		testenv.SkipPartial(t, "short", "real sockets")
	}
	poison := map[string]string{}
	for _, c := range badSettings {
		for k, v := range c.env {
			if _, ok := poison[k]; !ok {
				poison[k] = v
			}
		}
	}
	for k, v := range poison {
		t.Setenv(k, v)
	}
	if _, err := OptionsFromEnv(os.Getenv); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("the poisoned environment: OptionsFromEnv says %v, want ErrInvalidArgument", err)
	}

	comms := initComms(t, 2, 0, func(r int) Options {
		return Options{Addr: fmt.Sprintf("127.143.1.%d", 10+r), Slots: 4, SlotSize: 16 << 10}
	})
	testAllReduce(t, comms, rand.New(rand.NewPCG(143, 1)), Float32, Sum, 5000, false)
	if a := comms[0].opts.Algo; a != AlgoAuto {
		t.Errorf("algorithm %v, want AlgoAuto (NCCL_ALGO is poisoned, not read)", a)
	}
	_, dev, nic, err := gpu.Preset(gpu.PathPIX, 1<<20, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := comms[0].UseGPU(GPU{Device: dev, NIC: nic}); err != nil {
		t.Errorf("UseGPU with NCCL_NET_GDR_LEVEL poisoned: %v", err)
	}
}
