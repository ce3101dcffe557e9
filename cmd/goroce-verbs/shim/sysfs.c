/*
 * sysfs.c: goroce0 where rdma-core's users look for a device, inside the
 * preloaded process only: /dev/infiniband/uverbs0, /sys/class/infiniband_verbs
 * and /sys/class/infiniband/goroce0, laid out and formatted as Linux shows
 * rxe0. Nothing is created on the host. The calls programs make on paths
 * (open, fopen, the stat family, access, opendir/readdir/scandir,
 * readlink/realpath, chdir/getcwd, close) are interposed; a path that
 * names a node of tree[] (found by resolve()) is answered from it, any
 * other goes to libc untouched. Directories that exist on the host as well
 * (/dev, /sys/class, /sys/class/infiniband with a real device) list the
 * host's entries and the tree's.
 *
 * The values are the Go core's device and port attributes, the ones
 * ibv_query_device and ibv_query_port report, taken once (values()) and
 * kept, so that a forked child reads them without the Go runtime.
 *
 * Descriptors: a file of the tree opens as a sealed memfd holding its
 * content, read-only; a file whose read fails in sysfs (the attributes of
 * an empty GID entry: EINVAL) and the uverbs device open as an epoll
 * descriptor, on which read, write and ioctl fail (read and write with
 * EINVAL); a directory opens as an epoll descriptor the file tracks, so that
 * fstat, fchdir, fdopendir and the *at calls relative to it work. A
 * descriptor closed other than by close() (fclose of an fdopen'd one, dup2
 * over it) is noticed when its number is next used: the tracked entry
 * records the descriptor's inode.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#include "../core.h"

#define EXPORT __attribute__((visibility("default")))

/* The core's functions, loaded on first use (verbs.c). */
void *goroce_core_symbol(const char *name);

/* glibc's names from before 2.33 for the stat family, which binaries
 * built against older glibc still call. */
