//go:build cgo && linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bench/testenv"
)

// The tests of this file put goroce0 on addresses of their own,
// 127.134.0.N.
const sysfsNet = "127.134.0."

// verbsView is goroce0 as ibv_devinfo -v prints it under the preload: the
// verbs, which the sysfs files must agree with.
type verbsView struct {
	out                                string
	fwVer, nodeGUID, sysImageGUID      string // GUIDs as printed, 0000:ffff:7f86:0001
	state, physState, width, speed     string // "PORT_ACTIVE (4)", "LINK_UP (5)", "1X (1)", "2.5 Gbps (1)"
	linkLayer, capFlags                string
	lid, smLID, lmc, smSL              int
	gidTblLen, pkeyTblLen, physPortCnt int
	gids                               map[int]netip.Addr
}

// devinfo runs ibv_devinfo -v on goroce0 at addr and parses what it prints.
func devinfo(t *testing.T, lib, addr string) verbsView {
	t.Helper()
	bin := testenv.LookPath(t, "ibv_devinfo", "ibverbs-utils")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v := verbsView{out: start(ctx, t, lib, addr, nil, bin, "-v").wait(t), gids: map[int]netip.Addr{}}
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^\s*` + name + `:\s+(.*?)\s*$`).FindStringSubmatch(v.out)
		if m == nil {
			t.Fatalf("ibv_devinfo -v prints no %s:\n%s", name, v.out)
		}
		return m[1]
	}
	number := func(name string) int {
		n, err := strconv.ParseInt(field(name), 0, 64)
		if err != nil {
			t.Fatalf("ibv_devinfo -v: %s: %v", name, err)
		}
		return int(n)
	}
	v.fwVer, v.nodeGUID, v.sysImageGUID = field("fw_ver"), field("node_guid"), field("sys_image_guid")
	v.state, v.physState, v.width, v.speed = field("state"), field("phys_state"), field("active_width"), field("active_speed")
	v.linkLayer, v.capFlags = field("link_layer"), field("port_cap_flags")
	v.lid, v.smLID, v.lmc, v.smSL = number("port_lid"), number("sm_lid"), number("port_lmc"), number("sm_sl")
	v.gidTblLen, v.pkeyTblLen, v.physPortCnt = number("gid_tbl_len"), number("pkey_tbl_len"), number("phys_port_cnt")
	for _, m := range regexp.MustCompile(`GID\[\s*(\d+)\]:\s+(\S+), RoCE v2`).FindAllStringSubmatch(v.out, -1) {
		i, _ := strconv.Atoi(m[1])
		v.gids[i] = netip.MustParseAddr(m[2])
	}
	return v
}

// sysfsGID writes a GID as sysfs does (the kernel's %pI6).
func sysfsGID(a netip.Addr) string {
	b := a.As16()
	var s []string
	for i := 0; i < 16; i += 2 {
		s = append(s, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(s, ":")
}

// hostNetdev names the interface addr lives on, found with Go's net
// package: the one that has it, else the first whose subnet holds it.
func hostNetdev(t *testing.T, addr netip.Addr) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, exact := range []bool{true, false} {
		for _, ifc := range ifs {
			as, _ := ifc.Addrs()
			for _, a := range as {
				n, ok := a.(*net.IPNet)
				if !ok {
					continue
				}
				ip, _ := netip.AddrFromSlice(n.IP)
				if exact && ip.Unmap() == addr.Unmap() || !exact && n.Contains(net.IP(addr.Unmap().AsSlice())) {
					return ifc.Name
				}
			}
		}
	}
	t.Fatalf("no interface holds %v", addr)
	return ""
}

// expectAll fails the test for each regexp out lacks.
func expectAll(t *testing.T, what, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("%s lacks %q", what, re)
		}
	}
	if t.Failed() {
		t.Logf("%s printed:\n%s", what, out)
	}
}

// TestSysfsTools runs Debian's infiniband-diags (ibstat, ibstatus) and
// ibverbs-utils (ibv_devinfo -v, ibv_devices) preloaded: the first two
// read sysfs only, the others the verbs. Each must show goroce0, its port 1
// ACTIVE on Ethernet and its GID, with the values the verbs report, in the
// words each tool prints for rxe0's.
func TestSysfsTools(t *testing.T) {
	lib := libs(t)
	ibstat := testenv.LookPath(t, "ibstat", "infiniband-diags")
	ibstatus := testenv.LookPath(t, "ibstatus", "infiniband-diags")
	devices := testenv.LookPath(t, "ibv_devices", "ibverbs-utils")
	addr := sysfsNet + "1"
	v := devinfo(t, lib, addr)
	expectAll(t, "ibv_devinfo -v", v.out, `hca_id:\s+goroce0\n`, `state:\s+PORT_ACTIVE \(4\)`, `link_layer:\s+Ethernet`,
		`GID\[\s*0\]:\s+::ffff:`+regexp.QuoteMeta(addr)+`, RoCE v2\n`)
	if v.physPortCnt != 1 || v.state != "PORT_ACTIVE (4)" || v.physState != "LINK_UP (5)" || v.width != "1X (1)" || v.speed != "2.5 Gbps (1)" {
		t.Fatalf("ibv_devinfo -v: goroce0's port is not rxe's (1 port, ACTIVE, LINK_UP, 1X, 2.5 Gbps): %+v", v)
	}
	guid, sysGUID := strings.ReplaceAll(v.nodeGUID, ":", ""), strings.ReplaceAll(v.sysImageGUID, ":", "")
	gid0 := v.gids[0].As16()
	portGUID := fmt.Sprintf("%x", gid0[8:]) // the GID's interface half

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(args ...string) string {
		return start(ctx, t, lib, addr, nil, args[0], args[1:]...).wait(t)
	}
	expectAll(t, "ibv_devices", run(devices), `(?m)^\s+goroce0\s+`+guid+`$`)
	// ibstat's words for rxe0's state 4, phys_state 5 and rate 2: Active,
	// LinkUp, 2.5 (infiniband-diags' ibstat.c).
	expectAll(t, "ibstat", run(ibstat),
		`CA 'goroce0'\n`, `\tNumber of ports: 1\n`, `\tFirmware version: `+regexp.QuoteMeta(v.fwVer)+`\n`,
		`\tNode GUID: 0x`+guid+`\n`, `\tSystem image GUID: 0x`+sysGUID+`\n`, `\tPort 1:\n`,
		`\t\tState: Active\n`, `\t\tPhysical state: LinkUp\n`, `\t\tRate: 2.5\n`,
		fmt.Sprintf(`\t\tBase lid: %d\n\t\tLMC: %d\n\t\tSM lid: %d\n`, v.lid, v.lmc, v.smLID),
		`\t\tCapability mask: `+v.capFlags+`\n`, `\t\tPort GUID: 0x`+portGUID+`\n`, `\t\tLink layer: `+v.linkLayer+`\n`)
	expectAll(t, "ibstat -l", run(ibstat, "-l"), `^goroce0\n$`)
	expectAll(t, "ibstat -p", run(ibstat, "-p"), `^0x`+portGUID+`\n$`)
	// ibstatus prints the sysfs files as they are (rxe0-device-view.txt).
	expectAll(t, "ibstatus", run(ibstatus),
		`Infiniband device 'goroce0' port 1 status:\n`, `\tdefault gid:\t `+sysfsGID(v.gids[0])+`\n`,
		fmt.Sprintf(`\tbase lid:\t 0x%x\n\tsm lid:\t\t 0x%x\n`, v.lid, v.smLID),
		`\tstate:\t\t 4: ACTIVE\n`, `\tphys state:\t 5: LinkUp\n`, `\trate:\t\t 2.5 Gb/sec \(1X SDR\)\n`,
		`\tlink_layer:\t `+v.linkLayer+`\n`)
	expectAll(t, "ibstatus goroce0:1", run(ibstatus, "goroce0:1"), `Infiniband device 'goroce0' port 1 status:\n`, `4: ACTIVE`)
}

// buildCheck builds testdata/sysfs_check.c.
func buildCheck(t *testing.T) string {
	t.Helper()
	prog := filepath.Join(t.TempDir(), "sysfs_check")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", prog, "testdata/sysfs_check.c", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return prog
}

// An entry of a directory tree: "regular file 444 4096" and what reading
// it gives ("= VALUE (bytes N)", "= read error: EINVAL"), or where it
// links ("-> TARGET").
type treeEntry struct{ kind, what string }

// entryLine is a line of rxe0-sysfs.txt's walks and of sysfs_check tree.
var entryLine = regexp.MustCompile(`^(\S+) \[([^\]]*)\]\s*(.*)$`)

// readCapture parses testdata/rxe0-sysfs.txt: its walks, by section, and
// the rest of its lines.
func readCapture(t *testing.T) (walks map[string]map[string]treeEntry, lines []string) {
	t.Helper()
	f, err := os.Open("testdata/rxe0-sysfs.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	walks = map[string]map[string]treeEntry{}
	section := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		l := s.Text()
		switch {
		case strings.HasPrefix(l, "### "):
			section = l[4:]
			walks[section] = map[string]treeEntry{}
		case strings.HasPrefix(l, "#"):
		default:
			if m := entryLine.FindStringSubmatch(l); m != nil {
				walks[section][m[1]] = treeEntry{m[2], m[3]}
			}
			lines = append(lines, section+": "+l)
		}
	}
	return walks, lines
}

// readGolden parses rxe0-device-view.txt's list of rxe0's files and their
// first lines: path relative to /sys/class/infiniband/rxe0/ -> value.
func readGolden(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("testdata/rxe0-device-view.txt")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^/sys/class/infiniband/rxe0/(\S+) = (.*)$`).FindAllStringSubmatch(string(b), -1) {
		files["./"+m[1]] = m[2]
	}
	for _, m := range regexp.MustCompile(`(?m)^/sys/class/infiniband_verbs/uverbs0/(\S+) = (.*)$`).FindAllStringSubmatch(string(b), -1) {
		files["uverbs0/"+m[1]] = m[2]
	}
	if len(files) < 25 {
		t.Fatalf("rxe0-device-view.txt lists %d files of rxe0 and uverbs0", len(files))
	}
	return files
}