int __xstat(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
char *__getcwd_chk(char *buf, size_t size, size_t buflen);

/* libc's definitions of what this file interposes. NEXT(f) is libc's f. */
static void *next(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "goroce-verbs: libc lacks %s\n", name);
		abort();
	}
	return f;
}
#define NEXT(f)                                                         \
	({                                                              \
		static __typeof__(&f) next_;                            \
		__typeof__(&f) p_ = __atomic_load_n(&next_, __ATOMIC_ACQUIRE); \
		if (!p_) {                                              \
			p_ = (__typeof__(&f))next(#f);                  \
			__atomic_store_n(&next_, p_, __ATOMIC_RELEASE); \
		}                                                       \
		p_;                                                     \
	})

/* ---- the tree ---- */

enum kind {
	HOSTDIR, /* a directory of the host's that holds one of the tree's: only its listing is the tree's concern */
	DIR_,
	FILE_,
	LINK,
	CHR,
};

struct node {
	/* The path; "@D" stands for the device's name (goroce0), "@U" for
	 * its uverbs device's (uverbs0), and a last component "#" for the
	 * entries 0 ... count()-1 of a table. */
	const char *pattern;
	enum kind kind;
	int (*show)(char *buf, size_t len, unsigned i); /* FILE_: the content, or -errno */
	const char *target;                           /* LINK, with the same "@" names */
	unsigned (*count)(void);                      /* "#" */
	mode_t mode;                                  /* 0: the kind's */
	char path[128], link[128];                    /* pattern and target with the names put in */
	dev_t dev;                                    /* HOSTDIR: the host's directory */
	ino_t ino;
};

static int show_node_type(char *, size_t, unsigned), show_guid(char *, size_t, unsigned),
	show_sys_image_guid(char *, size_t, unsigned), show_fw_ver(char *, size_t, unsigned),
	show_node_desc(char *, size_t, unsigned), show_parent(char *, size_t, unsigned),
	show_ib_uevent(char *, size_t, unsigned), show_state(char *, size_t, unsigned),
	show_phys_state(char *, size_t, unsigned), show_rate(char *, size_t, unsigned),
	show_lid(char *, size_t, unsigned), show_sm_lid(char *, size_t, unsigned), show_sm_sl(char *, size_t, unsigned),
	show_lmc(char *, size_t, unsigned), show_cap_mask(char *, size_t, unsigned),
	show_link_layer(char *, size_t, unsigned), show_gid(char *, size_t, unsigned),
	show_gid_type(char *, size_t, unsigned), show_gid_ndev(char *, size_t, unsigned),
	show_pkey(char *, size_t, unsigned), show_verbs_abi(char *, size_t, unsigned),
	show_uverbs_abi(char *, size_t, unsigned), show_uverbs_dev(char *, size_t, unsigned),
	show_ibdev(char *, size_t, unsigned), show_uverbs_uevent(char *, size_t, unsigned);
static unsigned gid_count(void), pkey_count(void);

#define IB "/sys/devices/virtual/infiniband/@D"
#define PORT IB "/ports/1"
#define UV "/sys/devices/virtual/infiniband_verbs/@U"

/* What Linux shows of rxe0 (cmd/goroce-verbs/testdata/rxe0-sysfs.txt),
 * but power/ (runtime power management of a device that has none), the
 * CM's counters and hw_counters/ (the device's counters, live in the Go
 * core: goroce stat shows them). */
static struct node tree[] = {
	{"/dev", HOSTDIR},
	{"/dev/infiniband", DIR_},
	{"/dev/infiniband/@U", CHR},
	{"/sys/class", HOSTDIR},
	{"/sys/class/infiniband", DIR_},
	{"/sys/class/infiniband/@D", LINK, .target = "../../devices/virtual/infiniband/@D"},
	{"/sys/class/infiniband_verbs", DIR_},
	{"/sys/class/infiniband_verbs/abi_version", FILE_, show_verbs_abi},
	{"/sys/class/infiniband_verbs/@U", LINK, .target = "../../devices/virtual/infiniband_verbs/@U"},
	{"/sys/devices/virtual", HOSTDIR},
	{"/sys/devices/virtual/infiniband", DIR_},
	{IB, DIR_},
	{IB "/fw_ver", FILE_, show_fw_ver},
	{IB "/node_desc", FILE_, show_node_desc, .mode = 0644},
	{IB "/node_guid", FILE_, show_guid},
	{IB "/node_type", FILE_, show_node_type},
	{IB "/parent", FILE_, show_parent},
	{IB "/ports", DIR_},
	{PORT, DIR_},
	{PORT "/cap_mask", FILE_, show_cap_mask},
	{PORT "/gid_attrs", DIR_},
	{PORT "/gid_attrs/ndevs", DIR_},
	{PORT "/gid_attrs/ndevs/#", FILE_, show_gid_ndev, .count = gid_count},
	{PORT "/gid_attrs/types", DIR_},
	{PORT "/gid_attrs/types/#", FILE_, show_gid_type, .count = gid_count},
	{PORT "/gids", DIR_},
	{PORT "/gids/#", FILE_, show_gid, .count = gid_count},
	{PORT "/lid", FILE_, show_lid},
	{PORT "/lid_mask_count", FILE_, show_lmc},
	{PORT "/link_layer", FILE_, show_link_layer},
	{PORT "/phys_state", FILE_, show_phys_state},
	{PORT "/pkeys", DIR_},
	{PORT "/pkeys/#", FILE_, show_pkey, .count = pkey_count},
	{PORT "/rate", FILE_, show_rate},
	{PORT "/sm_lid", FILE_, show_sm_lid},
	{PORT "/sm_sl", FILE_, show_sm_sl},
	{PORT "/state", FILE_, show_state},
	{IB "/subsystem", LINK, .target = "../../../../class/infiniband"},
	{IB "/sys_image_guid", FILE_, show_sys_image_guid},
	{IB "/uevent", FILE_, show_ib_uevent, .mode = 0644},
	{"/sys/devices/virtual/infiniband_verbs", DIR_},
	{UV, DIR_},
	{UV "/abi_version", FILE_, show_uverbs_abi},
	{UV "/dev", FILE_, show_uverbs_dev},
	{UV "/ibdev", FILE_, show_ibdev},
	{UV "/subsystem", LINK, .target = "../../../../class/infiniband_verbs"},
	{UV "/uevent", FILE_, show_uverbs_uevent, .mode = 0644},
};
#define NNODES (sizeof tree / sizeof tree[0])

/* The uverbs device's character device numbers: IB_UVERBS_BASE_DEV,
 * (231, 192), plus its index. */
#define UVERBS_MAJOR 231
#define UVERBS_MINOR 192

/* The provider ABI uverbs0 reports: rxe's (RXE_UVERBS_ABI_VERSION), whose
 * place goroce0 takes. */
#define UVERBS_PROVIDER_ABI 2

/* The default P_Key, the one entry of the P_Key table (ibv_query_pkey). */
#define DEFAULT_PKEY 0xffff

/* names: goroce0 as ibv_get_device_list gives it, and the tree's paths. */
static struct {
	pthread_once_t once;
	char name[IBV_SYSFS_NAME_MAX], uverbs[IBV_SYSFS_NAME_MAX];
	int node_type;      /* enum ibv_node_type */
	unsigned minor;     /* the uverbs device's */
	dev_t sys, dev;     /* st_dev of the host's /sys and /dev */
	struct timespec at; /* the nodes' times: when the tree was first looked at */
} names = {.once = PTHREAD_ONCE_INIT};

/* expand copies pattern to out with "@D" and "@U" replaced. */
static void expand(char *out, size_t len, const char *pattern)
{
	size_t n = 0;
	for (const char *p = pattern; *p && n + 1 < len; p++) {
		const char *s = NULL;
		if (p[0] == '@' && p[1] == 'D')
			s = names.name;
		else if (p[0] == '@' && p[1] == 'U')
			s = names.uverbs;
		if (!s) {
			out[n++] = *p;
			continue;
		}
		size_t room = len - n, w = (size_t)snprintf(out + n, room, "%s", s);
		n += w < room ? w : room - 1;
		p++;
	}
	out[n] = 0;
}

/* init_names takes goroce0's names from the verbs' device list and puts
 * them in the tree's paths. */
static void init_names(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (list && list[0]) {
		snprintf(names.name, sizeof names.name, "%s", list[0]->name);
		snprintf(names.uverbs, sizeof names.uverbs, "%s", list[0]->dev_name);
		names.node_type = list[0]->node_type;
	}
	if (list)
		ibv_free_device_list(list);
	names.minor = UVERBS_MINOR + (unsigned)atoi(names.uverbs + strcspn(names.uverbs, "0123456789"));
	struct stat st;
	if (!NEXT(stat)("/sys", &st))
		names.sys = st.st_dev;
	if (!NEXT(stat)("/dev", &st))
		names.dev = st.st_dev;
	clock_gettime(CLOCK_REALTIME, &names.at);
	for (size_t i = 0; i < NNODES; i++) {
		expand(tree[i].path, sizeof tree[i].path, tree[i].pattern);
		if (tree[i].target)
			expand(tree[i].link, sizeof tree[i].link, tree[i].target);
		if (tree[i].kind == HOSTDIR && !NEXT(stat)(tree[i].path, &st))
			tree[i].dev = st.st_dev, tree[i].ino = st.st_ino;
	}
}

/* values: the device's attributes from the Go core, taken once. */
static struct {
	pthread_once_t once;
	int err;
	struct goroce_device_attr dev;
	struct goroce_port_attr port;
	unsigned ngid;             /* the GID table's length, */
	uint8_t (*gid)[16];        /* its entries (an empty one all zero), */
	unsigned char *full;       /* which are not empty, */
	char (*ndev)[IF_NAMESIZE]; /* and the netdev of each */
} view = {.once = PTHREAD_ONCE_INIT};

/* bytes points at a socket address's IPv4 or IPv6 address. */
static const uint8_t *bytes(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ? (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr
					: ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
}

/* netdev names the interface the GID's address lives on: the one that has
 * it, else the first whose subnet holds it (127.0.0.2 lives on lo); ""
 * for none. */
static void netdev(const uint8_t gid[16], char name[IF_NAMESIZE])
{
	static const uint8_t v4mapped[12] = {[10] = 0xff, [11] = 0xff};
	int v4 = !memcmp(gid, v4mapped, sizeof v4mapped);
	const uint8_t *addr = v4 ? gid + 12 : gid;
	size_t len = v4 ? 4 : 16;
	struct ifaddrs *ifs;
	name[0] = 0;
	if (getifaddrs(&ifs))
		return;
	for (int exact = 1; exact >= 0 && !name[0]; exact--) {
		for (struct ifaddrs *i = ifs; i && !name[0]; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != (v4 ? AF_INET : AF_INET6) || (!exact && !i->ifa_netmask))
				continue;
			const uint8_t *a = bytes(i->ifa_addr), *m = exact ? NULL : bytes(i->ifa_netmask);
			size_t k = 0;
			while (k < len && (a[k] & (m ? m[k] : 0xff)) == (addr[k] & (m ? m[k] : 0xff)))
				k++;
			if (k == len)
				snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
		}
	}
	freeifaddrs(ifs);
}

/* init_values takes the device's attributes and GID table from the core
 * (loading it), as ibv_query_device, ibv_query_port and ibv_query_gid do. */
static void init_values(void)
{
	int (*query_device)(struct goroce_device_attr *) = goroce_core_symbol("query_device");
	int (*query_port)(int, struct goroce_port_attr *) = goroce_core_symbol("query_port");
	int (*query_gid)(int, int, uint8_t *) = goroce_core_symbol("query_gid");
	if (!query_device || !query_port || !query_gid) {
		view.err = ENODEV;
		return;
	}
	if ((view.err = query_device(&view.dev)) || (view.err = query_port(1, &view.port)))
		return;
	unsigned n = view.port.gid_tbl_len > 0 ? (unsigned)view.port.gid_tbl_len : 0;
	view.gid = calloc(n, sizeof *view.gid);
	view.full = calloc(n, sizeof *view.full);
	view.ndev = calloc(n, sizeof *view.ndev);
	if (n && (!view.gid || !view.full || !view.ndev)) {
		view.err = ENOMEM;
		return;
	}
	for (; view.ngid < n; view.ngid++) {
		int ret = query_gid(1, (int)view.ngid, view.gid[view.ngid]);
		if (ret == ENODATA)
			continue; /* an empty entry */
		if (ret)
			break; /* the table ends here */
		view.full[view.ngid] = 1;
		netdev(view.gid[view.ngid], view.ndev[view.ngid]);
	}
}

/* values returns the device's attributes, or NULL if the core has none. */
static const __typeof__(view) *values(void)
{
	pthread_once(&view.once, init_values);
	return view.err ? NULL : &view;
}

static unsigned gid_count(void) { return values() ? view.ngid : 0; }

static unsigned pkey_count(void) { return values() && view.port.pkey_tbl_len > 0 ? view.port.pkey_tbl_len : 0; }

/* ---- the files, formatted as the kernel's drivers/infiniband/core/sysfs.c ---- */

/* SHOW defines show_NAME, which formats the device's values; it fails
 * with EIO when the core has none. */
#define SHOW(name, ...)                                             \
	static int show_##name(char *b, size_t n, unsigned i)       \
	{                                                           \
		(void)i;                                            \
		return values() ? snprintf(b, n, __VA_ARGS__) : -EIO; \
	}
#define GUID(g) \
	(unsigned)((g) >> 48), (unsigned)((g) >> 32) & 0xffff, (unsigned)((g) >> 16) & 0xffff, (unsigned)(g) & 0xffff
SHOW(guid, "%04x:%04x:%04x:%04x\n", GUID(view.dev.node_guid))
SHOW(sys_image_guid, "%04x:%04x:%04x:%04x\n", GUID(view.dev.sys_image_guid))
SHOW(fw_ver, "%s\n", view.dev.fw_ver)
SHOW(node_desc, "%s\n", view.dev.node_desc)
SHOW(lid, "0x%x\n", view.port.lid)
SHOW(sm_lid, "0x%x\n", view.port.sm_lid)
SHOW(sm_sl, "%u\n", view.port.sm_sl)
SHOW(lmc, "%u\n", view.port.lmc)
SHOW(cap_mask, "0x%08x\n", view.port.port_cap_flags)
SHOW(link_layer, "%s\n", view.port.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
			: view.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "Unknown")
#undef GUID

static int show_node_type(char *b, size_t n, unsigned i)
{
	static const char *const type[] = {[IBV_NODE_CA] = "CA", [IBV_NODE_SWITCH] = "switch",
					   [IBV_NODE_ROUTER] = "router", [IBV_NODE_RNIC] = "RNIC",
					   [IBV_NODE_USNIC] = "usNIC", [IBV_NODE_USNIC_UDP] = "usNIC UDP",
					   [IBV_NODE_UNSPECIFIED] = "unspecified"};
	int t = names.node_type;
	(void)i;
	return snprintf(b, n, "%d: %s\n", t, t > 0 && t < (int)(sizeof type / sizeof *type) ? type[t] : "<unknown>");
}

/* parent: rxe's attribute, the netdev it sits on (GID 0's). */
static int show_parent(char *b, size_t n, unsigned i)
{
	(void)i;
	if (!values())
		return -EIO;
	return view.ngid && view.ndev[0][0] ? snprintf(b, n, "%s\n", view.ndev[0]) : -EINVAL;
}

static int show_state(char *b, size_t n, unsigned i)
{
	static const char *const state[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
	(void)i;
	if (!values())
		return -EIO;
	int s = view.port.state;
	return snprintf(b, n, "%d: %s\n", s, s >= 0 && s < (int)(sizeof state / sizeof *state) ? state[s] : "UNKNOWN");
}

static int show_phys_state(char *b, size_t n, unsigned i)
{
	static const char *const phys[] = {"<unknown>", "Sleep",  "Polling",           "Disabled",
					   "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test"};
	(void)i;
	if (!values())
		return -EIO;
	unsigned s = view.port.phys_state;
	return snprintf(b, n, "%u: %s\n", s, phys[s < sizeof phys / sizeof *phys ? s : 0]);
}

/* rate: the lanes times a lane's rate, as the kernel's rate_show words it
 * (2.5 Gb/sec (1X SDR)). */
static int show_rate(char *b, size_t n, unsigned i)
{
	static const struct {
		int speed, mbps;
		const char *name;
	} speeds[] = {{2, 5000, " DDR"},   {4, 10000, " QDR"},  {8, 10000, " FDR10"}, {16, 14062, " FDR"},
		      {32, 25781, " EDR"}, {64, 53125, " HDR"}, {128, 106250, " NDR"}};
	static const int lanes[] = {[1] = 1, [2] = 4, [4] = 8, [8] = 12, [16] = 2}; /* enum ib_port_width */
	int rate = 2500, width;
	const char *name = " SDR"; /* the kernel's default for speeds it does not know */
	(void)i;
	if (!values())
		return -EIO;
	for (size_t k = 0; k < sizeof speeds / sizeof *speeds; k++)
		if (speeds[k].speed == view.port.active_speed)
			rate = speeds[k].mbps, name = speeds[k].name;
	width = view.port.active_width < sizeof lanes / sizeof *lanes ? lanes[view.port.active_width] : 0;
	if (!width)
		return -EINVAL;
	rate *= width;
	return snprintf(b, n, "%d%s Gb/sec (%dX%s)\n", rate / 1000, rate % 1000 ? ".5" : "", width, name);
}

/* An empty GID entry reads as the zero GID, as in the kernel. */
static int show_gid(char *b, size_t n, unsigned i)
{
	if (!values())
		return -EIO;
	const uint8_t *g = view.gid[i];
	int len = 0;
	for (int k = 0; k < 16; k += 2)
		len += snprintf(b + len, n - len, "%02x%02x%s", g[k], g[k + 1], k < 14 ? ":" : "\n");
	return len;
}

/* The attributes of an empty GID entry fail to read with EINVAL, as in
 * the kernel. goroce0 speaks RoCE v2 only: every GID is of that type. */
static int show_gid_type(char *b, size_t n, unsigned i)
{
	if (!values())
		return -EIO;
	return view.full[i] ? snprintf(b, n, "RoCE v2\n") : -EINVAL;
}

static int show_gid_ndev(char *b, size_t n, unsigned i)
{
	if (!values())
		return -EIO;
	return view.full[i] && view.ndev[i][0] ? snprintf(b, n, "%s\n", view.ndev[i]) : -EINVAL;
}

/* The files that need only the names, not the core. */
#define NAMED(name, ...)                                      \
	static int show_##name(char *b, size_t n, unsigned i) \
	{                                                     \
		(void)i;                                      \
		return snprintf(b, n, __VA_ARGS__);           \
	}
NAMED(ib_uevent, "NAME=%s\n", names.name)
NAMED(pkey, "0x%04x\n", DEFAULT_PKEY)
NAMED(verbs_abi, "%d\n", IB_USER_VERBS_ABI_VERSION)
NAMED(uverbs_abi, "%d\n", UVERBS_PROVIDER_ABI)
NAMED(uverbs_dev, "%d:%u\n", UVERBS_MAJOR, names.minor)
NAMED(ibdev, "%s\n", names.name)
NAMED(uverbs_uevent, "MAJOR=%d\nMINOR=%u\nDEVNAME=infiniband/%s\nDEVMODE=0666\n", UVERBS_MAJOR, names.minor,
      names.uverbs)

/* ---- lookup ---- */

/* lookup finds the node at the clean absolute path p, and for a table's
 * entry its index. */
static const struct node *lookup(const char *p, unsigned *index)
{
	pthread_once(&names.once, init_names);
	*index = 0;
	for (size_t k = 0; k < NNODES; k++) {
		const struct node *n = &tree[k];
		size_t len = strlen(n->path);
		if (!n->count) {
			if (!strcmp(p, n->path))
				return n;
			continue;
		}
		/* A table's entry: the path up to "#", then a number below
		 * count() written as the kernel writes it. */
		const char *d = p + len - 1;
		if (strncmp(p, n->path, len - 1) || !*d || (d[0] == '0' && d[1]) || strspn(d, "0123456789") != strlen(d) ||
		    strlen(d) > 9)
			continue;
		unsigned i = (unsigned)atoi(d);
		if (i < n->count()) {
			*index = i;
			return n;
		}
	}
	return NULL;
}

/* parent_len is the length of p's directory part ("/a/b" for "/a/b/c"). */
static size_t parent_len(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? (size_t)(s - p) : 0;
}

/* in_dir says whether node n is in the tree's directory dir (of length
 * len). */
static int in_dir(const struct node *n, const char *dir, size_t len)
{
	return parent_len(n->path) == len && !strncmp(n->path, dir, len);
}

/* child finds the k-th entry of the tree's directory dir: its node, and
 * its name and index. */
static const struct node *child(const char *dir, long k, char name[NAME_MAX + 1], unsigned *index)
{
	size_t len = strlen(dir);
	for (size_t j = 0; j < NNODES; j++) {
		const struct node *n = &tree[j];
		if (!in_dir(n, dir, len))
			continue;
		long c = n->count ? (long)n->count() : 1;
		if (k >= c) {
			k -= c;
			continue;
		}
		*index = (unsigned)k;
		if (n->count)
			snprintf(name, NAME_MAX + 1, "%ld", k);
		else
			snprintf(name, NAME_MAX + 1, "%s", n->path + len + 1);
		return n;
	}
	return NULL;
}

/* ---- descriptors and the current directory ---- */

/* A descriptor the file handed out for a directory or the uverbs device. */
struct vfd {
	int fd;
	dev_t dev; /* the descriptor's inode, to notice it closed behind close()'s back */
	ino_t ino;
	const struct node *node;
	unsigned index;
	char *path;
};

static struct {
	pthread_mutex_t mu;
	struct vfd *v;
	int n, cap; /* n is read without mu to skip close()'s search when 0 */
} fds = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The current directory when a chdir() went into the tree (NULL: the
 * kernel's). Programs the process runs start in the kernel's. */
static struct {
	pthread_mutex_t mu;
	char *path; /* read without mu to test for NULL */
} cwd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void lock_all(void)
{
	pthread_mutex_lock(&fds.mu);
	pthread_mutex_lock(&cwd.mu);
}

static void unlock_all(void)
{
	pthread_mutex_unlock(&cwd.mu);
	pthread_mutex_unlock(&fds.mu);
}

__attribute__((constructor)) static void init_fork(void) { pthread_atfork(lock_all, unlock_all, unlock_all); }

/* tracked finds the descriptor fd among the file's and copies it out,
 * with its path in path (PATH_MAX). */
static int tracked(int fd, struct vfd *out, char *path)
{
	struct stat st;
	int found = 0;
	if (!__atomic_load_n(&fds.n, __ATOMIC_ACQUIRE) || fd < 0)
		return 0;
	pthread_mutex_lock(&fds.mu);
	for (int k = 0; k < fds.n; k++) {
		if (fds.v[k].fd != fd)
			continue;
		*out = fds.v[k];
		if (path)
			snprintf(path, PATH_MAX, "%s", out->path);
		found = 1;
		break;
	}
	pthread_mutex_unlock(&fds.mu);
	if (found && (NEXT(fstat)(fd, &st) || st.st_dev != out->dev || st.st_ino != out->ino))
		found = 0; /* closed and its number reused */
	return found;
}

static void untrack(int fd)
{
	if (!__atomic_load_n(&fds.n, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fds.mu);
	for (int k = 0; k < fds.n; k++) {
		if (fds.v[k].fd != fd)
			continue;
		free(fds.v[k].path);
		fds.v[k] = fds.v[fds.n - 1];
		__atomic_store_n(&fds.n, fds.n - 1, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_unlock(&fds.mu);
}

/* track adds fd, open on the node at path, to the file's descriptors. */
static int track(int fd, const struct node *n, unsigned index, const char *path)
{
	struct stat st;
	char *p = strdup(path);
	if (!p || NEXT(fstat)(fd, &st)) {
		free(p);
		return ENOMEM;
	}
	untrack(fd); /* an entry of the same number, closed behind close()'s back */
	pthread_mutex_lock(&fds.mu);
	if (fds.n == fds.cap) {
		int cap = fds.cap ? 2 * fds.cap : 8;
		struct vfd *v = realloc(fds.v, cap * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&fds.mu);
			free(p);
			return ENOMEM;
		}
		fds.v = v, fds.cap = cap;
	}
	fds.v[fds.n] = (struct vfd){fd, st.st_dev, st.st_ino, n, index, p};
	__atomic_store_n(&fds.n, fds.n + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fds.mu);
	return 0;
}

/* inert returns a descriptor for the node at path on which read, write
 * and ioctl fail (an epoll instance); with keep, the file tracks it. */
static int inert(const struct node *n, unsigned index, const char *path, int cloexec, int keep)
{
	int fd = epoll_create1(cloexec ? EPOLL_CLOEXEC : 0), err;
	if (fd < 0 || !keep || !(err = track(fd, n, index, path)))
		return fd;
	NEXT(close)(fd);
	errno = err;
	return -1;
}

/* ---- resolving a path ---- */

/* What a path names. */
struct target {
	const struct node *node; /* the tree's node, or NULL: the host's */
	unsigned index;
	int in_tree_dir;      /* not in the tree, but its directory is (creating it: EACCES) */
	char path[PATH_MAX];  /* the node's clean path; for the host's, the path to hand libc */
};

/* candidate says cheaply whether (dirfd, path) may name a node: every path
 * into the tree from outside it has "infiniband" in it. */
static int candidate(int dirfd, const char *path)
{
	if (!path || !*path)
		return 0; /* with AT_EMPTY_PATH, the descriptor: the caller's to check */
	if (strstr(path, "infiniband"))
		return 1;
	if (path[0] == '/')
		return 0;
	if (dirfd == AT_FDCWD)
		return __atomic_load_n(&cwd.path, __ATOMIC_ACQUIRE) != NULL;
	return __atomic_load_n(&fds.n, __ATOMIC_ACQUIRE) > 0;
}

/* base puts in out the directory a relative path starts from: the file's
 * current directory, a directory descriptor of the tree's, the kernel's
 * current directory or the directory a descriptor of the host's is open
 * on; virtual is set for the first two. */
static int base(int dirfd, char *out, int *virtual)
{
	struct vfd v;
	*virtual = 0;
	if (dirfd == AT_FDCWD) {
		pthread_mutex_lock(&cwd.mu);
		if (cwd.path)
			snprintf(out, PATH_MAX, "%s", cwd.path), *virtual = 1;
		pthread_mutex_unlock(&cwd.mu);
		return *virtual || NEXT(getcwd)(out, PATH_MAX) ? 0 : errno;
	}
	if (tracked(dirfd, &v, out)) {
		*virtual = 1;
		return v.node->kind == DIR_ ? 0 : ENOTDIR;
	}
	char proc[32];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
	ssize_t n = NEXT(readlink)(proc, out, PATH_MAX - 1);
	if (n < 0)
		return EBADF;
	out[n] = 0;
	return 0;
}

enum { FOLLOW = 1, HOST_DIRS = 2 };

/* resolve finds what path, relative to dirfd as the *at calls take it,
 * names: a node of the tree, walking its symbolic links as the kernel does
 * (the last component's only with FOLLOW or a slash after it), HOSTDIRs
 * only with HOST_DIRS; or the host's path, which is path itself unless it
 * was relative to a directory of the tree or went through one (then the
 * clean absolute path). It returns 0, or an errno value for a path the
 * tree refuses (ENOTDIR through a file, ELOOP, ENAMETOOLONG). */
static int resolve(int dirfd, const char *path, int flags, struct target *t)
{
	char work[PATH_MAX], *cur = t->path, *rest, *comp;
	int rewrite = 0, links = 0, err;
	size_t len;
	if (path[0] == '/') {
		snprintf(work, sizeof work, "%s", path);
	} else {
		if ((err = base(dirfd, work, &rewrite)))
			return err;
		len = strlen(work);
		if (snprintf(work + len, sizeof work - len, "/%s", path) >= (int)(sizeof work - len))
			return ENAMETOOLONG;
	}
restart:
	cur[0] = 0, len = 0;
	for (rest = work; (comp = strsep(&rest, "/"));) {
		if (!*comp || !strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) {
			cur[len = parent_len(cur)] = 0;
			continue;
		}
		if (len + 1 + strlen(comp) >= PATH_MAX)
			return ENAMETOOLONG;
		len += (size_t)sprintf(cur + len, "/%s", comp);
		int slash = rest != NULL; /* more components, or a trailing slash */
		const struct node *n = lookup(cur, &t->index);
		if (!n)
			continue; /* the host's */
		rewrite |= n->kind != HOSTDIR; /* the kernel cannot walk the rest */
		if (n->kind == LINK && (slash || (flags & FOLLOW))) {
			char next[PATH_MAX];
			if (++links > 40)
				return ELOOP;
			cur[parent_len(cur)] = 0;
			if (snprintf(next, sizeof next, "%s/%s/%s", cur, n->link, rest ? rest : "") >= (int)sizeof next)
				return ENAMETOOLONG;
			memcpy(work, next, sizeof work);
			rewrite = 1;
			goto restart;
		}
		if ((n->kind == FILE_ || n->kind == CHR) && slash)
			return ENOTDIR;
	}
	if (!cur[0])
		strcpy(cur, "/");
	t->node = lookup(cur, &t->index);
	if (!t->node) {
		/* The host's; in a directory of the tree, one it lacks. */
		unsigned i;
		size_t p = parent_len(cur);
		cur[p] = 0;
		const struct node *dir = lookup(cur, &i);
		cur[p] = '/';
		t->in_tree_dir = dir && dir->kind == DIR_;
	} else if (t->node->kind == HOSTDIR && !(flags & HOST_DIRS)) {
		t->node = NULL;
	}
	if (!t->node && !rewrite)
		snprintf(cur, PATH_MAX, "%s", path);
	return 0;
}

/* route decides where a call on (dirfd, *path) goes: 1 for the tree's node
 * t->node; 0 for libc, with *path the path to hand it; -1 with errno set
 * when the tree refuses the path. */
static int route(int dirfd, const char **path, int flags, struct target *t)
{
	t->node = NULL, t->in_tree_dir = 0;
	if (!candidate(dirfd, *path) && !(flags & HOST_DIRS))
		return 0;
	int err = resolve(dirfd, *path, flags, t);
	if (err) {
		errno = err;
		return -1;
	}
	if (t->node)
		return 1;
	*path = t->path;
	return 0;
}

/* ---- what the tree answers ---- */

static ino_t inode(const char *path)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */
	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 1099511628211ull;
	return h | 1;
}

static mode_t mode_of(const struct node *n)
{
	static const mode_t kinds[] = {[HOSTDIR] = S_IFDIR | 0755, [DIR_] = S_IFDIR | 0755, [FILE_] = S_IFREG | 0444,
				       [LINK] = S_IFLNK | 0777, [CHR] = S_IFCHR | 0666};
	return n->mode ? (kinds[n->kind] & S_IFMT) | n->mode : kinds[n->kind];
}

static void fill_stat(const struct target *t, struct stat *st)
{
	const struct node *n = t->node;
	size_t len = strlen(t->path);
	int dirs = 0;
	memset(st, 0, sizeof *st);
	st->st_dev = strncmp(t->path, "/dev/", 5) ? names.sys : names.dev;
	st->st_ino = inode(t->path);
	st->st_mode = mode_of(n);
	for (size_t k = 0; n->kind == DIR_ && k < NNODES; k++)
		dirs += tree[k].kind == DIR_ && in_dir(&tree[k], t->path, len);
	st->st_nlink = n->kind == DIR_ ? 2 + dirs : 1;
	st->st_rdev = n->kind == CHR ? makedev(UVERBS_MAJOR, names.minor) : 0;
	st->st_size = n->kind == FILE_ ? 4096 : 0;
	st->st_blksize = 4096;
	st->st_atim = st->st_mtim = st->st_ctim = names.at;
}

static void fill_statx(const struct target *t, struct statx *sx)
{
	struct stat st;
	fill_stat(t, &st);
	memset(sx, 0, sizeof *sx);
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_blksize = st.st_blksize;
	sx->stx_nlink = st.st_nlink;
	sx->stx_mode = st.st_mode;
	sx->stx_ino = st.st_ino;
	sx->stx_size = st.st_size;
	sx->stx_atime = sx->stx_ctime = sx->stx_mtime = (struct statx_timestamp){names.at.tv_sec, names.at.tv_nsec};
	sx->stx_rdev_major = major(st.st_rdev), sx->stx_rdev_minor = minor(st.st_rdev);
	sx->stx_dev_major = major(st.st_dev), sx->stx_dev_minor = minor(st.st_dev);
}

/* open_node opens the node as open(2) with flags would. */
static int open_node(const struct target *t, int flags)
{
	const struct node *n = t->node;
	int writing = (flags & O_ACCMODE) != O_RDONLY, cloexec = flags & O_CLOEXEC;
	if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
		errno = EEXIST;
		return -1;
	}
	switch (n->kind) {
	case LINK: /* O_NOFOLLOW */
		errno = ELOOP;
		return -1;
	case DIR_:
		if (writing || (flags & O_CREAT)) {
			errno = EISDIR;
			return -1;
		}
		return inert(n, t->index, t->path, cloexec, 1);
	case CHR:
		if (flags & O_DIRECTORY) {
			errno = ENOTDIR;
			return -1;
		}
		return inert(n, t->index, t->path, cloexec, 1);
	default:
		break;
	}
	if (flags & O_DIRECTORY) {
		errno = ENOTDIR;
		return -1;
	}
	if (writing) { /* sysfs: the attribute has no store (kernfs_fop_open) */
		errno = EACCES;
		return -1;
	}
	char buf[4096];
	int len = n->show(buf, sizeof buf, t->index);
	if (len == -EINVAL)
		return inert(n, t->index, t->path, cloexec, 0); /* open succeeds, read fails */
	if (len < 0) {
		errno = -len;
		return -1;
	}
	int fd = memfd_create("goroce-sysfs", MFD_ALLOW_SEALING | (cloexec ? MFD_CLOEXEC : 0));
	if (fd < 0)
		return -1;
	char proc[32];
	if (write(fd, buf, (size_t)len) != len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) || lseek(fd, 0, SEEK_SET)) {
		int e = errno;
		NEXT(close)(fd);
		errno = e;
		return -1;
	}
	/* Read-only, as sysfs opened it: a write fails with EBADF. */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int ro = NEXT(open)(proc, O_RDONLY | cloexec);
	if (ro < 0)
		return fd;
	NEXT(close)(fd);
	return ro;
}

/* check_access answers access(2) for the node: the owner is root, and root
 * may read and write anything (the kernel refuses the write at open). */
static int check_access(const struct target *t, int mode, int effective)
{
	mode_t m = mode_of(t->node);
	uid_t uid = effective ? geteuid() : getuid();
	if (mode == F_OK)
		return 0;
	if (uid == 0) {
		if ((mode & X_OK) && !(m & 0111)) {
			errno = EACCES;
			return -1;
		}
		return 0;
	}
	if (((mode & R_OK) && !(m & S_IROTH)) || ((mode & W_OK) && !(m & S_IWOTH)) || ((mode & X_OK) && !(m & S_IXOTH))) {
		errno = EACCES;
		return -1;
	}
	return 0;
}

/* ---- directory streams ---- */

/* A directory stream of the tree's: the host's entries of the same
 * directory (when the host has one) and then the tree's. */
struct vdir {
	int minus_one; /* where glibc's DIR holds its descriptor, never -1 there */
	uint32_t magic;
	pthread_mutex_t mu;
	DIR *host;
	int fd, own;    /* dirfd(): made on first use; own: closedir closes it */
	long pos, next; /* entries handed out; the next of ".", "..", the tree's */
	struct dirent64 ent;
	char path[PATH_MAX];
};
#define VDIR_MAGIC 0x676f726fu

static struct vdir *vdir_of(void *d)
{
	struct vdir *v = d;
	return v && v->minus_one == -1 && v->magic == VDIR_MAGIC ? v : NULL;
}

static struct vdir *vdir_open(const struct target *t, DIR *host, int fd)
{
	struct vdir *v = calloc(1, sizeof *v);
	if (!v) {
		errno = ENOMEM;
		return NULL;
	}
	v->minus_one = -1, v->magic = VDIR_MAGIC, v->fd = fd, v->own = fd >= 0;
	pthread_mutex_init(&v->mu, NULL);
	snprintf(v->path, sizeof v->path, "%s", t->path);
	v->host = host;
	return v;
}

/* set_ent fills e for the entry name of the tree's directory dir, of node
 * n (NULL: . or ..). */
static void set_ent(struct dirent64 *e, const char *dir, const char *name, const struct node *n)
{
	static const unsigned char types[] = {[HOSTDIR] = DT_DIR, [DIR_] = DT_DIR, [FILE_] = DT_REG, [LINK] = DT_LNK,
					      [CHR] = DT_CHR};
	char p[PATH_MAX + NAME_MAX + 2];
	if (n)
		snprintf(p, sizeof p, "%s/%s", dir, name);
	else /* . or .. */
		snprintf(p, sizeof p, "%.*s", (int)(name[1] ? parent_len(dir) : strlen(dir)), dir);
	e->d_ino = inode(p);
	e->d_type = n ? types[n->kind] : DT_DIR;
	e->d_reclen = sizeof *e;
	snprintf(e->d_name, sizeof e->d_name, "%s", name);
}

/* in_tree says whether the tree has name in the directory v. */
static int in_tree(const struct vdir *v, const char *name)
{
	char p[PATH_MAX + NAME_MAX + 2];
	unsigned i;
	snprintf(p, sizeof p, "%s/%s", v->path, name);
	return lookup(p, &i) != NULL;
}

static struct dirent64 *vdir_read(struct vdir *v)
{
	struct dirent64 *e;
	while (v->host && (e = NEXT(readdir64)(v->host))) {
		if (!in_tree(v, e->d_name)) {
			v->pos++;
			return e;
		}
	}
	char name[NAME_MAX + 1];
	unsigned i;
	const struct node *n = NULL;
	if (v->next >= 2 && !(n = child(v->path, v->next - 2, name, &i)))
		return NULL;
	set_ent(&v->ent, v->path, n ? name : v->next ? ".." : ".", n); /* ".", "..", then the tree's */
	v->next++;
	v->ent.d_off = ++v->pos;
	return &v->ent;
}

static void vdir_rewind(struct vdir *v)
{
	if (v->host)
		NEXT(rewinddir)(v->host);
	v->pos = 0;
	v->next = v->host ? 2 : 0; /* the host's stream has . and .. */
}

/* open_dir opens a stream on the tree's directory, or on a host's
 * directory holding one of the tree's, with the host's entries. */
static DIR *open_dir(const struct target *t)
{
	DIR *host = NEXT(opendir)(t->path);
	struct vdir *v = vdir_open(t, host, -1);
	if (!v) {
		if (host)
			NEXT(closedir)(host);
		return NULL;
	}
	vdir_rewind(v);
	return (DIR *)v;
}

/* ---- the interposed calls ---- */

/* A call on a path that route() sends to the tree (1), refuses (-1), or
 * hands to libc with p. */
#define ROUTE(dirfd, p, flags, t, on_node)                  \
	do {                                                \
		int r_ = route(dirfd, &p, flags, t);        \
		if (r_ < 0)                                 \
			return -1;                          \
		if (r_ > 0)                                 \
			on_node;                            \
	} while (0)

/* The same for the stat family: fill answers from the tree. */
#define ROUTE_STAT(dirfd, p, flags, t, fill)                     \
	do {                                                     \
		int r_ = stat_route(dirfd, &p, flags, t);        \
		if (r_ < 0)                                      \
			return -1;                               \
		if (r_ > 0) {                                    \
			fill;                                    \
			return 0;                                \
		}                                                \
	} while (0)

static int do_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	struct target t;
	ROUTE(dirfd, path, (flags & O_NOFOLLOW) ? 0 : FOLLOW, &t, return open_node(&t, flags));
	if (t.in_tree_dir && (flags & O_CREAT)) {
		errno = EACCES; /* sysfs has no files to create */
		return -1;
	}
	return NEXT(openat)(dirfd, path, flags, mode);
}

/* open's third argument, there with O_CREAT or O_TMPFILE only. */
#define MODE_ARG(flags)                                                        \
	({                                                                     \
		mode_t m_ = 0;                                                 \
		if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
			va_list ap;                                            \
			va_start(ap, flags);                                   \
			m_ = va_arg(ap, mode_t);                               \
			va_end(ap);                                            \
		}                                                              \
		m_;                                                            \
	})

/* On x86_64 the *64 names are the same functions (off_t is 64-bit). */
#define SAME(f) __attribute__((alias(#f)))

EXPORT int open(const char *path, int flags, ...) { return do_openat(AT_FDCWD, path, flags, MODE_ARG(flags)); }
EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	return do_openat(dirfd, path, flags, MODE_ARG(flags));
}
EXPORT int open64(const char *path, int flags, ...) SAME(open);
EXPORT int openat64(int dirfd, const char *path, int flags, ...) SAME(openat);

/* _FORTIFY_SOURCE's open: never with O_CREAT. */
EXPORT int __open_2(const char *path, int flags) { return do_openat(AT_FDCWD, path, flags, 0); }
EXPORT int __openat_2(int dirfd, const char *path, int flags) { return do_openat(dirfd, path, flags, 0); }
EXPORT int __open64_2(const char *path, int flags) SAME(__open_2);
EXPORT int __openat64_2(int dirfd, const char *path, int flags) SAME(__openat_2);

EXPORT int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
EXPORT int creat64(const char *path, mode_t mode) SAME(creat);

static FILE *do_fopen(const char *path, const char *mode, FILE *(*real)(const char *, const char *))
{
	struct target t;
	int r = route(AT_FDCWD, &path, FOLLOW, &t);
	if (r < 0)
		return NULL;
	if (!r && t.in_tree_dir && mode[0] != 'r') {
		errno = EACCES; /* sysfs has no files to create */
		return NULL;
	}
	if (!r)
		return real(path, mode);
	int flags = strchr(mode, '+') ? O_RDWR : mode[0] == 'r' ? O_RDONLY : O_WRONLY;
	flags |= mode[0] != 'r' ? O_CREAT : 0;
	flags |= strchr(mode, 'e') ? O_CLOEXEC : 0;
	flags |= strchr(mode, 'x') ? O_EXCL : 0;
	int fd = open_node(&t, flags);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, mode);
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