// shape is a value with every hexadecimal digit made "h": the format of a
// GUID or a GID.
func shape(s string) string { return regexp.MustCompile(`[0-9a-f]`).ReplaceAllString(s, "h") }

// firstLine matches what the walks print of a file: its first line and
// size.
var firstLine = regexp.MustCompile(`^= (.*) \(bytes \d+\)$`)

// gidEntry matches a file of the GID table: its table and index.
var gidEntry = regexp.MustCompile(`^\./ports/1/(gids|gid_attrs/types|gid_attrs/ndevs|pkeys)/(\d+)$`)

// TestSysfsTree compares goroce0's tree, as a preloaded program walks it
// (testdata/sysfs_check.c), with rxe0's as Linux shows it: every file,
// directory and link of rxe0's (testdata/rxe0-sysfs.txt, captured in the
// rxe lab; power/, the CM's counters and hw_counters/ left out, see
// shim/sysfs.c) is there for goroce0 with the same type, mode and size and
// a value of the same format (rxe0-device-view.txt's first lines too); the
// values that are goroce0's own (GUIDs, GIDs, firmware version, netdev) are
// the ones the verbs report (ibv_devinfo -v) and the host's interfaces
// hold; and goroce0 has nothing rxe0 lacks. The GID table has the length
// ibv_query_port reports, its empty entries read as rxe0's do.
func TestSysfsTree(t *testing.T) {
	lib := libs(t)
	prog := buildCheck(t)
	addr := sysfsNet + "2"
	v := devinfo(t, lib, addr)
	netdev := hostNetdev(t, netip.MustParseAddr(addr))
	capture, lines := readCapture(t)
	var emptyReads []string
	for _, l := range lines {
		if strings.Contains(l, "read error: Invalid argument") {
			emptyReads = append(emptyReads, l)
		}
	}
	golden := readGolden(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := start(ctx, t, lib, addr, nil, prog, "tree", "/sys/class/infiniband/goroce0/", "/sys/class/infiniband_verbs/uverbs0/",
		"/sys/class/infiniband_verbs/", "/dev/infiniband/").wait(t)
	ours := map[string]map[string]treeEntry{}
	dir := ""
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "### ") {
			dir = l[4:]
			ours[dir] = map[string]treeEntry{}
		} else if m := entryLine.FindStringSubmatch(l); m != nil {
			ours[dir][m[1]] = treeEntry{m[2], m[3]}
		} else {
			t.Fatalf("sysfs_check tree printed %q", l)
		}
	}
	dev := ours["/sys/class/infiniband/goroce0/"]

	// What goroce0's own values must be, by path: the verbs', the host's
	// netdev, goroce0's name where rxe0 has its own.
	value := func(rel, rxe string) (string, bool) {
		switch rel {
		case "./fw_ver":
			return v.fwVer, true
		case "./node_guid":
			return v.nodeGUID, true
		case "./sys_image_guid":
			return v.sysImageGUID, true
		case "./parent":
			return netdev, true
		case "./node_desc": // the driver's name: rxe's is rxe
			return "", false
		}
		return strings.ReplaceAll(rxe, "rxe0", "goroce0"), true
	}
	check := func(where, rel string, want treeEntry) {
		t.Helper()
		got, ok := dev[rel]
		if where != "" {
			got, ok = ours[where][rel]
		}
		if !ok {
			t.Errorf("%s%s: rxe0 has it (%s %s), goroce0 does not", where, rel, want.kind, want.what)
			return
		}
		if got.kind != want.kind {
			t.Errorf("%s%s: %s, rxe0's is %s", where, rel, got.kind, want.kind)
		}
		if got.what != want.what {
			t.Errorf("%s%s: %q, want %q", where, rel, got.what, want.what)
		}
	}
	// read gives a file's entry with value v, as the walks print it.
	read := func(v string) string { return fmt.Sprintf("= %s (bytes %d)", v, len(v)+1) }

	// rxe0's files but the GID and P_Key tables, from the capture.
	for rel, e := range capture["rxe0 tree"] {
		if strings.HasPrefix(rel, "./power") || strings.HasPrefix(rel, "./ports/1/cm_") || strings.HasPrefix(rel, "./ports/1/hw_counters") {
			continue
		}
		if m := firstLine.FindStringSubmatch(e.what); m != nil {
			rxe := m[1]
			val, own := value(rel, rxe)
			if !own {
				val = rxe
				if m := firstLine.FindStringSubmatch(dev[rel].what); m != nil && regexp.MustCompile(`^[a-z]+$`).MatchString(m[1]) {
					val = m[1] // a word, as rxe0's
				}
			}
			if shape(val) != shape(rxe) && rel != "./fw_ver" && rel != "./parent" && rel != "./uevent" && rel != "./node_desc" {
				t.Errorf("%s: %q is not of the format of rxe0's %q", rel, val, rxe)
			}
			e.what = read(val)
		}
		check("", rel, e)
	}
	// Nothing rxe0 lacks, but the tables' entries.
	for rel := range dev {
		if _, ok := capture["rxe0 tree"][rel]; !ok && !gidEntry.MatchString(rel) {
			t.Errorf("%s: goroce0 has it, rxe0 does not", rel)
		}
	}
	// The GID table: as long as ibv_query_port says; goroce0's GIDs where
	// the verbs have them, and the other entries empty, as rxe0's gids/2
	// (the zero GID) and gid_attrs/types/7 and ndevs/7 (cat: "read error:
	// Invalid argument").
	rxeGID := capture["gid table sizes"]
	if rxeGID["ports/1/gids/2"].what != read("0000:0000:0000:0000:0000:0000:0000:0000") ||
		!slices.Equal(emptyReads, []string{"empty entries: cat: read error: Invalid argument", "empty entries: cat: read error: Invalid argument"}) {
		t.Fatalf("rxe0-sysfs.txt: rxe0's empty GID entries are not as this test knows them: %v, %q", rxeGID, emptyReads)
	}
	if len(v.gids) == 0 {
		t.Fatalf("ibv_devinfo -v shows no GID:\n%s", v.out)
	}
	file := rxeGID["ports/1/gids/0"].kind
	for i := range v.gidTblLen + 1 {
		entries := map[string]string{
			"gids":            read("0000:0000:0000:0000:0000:0000:0000:0000"),
			"gid_attrs/types": "= read error: EINVAL",
			"gid_attrs/ndevs": "= read error: EINVAL",
		}
		if gid, ok := v.gids[i]; ok {
			entries = map[string]string{"gids": read(sysfsGID(gid)), "gid_attrs/types": rxeGID["ports/1/gid_attrs/types/0"].what,
				"gid_attrs/ndevs": read(hostNetdev(t, gid))}
		}
		for table, what := range entries {
			rel := fmt.Sprintf("./ports/1/%s/%d", table, i)
			if i < v.gidTblLen {
				check("", rel, treeEntry{file, what})
			} else if _, ok := dev[rel]; ok {
				t.Errorf("%s: past the GID table's %d entries (rxe0 has no gids/1024)", rel, v.gidTblLen)
			}
		}
	}
	if v.gidTblLen != 1024 {
		t.Logf("goroce0's GID table has %d entries (ibv_query_port), rxe0's 1024", v.gidTblLen)
	}
	for i := range v.pkeyTblLen {
		check("", fmt.Sprintf("./ports/1/pkeys/%d", i), rxeGID["ports/1/pkeys/0"])
	}

	// uverbs0, /sys/class/infiniband_verbs and /dev/infiniband.
	const verbs, uverbs = "/sys/class/infiniband_verbs/", "/sys/class/infiniband_verbs/uverbs0/"
	for rel, e := range capture["verbs class"] {
		switch {
		case strings.HasPrefix(rel, "./power"):
		case strings.HasPrefix(rel, verbs):
			check(verbs, "./"+strings.TrimPrefix(rel, verbs), e)
		default:
			e.what = strings.ReplaceAll(e.what, read("rxe0"), read("goroce0"))
			check(uverbs, rel, e)
		}
	}
	check(verbs, "./uverbs0", treeEntry{"symbolic link 777 0", "-> ../../devices/virtual/infiniband_verbs/uverbs0"})
	check("/dev/infiniband/", "./uverbs0", treeEntry{"character special file 666 0", ""})
	for dir, want := range map[string]int{verbs: 2, uverbs: 5, "/dev/infiniband/": 1} {
		if len(ours[dir]) != want+1 {
			t.Errorf("%s: %d entries, rxe0's has %d (without power/)", dir, len(ours[dir])-1, want)
		}
	}

	// rxe0-device-view.txt's first lines: the same, or for goroce0's own
	// values, what the verbs say in rxe0's format (against goroce0's first
	// GID for rxe0's two).
	for rel, rxe := range golden {
		entries := dev
		if strings.HasPrefix(rel, "uverbs0/") {
			entries, rel = ours[uverbs], "./"+strings.TrimPrefix(rel, "uverbs0/")
		}
		if m := gidEntry.FindStringSubmatch(rel); m != nil {
			rel = "./ports/1/" + m[1] + "/0"
		}
		got, ok := entries[rel]
		if !ok || !firstLine.MatchString(got.what) {
			t.Errorf("%s: rxe0-device-view.txt has %q, goroce0 %q", rel, rxe, got.what)
			continue
		}
		first := firstLine.FindStringSubmatch(got.what)[1]
		switch want, own := value(rel, rxe); {
		case rel == "./ports/1/gids/0":
			if shape(first) != shape(rxe) {
				t.Errorf("%s: %q, not of the format of rxe0's %q", rel, first, rxe)
			}
		case rel == "./ports/1/gid_attrs/ndevs/0":
			if first != netdev {
				t.Errorf("%s: %q, want %q (rxe0's: %q)", rel, first, netdev, rxe)
			}
		case !own:
		case first != strings.SplitN(want, "\n", 2)[0]:
			t.Errorf("%s: %q, want %q (rxe0's: %q)", rel, first, want, rxe)
		}
	}
}