EXPORT FILE *fopen(const char *path, const char *mode) { return do_fopen(path, mode, NEXT(fopen)); }
EXPORT FILE *fopen64(const char *path, const char *mode) { return do_fopen(path, mode, NEXT(fopen64)); }

EXPORT int close(int fd)
{
	untrack(fd);
	return NEXT(close)(fd);
}

/* stat_route routes a call of the stat family: fstatat's arguments, where
 * an empty path with AT_EMPTY_PATH names dirfd itself. */
static int stat_route(int dirfd, const char **path, int flags, struct target *t)
{
	struct vfd v;
	if ((flags & AT_EMPTY_PATH) && *path && !**path && tracked(dirfd, &v, t->path)) {
		t->node = v.node, t->index = v.index;
		return 1;
	}
	return route(dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) ? 0 : FOLLOW, t);
}

static int do_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	struct target t;
	ROUTE_STAT(dirfd, path, flags, &t, fill_stat(&t, st));
	return NEXT(fstatat)(dirfd, path, st, flags);
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return do_fstatat(dirfd, path, st, flags);
}
EXPORT int stat(const char *path, struct stat *st) { return do_fstatat(AT_FDCWD, path, st, 0); }
EXPORT int lstat(const char *path, struct stat *st) { return do_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW); }
EXPORT int fstat(int fd, struct stat *st) { return do_fstatat(fd, "", st, AT_EMPTY_PATH); }
EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) SAME(fstatat);
EXPORT int stat64(const char *path, struct stat64 *st) SAME(stat);
EXPORT int lstat64(const char *path, struct stat64 *st) SAME(lstat);
EXPORT int fstat64(int fd, struct stat64 *st) SAME(fstat);

/* glibc's names before 2.33; ver is _STAT_VER, the kernel's struct stat. */
EXPORT int __xstat(int ver, const char *path, struct stat *st) { return (void)ver, stat(path, st); }
EXPORT int __lxstat(int ver, const char *path, struct stat *st) { return (void)ver, lstat(path, st); }
EXPORT int __fxstat(int ver, int fd, struct stat *st) { return (void)ver, fstat(fd, st); }
EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	return (void)ver, fstatat(dirfd, path, st, flags);
}
EXPORT int __xstat64(int ver, const char *path, struct stat64 *st) SAME(__xstat);
EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st) SAME(__lxstat);
EXPORT int __fxstat64(int ver, int fd, struct stat64 *st) SAME(__fxstat);
EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags) SAME(__fxstatat);

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *sx)
{
	struct target t;
	ROUTE_STAT(dirfd, path, flags, &t, fill_statx(&t, sx));
	return NEXT(statx)(dirfd, path, flags, mask, sx);
}

EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	struct target t;
	ROUTE(dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) ? 0 : FOLLOW, &t,
	      return check_access(&t, mode, flags & AT_EACCESS));
	return NEXT(faccessat)(dirfd, path, mode, flags);
}

EXPORT int access(const char *path, int mode) { return faccessat(AT_FDCWD, path, mode, 0); }
EXPORT int euidaccess(const char *path, int mode) { return faccessat(AT_FDCWD, path, mode, AT_EACCESS); }
EXPORT int eaccess(const char *path, int mode) { return faccessat(AT_FDCWD, path, mode, AT_EACCESS); }

EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	struct target t;
	ROUTE(dirfd, path, 0, &t, {
		if (t.node->kind != LINK) {
			errno = EINVAL;
			return -1;
		}
		size_t n = strlen(t.node->link);
		n = n < len ? n : len;
		memcpy(buf, t.node->link, n);
		return (ssize_t)n;
	});
	return NEXT(readlinkat)(dirfd, path, buf, len);
}

EXPORT ssize_t readlink(const char *path, char *buf, size_t len) { return readlinkat(AT_FDCWD, path, buf, len); }

EXPORT char *realpath(const char *path, char *resolved)
{
	struct target t;
	int r = route(AT_FDCWD, &path, FOLLOW, &t);
	if (r < 0)
		return NULL;
	if (!r)
		return NEXT(realpath)(path, resolved);
	if (!resolved)
		return strdup(t.path);
	return strcpy(resolved, t.path);
}

EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	if (resolvedlen < PATH_MAX) {
		fprintf(stderr, "*** buffer overflow detected ***: terminated\n");
		abort();
	}
	return realpath(path, resolved);
}

EXPORT char *canonicalize_file_name(const char *path) { return realpath(path, NULL); }

/* set_cwd makes path (NULL: the kernel's) the current directory. */
static int set_cwd(const char *path)
{
	char *p = path ? strdup(path) : NULL;
	if (path && !p) {
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_lock(&cwd.mu);
	free(cwd.path);
	__atomic_store_n(&cwd.path, p, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cwd.mu);
	return 0;
}

EXPORT int chdir(const char *path)
{
	struct target t;
	ROUTE(AT_FDCWD, path, FOLLOW, &t, {
		if (t.node->kind != DIR_) {
			errno = ENOTDIR;
			return -1;
		}
		return set_cwd(t.path);
	});
	return NEXT(chdir)(path) ? -1 : set_cwd(NULL);
}

EXPORT int fchdir(int fd)
{
	struct vfd v;
	char p[PATH_MAX];
	if (!tracked(fd, &v, p))
		return NEXT(fchdir)(fd) ? -1 : set_cwd(NULL);
	if (v.node->kind != DIR_) {
		errno = ENOTDIR;
		return -1;
	}
	return set_cwd(p);
}

EXPORT char *getcwd(char *buf, size_t size)
{
	if (!__atomic_load_n(&cwd.path, __ATOMIC_ACQUIRE))
		return NEXT(getcwd)(buf, size);
	char *ret = NULL;
	pthread_mutex_lock(&cwd.mu);
	if (!cwd.path) {
		pthread_mutex_unlock(&cwd.mu);
		return NEXT(getcwd)(buf, size);
	}
	size_t n = strlen(cwd.path) + 1;
	if (!buf && (ret = malloc(size > n ? size : n)))
		memcpy(ret, cwd.path, n);
	else if (!buf)
		errno = ENOMEM;
	else if (size < n)
		errno = size ? ERANGE : EINVAL;
	else
		ret = memcpy(buf, cwd.path, n);
	pthread_mutex_unlock(&cwd.mu);
	return ret;
}

EXPORT char *__getcwd_chk(char *buf, size_t size, size_t buflen)
{
	if (size > buflen) {
		fprintf(stderr, "*** buffer overflow detected ***: terminated\n");
		abort();
	}
	return getcwd(buf, size);
}

EXPORT char *get_current_dir_name(void)
{
	if (!__atomic_load_n(&cwd.path, __ATOMIC_ACQUIRE))
		return NEXT(get_current_dir_name)();
	return getcwd(NULL, 0);
}

/* Extended attributes: sysfs has none to show (SELinux's label, which ls
 * asks for, is ENODATA there). */
static ssize_t do_getxattr(const char *path, const char *name, void *value, size_t size, int follow)
{
	struct target t;
	ROUTE(AT_FDCWD, path, follow, &t, {
		errno = ENODATA;
		return -1;
	});
	return follow ? NEXT(getxattr)(path, name, value, size) : NEXT(lgetxattr)(path, name, value, size);
}

EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t size)
{
	return do_getxattr(path, name, value, size, FOLLOW);
}

EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size)
{
	return do_getxattr(path, name, value, size, 0);
}

static ssize_t do_listxattr(const char *path, char *list, size_t size, int follow)
{
	struct target t;
	ROUTE(AT_FDCWD, path, follow, &t, return 0);
	return follow ? NEXT(listxattr)(path, list, size) : NEXT(llistxattr)(path, list, size);
}

EXPORT ssize_t listxattr(const char *path, char *list, size_t size) { return do_listxattr(path, list, size, FOLLOW); }
EXPORT ssize_t llistxattr(const char *path, char *list, size_t size) { return do_listxattr(path, list, size, 0); }

EXPORT DIR *opendir(const char *path)
{
	struct target t;
	int r = route(AT_FDCWD, &path, FOLLOW | HOST_DIRS, &t);
	if (r < 0)
		return NULL;
	if (!r)
		return NEXT(opendir)(path);
	if (t.node->kind != DIR_ && t.node->kind != HOSTDIR) {
		errno = ENOTDIR;
		return NULL;
	}
	return open_dir(&t);
}

/* hostdir finds the tree's HOSTDIR a descriptor of the host's is open
 * on. */
static const struct node *hostdir(int fd)
{
	struct stat st;
	if (NEXT(fstat)(fd, &st) || !S_ISDIR(st.st_mode))
		return NULL;
	pthread_once(&names.once, init_names);
	for (size_t k = 0; k < NNODES; k++)
		if (tree[k].kind == HOSTDIR && tree[k].dev == st.st_dev && tree[k].ino == st.st_ino)
			return &tree[k];
	return NULL;
}