// TestSysfsEdges runs testdata/sysfs_check.c's edge cases preloaded: paths
// outside the tree are the host's (a file read as the test reads it
// itself, a directory listed with the tree's entries added, as the host
// lists it), what the tree lacks is ENOENT, writes fail as sysfs fails
// them, the uverbs device is rxe0's (testdata/rxe0-sysfs.txt) and its
// descriptor fails read, write and ioctl and closes, other spellings of a
// path name the same node (.., //, ./, a trailing slash, relative after
// chdir, relative to a directory descriptor), and eight threads reading
// the tree at once get the same answers and leave no descriptor or memory
// behind.
func TestSysfsEdges(t *testing.T) {
	lib := libs(t)
	prog := buildCheck(t)
	addr := sysfsNet + "3"
	v := devinfo(t, lib, addr)
	mtu, err := os.ReadFile("/sys/class/net/lo/mtu")
	if err != nil {
		t.Fatal(err)
	}
	// The host's listings, and the tree's names in them.
	list := func(dir string, add ...string) string {
		names := add
		if es, err := os.ReadDir(dir); err == nil {
			for _, e := range es {
				names = append(names, e.Name())
			}
		}
		slices.Sort(names)
		return strings.Join(slices.Compact(names), " ")
	}
	// rxe0's directories, without what goroce0 leaves out (TestSysfsTree).
	capture, lines := readCapture(t)
	rxeDir := func(dir string) string {
		var names []string
		for rel := range capture["rxe0 tree"] {
			name, ok := strings.CutPrefix(rel, dir+"/")
			if ok && !strings.Contains(name, "/") && name != "power" && name != "hw_counters" && !strings.HasPrefix(name, "cm_") {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return strings.Join(names, " ")
	}
	// rxe0's uverbs0: "/dev/infiniband/uverbs0 character special file 666 e7:c0 ...".
	var uverbs string
	for _, l := range lines {
		var mode, maj, min int
		if n, _ := fmt.Sscanf(l, "dev: /dev/infiniband/uverbs0 character special file %o %x:%x", &mode, &maj, &min); n == 3 {
			uverbs = fmt.Sprintf("character special file %o %d:%d", mode, maj, min)
		}
	}
	if uverbs == "" {
		t.Fatal("rxe0-sysfs.txt does not show /dev/infiniband/uverbs0")
	}
	const dev, port = "/sys/class/infiniband/goroce0", "/sys/class/infiniband/goroce0/ports/1"
	want := []string{
		"host /sys/class/net/lo/mtu: ok " + strings.TrimSpace(string(mtu)),
		"host /etc/hostname stat: ok",
		"listing /sys/class: " + list("/sys/class", "infiniband", "infiniband_verbs"),
		"scandir /sys/class: " + list("/sys/class", "infiniband", "infiniband_verbs"),
		"listing /dev/infiniband: " + list("/dev/infiniband", "uverbs0"),
		"scandir " + port + ": " + rxeDir("./ports/1"),
		"stat ports/2: ENOENT",
		"open ports/2: ENOENT",
		"opendir ports/2: ENOENT",
		"access ports/2: ENOENT",
		"open node_guid/x: ENOTDIR",
		"open node_guid O_WRONLY: EACCES",
		"open node_guid O_RDWR: EACCES",
		"fopen node_guid w: EACCES",
		"open newfile O_CREAT: EACCES",
		"open node_guid O_CREAT|O_EXCL: EEXIST",
		"open ports O_WRONLY: EISDIR",
		"open node_guid O_DIRECTORY: ENOTDIR",
		"write to a node_guid opened for reading: EBADF",
		"stat uverbs0: " + uverbs,
		"access uverbs0 R_OK|W_OK: ok",
		"open uverbs0: ok",
		"fstat uverbs0: " + strings.Replace(uverbs, " 666", "", 1),
		"read uverbs0: EINVAL",
		"write uverbs0: EINVAL",
		"ioctl uverbs0 RDMA_VERBS_IOCTL: fails",
		"close uverbs0: ok",
		"close uverbs0 again: EBADF",
		"ports/1/../1/state: ok 4: ACTIVE",
		"//sys//class/./infiniband/goroce0/ports/1/state: ok 4: ACTIVE",
		"stat " + dev + "/: ok",
		"stat node_guid/: ENOTDIR",
		"realpath ports/1/../1/state: /sys/devices/virtual/infiniband/goroce0/ports/1/state",
		"readlink " + dev + ": ../../devices/virtual/infiniband/goroce0",
		"readlink node_guid: EINVAL",
		"lstat " + dev + ": symbolic link",
		"statx node_guid: regular file 444 4096",
		"chdir " + dev + ": ok",
		"getcwd: /sys/devices/virtual/infiniband/goroce0",
		"relative ports/1/state: ok 4: ACTIVE",
		"listing .: " + rxeDir("."),
		"chdir ports/1/gids: ok",
		"relative 0: ok " + sysfsGID(v.gids[0]),
		"chdir ../../..: ok",
		"getcwd: /sys/devices/virtual/infiniband/goroce0",
		"chdir ../../../class/net: ENOENT",
		"chdir ../../../../class/net: ok",
		"getcwd: /sys/class/net",
		"relative lo/mtu: ok " + strings.TrimSpace(string(mtu)),
		"chdir back: ok",
		"open " + dev + " O_DIRECTORY: ok",
		"fstat it: directory",
		"openat it ports/1/state: 4: ACTIVE",
		"fstatat it node_type: regular file",
		"read it: EINVAL",
		"fdopendir it: 11 entries",
		"closedir closes it: 1 fewer descriptors, fcntl: EBADF",
		"dirfd of a stream of the tree: ok",
		"openat dirfd state: ok",
		fmt.Sprintf("gids: %d entries", v.gidTblLen),
		fmt.Sprintf("stat gids/%d: ENOENT", v.gidTblLen),
		"stat gids/01: ENOENT",
	}
	if len(v.gids) < v.gidTblLen { // an empty entry: its attributes read as rxe0's (rxe0-sysfs.txt)
		want = append(want, "an empty entry's type: EINVAL ", "an empty entry's ndev: EINVAL ")
	}
	want = append(want,
		"8 threads x 300 rounds: 0 wrong answers, 0 descriptors left, heap grew under 64 KiB: 1",
		"forked child reads: ok")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	diffLines(t, "sysfs_check edges", start(ctx, t, lib, addr, nil, prog, "edges").wait(t), "want", strings.Join(want, "\n"))
}

// TestUCXInfo runs Debian's ucx_info -d preloaded: UCX lists a device only
// if /dev/infiniband/<its dev_name> is a character device it may read and
// write, and reads the port's GID attributes from sysfs. It must list
// goroce0's port with the RC and UD transports, as it lists rxe0:1
// (rxe0-device-view.txt).
func TestUCXInfo(t *testing.T) {
	lib := libs(t)
	bin := testenv.LookPath(t, "ucx_info", "ucx-utils")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := start(ctx, t, lib, sysfsNet+"4", nil, bin, "-d").wait(t)
	expectAll(t, "ucx_info -d", out, `# Memory domain: goroce0\n#\s+Component: ib\n`,
		`#\s+Transport: rc_verbs\n#\s+Device: goroce0:1\n#\s+Type: network\n`,
		`#\s+Transport: ud_verbs\n#\s+Device: goroce0:1\n#\s+Type: network\n`)
}