EXPORT DIR *fdopendir(int fd)
{
	struct vfd v;
	struct target t;
	if (tracked(fd, &v, t.path)) {
		if (v.node->kind != DIR_) {
			errno = ENOTDIR;
			return NULL;
		}
		t.node = v.node;
		struct vdir *d = vdir_open(&t, NEXT(opendir)(t.path), fd);
		if (d)
			vdir_rewind(d);
		return (DIR *)d;
	}
	const struct node *n = hostdir(fd);
	DIR *host = NEXT(fdopendir)(fd);
	if (!n || !host)
		return host;
	t.node = n;
	snprintf(t.path, sizeof t.path, "%s", n->path);
	struct vdir *d = vdir_open(&t, host, -1);
	if (!d)
		return host;
	vdir_rewind(d);
	return (DIR *)d;
}

static struct dirent64 *vdir_next(struct vdir *v)
{
	pthread_mutex_lock(&v->mu);
	struct dirent64 *e = vdir_read(v);
	pthread_mutex_unlock(&v->mu);
	return e;
}

EXPORT struct dirent *readdir(DIR *d)
{
	struct vdir *v = vdir_of(d);
	return v ? (struct dirent *)vdir_next(v) : NEXT(readdir)(d);
}

EXPORT struct dirent64 *readdir64(DIR *d)
{
	struct vdir *v = vdir_of(d);
	return v ? vdir_next(v) : NEXT(readdir64)(d);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
EXPORT int readdir_r(DIR *d, struct dirent *entry, struct dirent **result)
{
	struct vdir *v = vdir_of(d);
	if (!v)
		return NEXT(readdir_r)(d, entry, result);
	pthread_mutex_lock(&v->mu);
	struct dirent64 *e = vdir_read(v);
	if (e)
		memcpy(entry, e, sizeof *entry);
	*result = e ? entry : NULL;
	pthread_mutex_unlock(&v->mu);
	return 0;
}

EXPORT int readdir64_r(DIR *d, struct dirent64 *entry, struct dirent64 **result)
{
	struct vdir *v = vdir_of(d);
	if (!v)
		return NEXT(readdir64_r)(d, entry, result);
	return readdir_r(d, (struct dirent *)entry, (struct dirent **)result);
}
#pragma GCC diagnostic pop

EXPORT int closedir(DIR *d)
{
	struct vdir *v = vdir_of(d);
	if (!v)
		return NEXT(closedir)(d);
	if (v->host)
		NEXT(closedir)(v->host);
	if (v->own)
		close(v->fd);
	pthread_mutex_destroy(&v->mu);
	v->magic = 0;
	free(v);
	return 0;
}

EXPORT int dirfd(DIR *d)
{
	struct vdir *v = vdir_of(d);
	if (!v)
		return NEXT(dirfd)(d);
	pthread_mutex_lock(&v->mu);
	if (v->fd < 0) {
		unsigned i;
		const struct node *n = lookup(v->path, &i);
		if (n && n->kind == DIR_)
			v->own = (v->fd = inert(n, i, v->path, 1, 1)) >= 0;
		else if (v->host)
			v->fd = NEXT(dirfd)(v->host); /* a HOSTDIR: the host's stream's */
		else
			errno = EINVAL;
	}
	int fd = v->fd;
	pthread_mutex_unlock(&v->mu);
	return fd;
}

EXPORT void rewinddir(DIR *d)
{
	struct vdir *v = vdir_of(d);
	if (!v) {
		NEXT(rewinddir)(d);
		return;
	}
	pthread_mutex_lock(&v->mu);
	vdir_rewind(v);
	pthread_mutex_unlock(&v->mu);
}

EXPORT long telldir(DIR *d)
{
	struct vdir *v = vdir_of(d);
	return v ? v->pos : NEXT(telldir)(d);
}

EXPORT void seekdir(DIR *d, long pos)
{
	struct vdir *v = vdir_of(d);
	if (!v) {
		NEXT(seekdir)(d, pos);
		return;
	}
	pthread_mutex_lock(&v->mu);
	vdir_rewind(v);
	while (v->pos < pos && vdir_read(v))
		;
	pthread_mutex_unlock(&v->mu);
}

/* scandir on a stream of the tree's; glibc's would read the directory
 * itself, past the interposed opendir. */
static int scan(DIR *d, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
		int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	struct dirent64 *e, **v = NULL;
	int n = 0, cap = 0;
	if (!d)
		return -1;
	while ((e = readdir64(d))) {
		if (filter && !filter(e))
			continue;
		if (n == cap) {
			struct dirent64 **w = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
			if (!w)
				goto fail;
			v = w;
		}
		if (!(v[n] = malloc(sizeof *e)))
			goto fail;
		memcpy(v[n++], e, sizeof *e);
	}
	closedir(d);
	if (compar && n)
		qsort(v, n, sizeof *v, (int (*)(const void *, const void *))compar);
	*list = v;
	return n;
fail:
	while (n)
		free(v[--n]);
	free(v);
	closedir(d);
	errno = ENOMEM;
	return -1;
}

static int do_scandirat(int dirfd, const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
			int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	struct target t;
	int r = route(dirfd, &path, FOLLOW | HOST_DIRS, &t);
	if (r < 0)
		return -1;
	if (!r)
		return NEXT(scandirat64)(dirfd, path, list, filter, compar);
	if (t.node->kind != DIR_ && t.node->kind != HOSTDIR) {
		errno = ENOTDIR;
		return -1;
	}
	return scan(open_dir(&t), list, filter, compar);
}

typedef int (*filter_fn)(const struct dirent64 *);
typedef int (*compar_fn)(const struct dirent64 **, const struct dirent64 **);

EXPORT int scandir(const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
		   int (*compar)(const struct dirent **, const struct dirent **))
{
	return do_scandirat(AT_FDCWD, path, (struct dirent64 ***)list, (filter_fn)filter, (compar_fn)compar);
}

EXPORT int scandir64(const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
		     int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	return do_scandirat(AT_FDCWD, path, list, filter, compar);
}

EXPORT int scandirat(int dirfd, const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
		     int (*compar)(const struct dirent **, const struct dirent **))
{
	return do_scandirat(dirfd, path, (struct dirent64 ***)list, (filter_fn)filter, (compar_fn)compar);
}

EXPORT int scandirat64(int dirfd, const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
		       int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	return do_scandirat(dirfd, path, list, filter, compar);
}
