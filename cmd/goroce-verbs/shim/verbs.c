/*
 * verbs.c: the preloadable libibverbs stand-in (LD_PRELOAD=libgoroce-verbs.so).
 *
 * It defines the exported ibv_* functions a verbs program calls, and the
 * context ops table that verbs.h's inline functions (ibv_post_send,
 * ibv_poll_cq, ...) call through, with the structure layouts of the
 * <infiniband/verbs.h> it is compiled against. The device itself is the Go
 * core (libgoroce-verbs-core.so beside this library, or $GOROCE_VERBS_CORE),
 * which it dlopen()s on the first call that needs it, so a program that
 * never calls a verb never starts a Go runtime. The real libibverbs.so.1
 * stays loaded: its pure helpers (ibv_wc_status_str, ibv_port_state_str,
 * ...) serve as they are.
 *
 * Fork: the Go runtime does not survive fork(); a child of a process whose
 * core is loaded gets ENODEV from every verb (a child that execs, or never
 * calls a verb, is unaffected). Signals: the core is loaded with every
 * signal blocked, so the Go runtime's threads never take the program's
 * asynchronous signals (perftest's SIGALRM); the program's threads do, on
 * the alternate signal stack (see sigaction below).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "shim.h"

#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

_Static_assert(sizeof(struct ibv_sge) == sizeof(struct goroce_sge), "ibv_sge layout");
_Static_assert(offsetof(struct ibv_sge, lkey) == offsetof(struct goroce_sge, lkey), "ibv_sge layout");

/* The core's functions (goroce_* in the Go package), shim.h's struct
 * core_fns. */
struct core_fns core;

static pthread_once_t core_once = PTHREAD_ONCE_INIT;
static int core_loaded;
static void *core_handle;
volatile sig_atomic_t core_forked;

static void after_fork_child(void) { core_forked = 1; }

static void load_core(void)
{
	char path[PATH_MAX];
	const char *p = getenv("GOROCE_VERBS_CORE");
	if (!p) {
		Dl_info info;
		const char *slash;
		if (!dladdr((void *)load_core, &info) || !info.dli_fname || !(slash = strrchr(info.dli_fname, '/'))) {
			fprintf(stderr, "goroce-verbs: cannot find the core library: set GOROCE_VERBS_CORE\n");
			return;
		}
		snprintf(path, sizeof path, "%.*s/libgoroce-verbs-core.so", (int)(slash - info.dli_fname), info.dli_fname);
		p = path;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!h) {
		fprintf(stderr, "goroce-verbs: %s\n", dlerror());
		return;
	}
#define SYM(n)                                                                      \
	do {                                                                        \
		*(void **)&core.n = dlsym(h, "goroce_" #n);                         \
		if (!core.n) {                                                      \
			fprintf(stderr, "goroce-verbs: %s lacks goroce_" #n "\n", p); \
			return;                                                     \
		}                                                                   \
	} while (0)
	SYM(open); SYM(close); SYM(node_guid); SYM(query_device); SYM(query_port); SYM(query_gid);
	SYM(alloc_pd); SYM(dealloc_pd); SYM(reg_mr); SYM(dereg_mr); SYM(alloc_mw); SYM(dealloc_mw); SYM(create_ah); SYM(destroy_ah);
	SYM(create_channel); SYM(destroy_channel); SYM(channel_pop); SYM(async_pop); SYM(async_forget);
	SYM(create_cq); SYM(destroy_cq); SYM(cq_event); SYM(req_notify_cq); SYM(poll_cq);
	SYM(create_srq); SYM(destroy_srq); SYM(post_srq_recv_list);
	SYM(create_qp); SYM(destroy_qp); SYM(modify_qp); SYM(query_qp); SYM(post_send_list); SYM(post_recv_list);
#undef SYM
	pthread_atfork(NULL, NULL, after_fork_child);
	core_handle = h;
	core_loaded = 1;
}

int ready(void)
{
	pthread_once(&core_once, load_core);
	if (!core_loaded || core_forked) {
		if (core_forked && getenv("GOROCE_DEBUG"))
			fprintf(stderr, "goroce-verbs: verbs are not available in a forked child\n");
		errno = ENODEV;
		return 0;
	}
	return 1;
}

/* goroce_core_symbol returns the core's function goroce_NAME, loading the
 * core first, or NULL with errno set: for rdmacm.c, the librdmacm half of
 * the preload. */
__attribute__((visibility("hidden"))) void *goroce_core_symbol(const char *name)
{
	char full[64];
	if (!ready())
		return NULL;
	snprintf(full, sizeof full, "goroce_%s", name);
	void *f = dlsym(core_handle, full);
	if (!f) {
		fprintf(stderr, "goroce-verbs: the core lacks %s\n", full);
		errno = ENOSYS;
	}
	return f;
}

/* goroce_unsupported (shim.h): for this file's verbs, verbs_ex.c's,
 * absent.c's and rdmacm.c's rdma_* calls. */
void goroce_unsupported(const char *call, const char *errname)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static char said[256][64];
	static int n;
	if (!getenv("GOROCE_DEBUG"))
		return;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++)
		if (!strcmp(said[i], call))
			goto out;
	if (n < 256)
		snprintf(said[n++], sizeof said[0], "%s", call);
	fprintf(stderr, "goroce-verbs: %s is not supported (%s)\n", call, errname);
out:
	pthread_mutex_unlock(&mu);
}

static void unsupported(const char *verb) { goroce_unsupported(verb, "EOPNOTSUPP"); }

/* ---- the program's signal handlers ----
 *
 * A program's thread runs Go code on a small goroutine stack while it is
 * inside a verb (a cgo callback). A signal handler the program installed
 * without SA_ONSTACK (perftest's SIGALRM handler for -D) would run on that
 * stack and overrun it: the Go runtime then dies with "fatal error: fault"
 * or "sync: inconsistent mutex state". The Go runtime's rule for C code
 * that shares a process with it is that its handlers use SA_ONSTACK (Go's
 * os/signal documentation, "Go programs that use cgo or SWIG"); during a
 * callback the thread's alternate stack is the Go runtime's signal stack,
 * and elsewhere SA_ONSTACK changes nothing unless the program set one. So
 * the preload adds SA_ONSTACK to every handler installed through
 * sigaction() or signal(); nothing else of the program's request changes. */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static sigaction_fn real;
	if (!real && !(real = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction"))) {
		errno = ENOSYS;
		return -1;
	}
	if (!act || (act->sa_flags & SA_ONSTACK) ||
	    (!(act->sa_flags & SA_SIGINFO) && (act->sa_handler == SIG_DFL || act->sa_handler == SIG_IGN)))
		return real(sig, act, old);
	struct sigaction a = *act;
	a.sa_flags |= SA_ONSTACK;
	return real(sig, &a, old);
}

/* signal() as glibc defines it (BSD semantics: the handler stays installed,
 * the signal is blocked while it runs, system calls restart), through the
 * sigaction above: glibc's own signal() would not call it. */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction a = {.sa_handler = handler, .sa_flags = SA_RESTART}, old;
	sigemptyset(&a.sa_mask);
	if (sig > 0 && sig < NSIG && sigaddset(&a.sa_mask, sig) < 0)
		return SIG_ERR;
	if (sigaction(sig, &a, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* bsd_signal() is signal() under its BSD name (glibc: one function). */
EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

/* sysv_signal() with System V semantics, as glibc defines it: the handler
 * is reset to SIG_DFL as it runs (SA_RESETHAND), the signal is not blocked
 * while it runs (SA_NODEFER), system calls do not restart. Through the
 * sigaction above, for the same reason as signal(). */
EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	struct sigaction a = {.sa_handler = handler, .sa_flags = SA_RESETHAND | SA_NODEFER}, old;
	if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&a.sa_mask);
	if (sigaction(sig, &a, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* __sysv_signal is what <signal.h> makes of signal() in a program built
 * without glibc's extensions (gcc -std=c99, -std=c11, ...). */
EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return sysv_signal(sig, handler);
}

/* ---- devices ---- */

static struct ibv_device goroce0 = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "goroce0",
	.dev_name = "uverbs0", /* shim/sysfs.c shows the device at the paths these name */
	.dev_path = "/sys/class/infiniband_verbs/uverbs0",
	.ibdev_path = "/sys/class/infiniband/goroce0",
};

EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(2, sizeof *list);
	if (!list || live_add(list, OBJ_DEVICE_LIST)) {
		free(list);
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &goroce0;
	if (num_devices)
		*num_devices = 1;
	return list;
}

EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	if (live_del(list, OBJ_DEVICE_LIST))
		free(list);
}

/* goroce0 is the one device: any other pointer names none. */
#define DEVICE(d, ret)                  \
	do {                            \
		if ((d) != &goroce0) {  \
			errno = EINVAL; \
			return ret;     \
		}                       \
	} while (0)

EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	DEVICE(device, NULL);
	return device->name;
}

EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	DEVICE(device, 0);
	if (!ready())
		return 0;
	return htobe64(core.node_guid());
}

/* ibv_get_device_index gives the kernel's index of an RDMA device; goroce0
 * is the process's only one: 0. */
EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	DEVICE(device, -1);
	return 0;
}

/* Fork: a goroce MR is the program's own memory, which the device reads
 * and writes through the process's mappings, not pages pinned for DMA. So
 * a fork never leaves the parent's device writing pages the child now
 * owns, the hazard ibv_fork_init guards against: there is nothing to set
 * up, as with rdma-core on a kernel with copy-on-fork for pinned pages,
 * where ibv_is_fork_initialized says IBV_FORK_UNNEEDED. (The child cannot
 * use the device: every verb fails there with ENODEV.) */
EXPORT int ibv_fork_init(void) { return 0; }

EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

/* ibv_dontfork_range and ibv_dofork_range: nothing to keep from the
 * child, as above; rdma-core answers 0 too when fork support is not set
 * up. */
EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int req_notify_cq(struct ibv_cq *cq, int solicited_only);
static struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
static int dealloc_mw(struct ibv_mw *mw);
static int bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);

/* The extended verbs goroce0 lacks, answered as rdma-core answers for a
 * provider without them (libibverbs/dummy_ops.c, whose ops verbs_set_ops
 * puts in every slot a provider leaves empty): NULL with errno EOPNOTSUPP,
 * or EOPNOTSUPP. verbs.h's inline functions would answer the same for an
 * empty slot; filling it lets GOROCE_DEBUG name the verb. The extended
 * verbs goroce0 has are verbs_ex.c's. */
#define NO_OBJECT(type, verb, params)       \
	static type *no_##verb params       \
	{                                   \
		unsupported("ibv_" #verb);  \
		errno = EOPNOTSUPP;         \
		return NULL;                \
	}
#define NO_INT(verb, params)                \
	static int no_##verb params         \
	{                                   \
		unsupported("ibv_" #verb);  \
		return EOPNOTSUPP;          \
	}
NO_OBJECT(struct ibv_xrcd, open_xrcd, (struct ibv_context * c, struct ibv_xrcd_init_attr *a))
NO_OBJECT(struct ibv_srq, create_srq_ex, (struct ibv_context * c, struct ibv_srq_init_attr_ex *a))
NO_OBJECT(struct ibv_qp, open_qp, (struct ibv_context * c, struct ibv_qp_open_attr *a))
NO_OBJECT(struct ibv_flow, create_flow, (struct ibv_qp * qp, struct ibv_flow_attr *a))
NO_OBJECT(struct ibv_flow_action, create_flow_action_esp, (struct ibv_context * c, struct ibv_flow_action_esp_attr *a))
NO_OBJECT(struct ibv_counters, create_counters, (struct ibv_context * c, struct ibv_counters_init_attr *a))
NO_OBJECT(struct ibv_dm, alloc_dm, (struct ibv_context * c, struct ibv_alloc_dm_attr *a))
NO_OBJECT(struct ibv_mr, alloc_null_mr, (struct ibv_pd * pd))
NO_OBJECT(struct ibv_td, alloc_td, (struct ibv_context * c, struct ibv_td_init_attr *a))
NO_OBJECT(struct ibv_pd, alloc_parent_domain, (struct ibv_context * c, struct ibv_parent_domain_init_attr *a))
NO_OBJECT(struct ibv_wq, create_wq, (struct ibv_context * c, struct ibv_wq_init_attr *a))
NO_OBJECT(struct ibv_rwq_ind_table, create_rwq_ind_table, (struct ibv_context * c, struct ibv_rwq_ind_table_init_attr *a))
NO_INT(advise_mr, (struct ibv_pd * pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sge, uint32_t n))
NO_INT(modify_cq, (struct ibv_cq * cq, struct ibv_modify_cq_attr *a))
NO_INT(modify_qp_rate_limit, (struct ibv_qp * qp, struct ibv_qp_rate_limit_attr *a))
NO_INT(get_srq_num, (struct ibv_srq * srq, uint32_t *n))
NO_INT(post_srq_ops, (struct ibv_srq * srq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad))
NO_INT(query_rt_values_ex, (struct ibv_context * c, struct ibv_values_ex *v))
#undef NO_OBJECT
#undef NO_INT

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	if (device != &goroce0) {
		errno = ENODEV;
		return NULL;
	}
	if (!ready())
		return NULL;
	struct context *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	struct verbs_context *vctx = &c->vctx;
	/* The extended context: the extended verbs of verbs_ex.c, the
	 * unsupported ops, and no query_port, so that verbs.h's inline
	 * ibv_query_port calls the exported one. */
	vctx->sz = sizeof *vctx;
	vctx->create_qp_ex = goroce_create_qp_ex;
	vctx->create_cq_ex = goroce_create_cq_ex;
	vctx->query_device_ex = goroce_query_device_ex;
	vctx->open_xrcd = no_open_xrcd;
	vctx->create_srq_ex = no_create_srq_ex;
	vctx->open_qp = no_open_qp;
	vctx->ibv_create_flow = no_create_flow;
	vctx->create_flow_action_esp = no_create_flow_action_esp;
	vctx->create_counters = no_create_counters;
	vctx->alloc_dm = no_alloc_dm;
	vctx->alloc_null_mr = no_alloc_null_mr;
	vctx->alloc_td = no_alloc_td;
	vctx->alloc_parent_domain = no_alloc_parent_domain;
	vctx->create_wq = no_create_wq;
	vctx->create_rwq_ind_table = no_create_rwq_ind_table;
	vctx->advise_mr = no_advise_mr;
	vctx->modify_cq = no_modify_cq;
	vctx->modify_qp_rate_limit = no_modify_qp_rate_limit;
	vctx->get_srq_num = no_get_srq_num;
	vctx->post_srq_ops = no_post_srq_ops;
	vctx->query_rt_values = no_query_rt_values_ex;
	struct ibv_context *ctx = &vctx->context;
	ctx->device = device;
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->cmd_fd = -1;
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->ops.post_send = post_send;
	ctx->ops.post_recv = post_recv;
	ctx->ops.post_srq_recv = post_srq_recv;
	ctx->ops.poll_cq = poll_cq;
	ctx->ops.req_notify_cq = req_notify_cq;
	ctx->ops.alloc_mw = alloc_mw;
	ctx->ops.dealloc_mw = dealloc_mw;
	ctx->ops.bind_mw = bind_mw;
	ctx->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	int ret = ctx->async_fd < 0 ? errno : core.open(ctx->async_fd, &c->handle);
	if (!ret && (ret = live_add(ctx, OBJ_CONTEXT)))
		core.close(c->handle);
	if (ret) {
		if (ctx->async_fd >= 0)
			close(ctx->async_fd);
		free(c);
		errno = ret;
		return NULL;
	}
	return ctx;
}

EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	CHECK_FORK(-1);
	if (!live_del(ctx, OBJ_CONTEXT)) {
		errno = EINVAL;
		return -1;
	}
	struct context *c = context_of(ctx);
	core.close(c->handle);
	close(ctx->async_fd);
	free(c);
	return 0;
}

EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	struct goroce_device_attr g;
	CHECK_FORK(ENODEV);
	LIVE(ctx, OBJ_CONTEXT, EINVAL);
	if (!a)
		return EINVAL;
	int ret = core.query_device(&g);
	if (ret)
		return ret;
	memset(a, 0, sizeof *a);
	snprintf(a->fw_ver, sizeof a->fw_ver, "%s", g.fw_ver);
	a->node_guid = htobe64(g.node_guid);
	a->sys_image_guid = htobe64(g.sys_image_guid);
	a->max_mr_size = g.max_mr_size;
	a->page_size_cap = 4096;
	a->vendor_id = g.vendor_id;
	a->max_qp = g.max_qp;
	a->max_qp_wr = g.max_qp_wr;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_MEM_MGT_EXTENSIONS;
	a->max_mw = g.max_mw;
	a->max_sge = a->max_sge_rd = g.max_sge;
	a->max_cq = g.max_cq;
	a->max_cqe = g.max_cqe;
	a->max_mr = g.max_mr;
	a->max_pd = g.max_pd;
	a->max_qp_rd_atom = a->max_res_rd_atom = g.max_qp_rd_atom;
	a->max_qp_init_rd_atom = g.max_qp_init_rd_atom;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = g.max_qp;
	a->max_ah = g.max_qp;
	a->max_srq_wr = g.max_srq_wr;
	a->max_srq_sge = g.max_sge;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	return 0;
}

/* The exported ibv_query_port: verbs.h's inline ___ibv_query_port calls it
 * (the context has no extended query_port) with a zeroed struct
 * ibv_port_attr; older binaries pass the shorter _compat_ibv_port_attr,
 * which ends before port_cap_flags2, so that is not written. */
EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port_num, struct _compat_ibv_port_attr *compat)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
	struct goroce_port_attr g;
	CHECK_FORK(ENODEV);
	LIVE(ctx, OBJ_CONTEXT, EINVAL);
	if (!a)
		return EINVAL;
	int ret = core.query_port(port_num, &g);
	if (ret)
		return ret;
	memset(a, 0, offsetof(struct ibv_port_attr, port_cap_flags2));
	a->state = g.state;
	a->max_mtu = g.max_mtu;
	a->active_mtu = g.active_mtu;
	a->gid_tbl_len = g.gid_tbl_len;
	a->port_cap_flags = g.port_cap_flags;
	a->max_msg_sz = g.max_msg_sz;
	a->pkey_tbl_len = g.pkey_tbl_len;
	a->lid = g.lid;
	a->sm_lid = g.sm_lid;
	a->sm_sl = g.sm_sl;
	a->lmc = g.lmc;
	a->active_width = g.active_width;
	a->active_speed = g.active_speed;
	a->phys_state = g.phys_state;
	a->link_layer = g.link_layer;
	return 0;
}

/* ibv_query_gid, as rdma-core's: an index of the table that holds no GID
 * gives 0 and a zero GID; one beyond it, or another port, -1 and EINVAL. */
EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port_num, int index, union ibv_gid *gid)
{
	CHECK_FORK(-1);
	LIVE(ctx, OBJ_CONTEXT, -1);
	if (!gid) {
		errno = EINVAL;
		return -1;
	}
	int ret = core.query_gid(port_num, index, gid->raw);
	if (ret == ENODATA) {
		memset(gid, 0, sizeof *gid);
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

/* ibv_query_gid_type is rdma-core's private symbol that ibv_devinfo uses;
 * type is an enum ibv_gid_type_sysfs, where 1 is RoCE v2. An index that
 * holds no GID has no type (rdma-core reads its sysfs file, which fails). */
EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port_num, unsigned int index, int *type)
{
	uint8_t raw[16];
	CHECK_FORK(-1);
	LIVE(ctx, OBJ_CONTEXT, -1);
	if (!type || index > INT_MAX) {
		errno = EINVAL;
		return -1;
	}
	int ret = core.query_gid(port_num, (int)index, raw);
	if (ret) {
		errno = ret == ENODATA ? EINVAL : ret;
		return -1;
	}
	*type = 1;
	return 0;
}

/* ---- protection domains, memory regions, address handles ---- */

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	CHECK_FORK(NULL);
	LIVE(ctx, OBJ_CONTEXT, NULL);
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = ctx;
	int ret = core.alloc_pd(&pd->handle);
	if (!ret && (ret = live_add(pd, OBJ_PD)))
		core.dealloc_pd(pd->handle);
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	CHECK_FORK(ENODEV);
	if (!live_del(pd, OBJ_PD))
		return EINVAL;
	int ret = core.dealloc_pd(pd->handle);
	if (!ret)
		free(pd);
	else
		live_add(pd, OBJ_PD); /* still in use (EBUSY): it stays */
	return ret;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int use_iova,
			     unsigned int access)
{
	CHECK_FORK(NULL);
	LIVE(pd, OBJ_PD, NULL);
	struct ibv_mr *mr = calloc(1, sizeof *mr);
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	/* Optional access flags (relaxed ordering) are hints a device may
	 * ignore, as rdma-core does for devices without them. */
	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	/* On-demand paging: goroce0 advertises none, and the kernel refuses
	 * such an MR on a device without it (ib_check_mr_access:
	 * -EOPNOTSUPP). */
	if (access & IBV_ACCESS_ON_DEMAND) {
		free(mr);
		unsupported("ibv_reg_mr with IBV_ACCESS_ON_DEMAND");
		errno = EOPNOTSUPP;
		return NULL;
	}
	int ret = core.reg_mr(pd->handle, addr, length, iova, use_iova, (int)access, &mr->handle, &mr->lkey, &mr->rkey);
	if (!ret && (ret = live_add(mr, OBJ_MR)))
		core.dereg_mr(mr->handle);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	return mr;
}

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_mr(pd, addr, length, (uintptr_t)addr, 0, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg_mr(pd, addr, length, iova, 1, (unsigned int)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				       unsigned int access)
{
	return reg_mr(pd, addr, length, iova, 1, access);
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	CHECK_FORK(ENODEV);
	if (!live_del(mr, OBJ_MR))
		return EINVAL;
	int ret = core.dereg_mr(mr->handle);
	if (!ret)
		free(mr);
	else
		live_add(mr, OBJ_MR); /* windows still bound to it (EBUSY) */
	return ret;
}

/* Memory windows: ops.alloc_mw, dealloc_mw and bind_mw, which verbs.h's
 * inline ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw call. */

static struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	CHECK_FORK(NULL);
	LIVE(pd, OBJ_PD, NULL);
	struct ibv_mw *mw = calloc(1, sizeof *mw);
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	int ret = core.alloc_mw(pd->handle, type, &mw->handle, &mw->rkey);
	if (!ret && (ret = live_add(mw, OBJ_MW)))
		core.dealloc_mw(mw->handle);
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	mw->context = pd->context;
	mw->pd = pd;
	mw->type = type;
	return mw;
}

static int dealloc_mw(struct ibv_mw *mw)
{
	CHECK_FORK(ENODEV);
	if (!live_del(mw, OBJ_MW))
		return EINVAL;
	int ret = core.dealloc_mw(mw->handle);
	if (!ret)
		free(mw);
	else
		live_add(mw, OBJ_MW);
	return ret;
}

/* bind_mw binds (or, length 0, unbinds) a type-1 window as rxe's provider
 * does: it posts a BIND_MW work request with the window's next rkey
 * (ibv_inc_rkey), which completes on the QP's send CQ like any WR, and
 * gives the window that rkey at once. ZERO_BASED is refused (o10-36.2.2). */
static int bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	if (!live(qp, OBJ_QP) || !live(mw, OBJ_MW) || !mw_bind)
		return EINVAL;
	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;
	struct ibv_send_wr wr = {.wr_id = mw_bind->wr_id, .opcode = IBV_WR_BIND_MW,
				 .send_flags = mw_bind->send_flags}, *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	int ret = post_send(qp, &wr, &bad);
	if (ret)
		return ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

static void av_of(struct goroce_av *av, const struct ibv_ah_attr *a)
{
	memcpy(av->dgid, a->grh.dgid.raw, 16);
	av->sgid_index = a->grh.sgid_index;
	av->hop_limit = a->grh.hop_limit;
	av->traffic_class = a->grh.traffic_class;
	av->sl = a->sl;
}

EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct goroce_av av;
	CHECK_FORK(NULL);
	LIVE(pd, OBJ_PD, NULL);
	if (!attr || !attr->is_global) { /* RoCE addresses by GID: rxe refuses an AH without a GRH */
		errno = EINVAL;
		return NULL;
	}
	struct ibv_ah *ah = calloc(1, sizeof *ah);
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	av_of(&av, attr);
	int ret = core.create_ah(pd->handle, &av, &ah->handle);
	if (!ret && (ret = live_add(ah, OBJ_AH)))
		core.destroy_ah(ah->handle);
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	return ah;
}

/* ibv_init_ah_from_wc builds the address vector back to the sender of a
 * UD receive from the 40-byte GRH area in front of its data: for RoCEv2
 * over IPv4 an IPv4 header in its last 20 bytes, else an IPv6 header (as
 * rxe writes it and rdma-core reads it). */
EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh,
			       struct ibv_ah_attr *ah_attr)
{
	LIVE(ctx, OBJ_CONTEXT, -1);
	if (!wc || !grh || !ah_attr || port_num != 1) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof *ah_attr);
	ah_attr->sl = wc->sl;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH)) { /* RoCE needs the GRH for the peer's GID */
		errno = EINVAL;
		return -1;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.hop_limit = 0xff;
	const uint8_t *b = (const uint8_t *)grh;
	if ((b[20] >> 4) == 4) { /* IPv4: version 4, the source address at 12 */
		memset(ah_attr->grh.dgid.raw, 0, 10);
		ah_attr->grh.dgid.raw[10] = ah_attr->grh.dgid.raw[11] = 0xff;
		memcpy(ah_attr->grh.dgid.raw + 12, b + 20 + 12, 4);
		ah_attr->grh.traffic_class = b[20 + 1];
	} else {
		uint32_t vtf = ntohl(grh->version_tclass_flow);
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.flow_label = vtf & 0xfffff;
		ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
	}
	return 0;
}

EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
					    uint8_t port_num)
{
	struct ibv_ah_attr attr;
	LIVE(pd, OBJ_PD, NULL);
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	CHECK_FORK(ENODEV);
	if (!live_del(ah, OBJ_AH))
		return EINVAL;
	int ret = core.destroy_ah(ah->handle);
	if (!ret)
		free(ah);
	return ret;
}

/* ---- completion channels and CQs ---- */

struct channel {
	struct ibv_comp_channel ch;
	uint32_t handle;
};

EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	CHECK_FORK(NULL);
	LIVE(ctx, OBJ_CONTEXT, NULL);
	struct channel *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->ch.context = ctx;
	c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	int ret = c->ch.fd < 0 ? errno : core.create_channel(c->ch.fd, &c->handle);
	if (!ret && (ret = live_add(&c->ch, OBJ_COMP_CHANNEL)))
		core.destroy_channel(c->handle);
	if (ret) {
		if (c->ch.fd >= 0)
			close(c->ch.fd);
		free(c);
		errno = ret;
		return NULL;
	}
	return &c->ch;
}

EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct channel *c = container_of(ch, struct channel, ch);
	CHECK_FORK(ENODEV);
	if (!live_del(ch, OBJ_COMP_CHANNEL))
		return EINVAL;
	if (ch->refcnt) {
		live_add(ch, OBJ_COMP_CHANNEL);
		return EBUSY;
	}
	core.destroy_channel(c->handle);
	close(ch->fd);
	free(c);
	return 0;
}

/* cq_create makes a CQ (shim.h's struct cq), or gives NULL with errno:
 * for ibv_create_cq and ibv_create_cq_ex. */
HIDDEN struct cq *cq_create(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
			    int comp_vector)
{
	CHECK_FORK(NULL);
	LIVE(ctx, OBJ_CONTEXT, NULL);
	if (ch)
		LIVE(ch, OBJ_COMP_CHANNEL, NULL);
	if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	struct cq *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_cq *cq = &c->cq;
	pthread_spin_init(&c->lock, PTHREAD_PROCESS_PRIVATE);
	cq->context = ctx;
	cq->channel = ch;
	cq->cq_context = cq_context;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	uint32_t chh = ch ? container_of(ch, struct channel, ch)->handle : 0;
	int ret = core.create_cq(cqe, chh, (uintptr_t)cq, &c->ring, &cq->handle, &cq->cqe);
	if (!ret && (ret = live_add(cq, OBJ_CQ))) {
		uint32_t reported;
		core.destroy_cq(cq->handle, &reported);
	}
	if (ret) {
		pthread_spin_destroy(&c->lock);
		free(c);
		errno = ret;
		return NULL;
	}
	if (ch) {
		pthread_mutex_lock(&ctx->mutex);
		ch->refcnt++;
		pthread_mutex_unlock(&ctx->mutex);
	}
	return c;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
				    int comp_vector)
{
	struct cq *c = cq_create(ctx, cqe, cq_context, ch, comp_vector);
	return c ? &c->cq : NULL;
}

/* wait_async_acks forgets the async events of obj, a QP, CQ or SRQ the core
 * has destroyed, and waits until the program has acknowledged each one it
 * got (ibv_ack_async_event counts them in *completed, under m, and signals
 * c), as rdma-core's destroy verbs wait for the kernel's events_reported:
 * the program's event thread may still hold obj. */
static void wait_async_acks(uintptr_t obj, pthread_mutex_t *m, pthread_cond_t *c, uint32_t *completed)
{
	uint32_t handed = 0;
	core.async_forget(obj, &handed);
	pthread_mutex_lock(m);
	while (*completed < handed)
		pthread_cond_wait(c, m);
	pthread_mutex_unlock(m);
}

/* ibv_destroy_cq waits until the program has acknowledged every event it
 * got for the CQ (ibv_ack_cq_events, ibv_ack_async_event), as rdma-core
 * does. */
EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	uint32_t reported;
	CHECK_FORK(ENODEV);
	LIVE(cq, OBJ_CQ, EINVAL);
	/* It stays live until its events are acknowledged: ibv_ack_cq_events
	 * checks it. The core forgets the handle first, so a second
	 * ibv_destroy_cq meanwhile fails there. */
	int ret = core.destroy_cq(cq->handle, &reported);
	if (ret)
		return ret;
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed < reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
	wait_async_acks((uintptr_t)cq, &cq->mutex, &cq->cond, &cq->async_events_completed);
	if (cq->channel) {
		pthread_mutex_lock(&cq->context->mutex);
		cq->channel->refcnt--;
		pthread_mutex_unlock(&cq->context->mutex);
	}
	live_del(cq, OBJ_CQ);
	struct cq *c = container_of(cq, struct cq, cq);
	pthread_spin_destroy(&c->lock);
	free(c);
	return 0;
}

EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	struct channel *c = container_of(ch, struct channel, ch);
	CHECK_FORK(-1);
	LIVE(ch, OBJ_COMP_CHANNEL, -1);
	if (!cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		uint64_t n;
		uintptr_t p;
		if (read(ch->fd, &n, sizeof n) != sizeof n)
			return -1;
		if (core.channel_pop(c->handle, &p))
			continue; /* the event of a CQ destroyed since */
		*cq = (struct ibv_cq *)p;
		*cq_context = (*cq)->cq_context;
		core.cq_event((*cq)->handle);
		return 0;
	}
}

EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!live(cq, OBJ_CQ))
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

static int req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	CHECK_FORK(ENODEV);
	return core.req_notify_cq(cq->handle, solicited_only);
}

/* wc_of gives the program's view of a completion of the core. */
static void wc_of(struct ibv_wc *w, const struct goroce_wc *g)
{
	memset(w, 0, sizeof *w);
	w->wr_id = g->wr_id;
	w->status = g->status;
	w->opcode = g->opcode;
	w->vendor_err = g->vendor_err;
	w->byte_len = g->byte_len;
	w->qp_num = g->qp_num;
	w->src_qp = g->src_qp;
	w->sl = g->sl;
	/* goroce numbers its flags as enum ibv_wc_flags. */
	w->wc_flags = g->wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM | IBV_WC_WITH_INV);
	if (g->wc_flags & IBV_WC_WITH_IMM)
		w->imm_data = htonl(g->imm);
	if (g->wc_flags & IBV_WC_WITH_INV)
		w->invalidated_rkey = g->imm;
}

/* cq_refill asks the core to move what the device's CQ holds into the
 * CQ's empty ring (and, on an empty CQ, to run the receive path), and
 * returns how many it moved, or a negative errno. The lock is held. */
int cq_refill(struct cq *c) { return core.poll_cq(c->cq.handle); }

/* cq_idle is called after each poll that found nothing. A program that
 * spins on an empty CQ shares the CPUs with the device's goroutines that
 * would fill it: every few empty polls, offer the CPU (sched_yield), as
 * qp.CQ.Wait does while it spins. */
void cq_idle(void)
{
	static __thread unsigned int empty;
	if (++empty % 4 == 0)
		sched_yield();
}

/* poll_cq hands the program the completions in the CQ's ring, and calls
 * into the core only when the ring is empty, at most once per call: the
 * core then moves what the device's CQ holds into the ring (and, on an
 * empty CQ, runs the receive path). */
static int poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct cq *cq = container_of(ibcq, struct cq, cq);
	struct goroce_cq_ring *r = &cq->ring;
	int total = 0, crossed = 0, err = 0;
	CHECK_FORK(-1);
	pthread_spin_lock(&cq->lock);
	uint32_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED); /* ours to write */
	while (total < n) {
		uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (head == tail) {
			if (crossed)
				break;
			crossed = 1;
			int got = cq_refill(cq);
			if (got < 0)
				err = -got;
			if (got <= 0)
				break;
			continue;
		}
		for (; head != tail && total < n; head++, total++)
			wc_of(&wc[total], &r->wc[head % GOROCE_CQ_RING]);
		/* The entries are read: the core may fill them again. */
		__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	}
	pthread_spin_unlock(&cq->lock);
	if (err && !total) {
		errno = err;
		return -1;
	}
	if (total == 0)
		cq_idle();
	return total;
}

/* ---- SRQs and QPs ---- */

EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	CHECK_FORK(NULL);
	LIVE(pd, OBJ_PD, NULL);
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_srq *srq = calloc(1, sizeof *srq);
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	srq->context = pd->context;
	srq->srq_context = attr->srq_context;
	srq->pd = pd;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
	int ret = core.create_srq(pd->handle, attr->attr.max_wr, attr->attr.max_sge, attr->attr.srq_limit,
				  (uintptr_t)srq, &srq->handle);
	if (!ret && (ret = live_add(srq, OBJ_SRQ)))
		core.destroy_srq(srq->handle);
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return srq;
}

EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	CHECK_FORK(ENODEV);
	LIVE(srq, OBJ_SRQ, EINVAL);
	/* It stays live until its async events are acknowledged:
	 * ibv_ack_async_event checks it. The core forgets the handle first,
	 * so a second ibv_destroy_srq meanwhile fails there. */
	int ret = core.destroy_srq(srq->handle);
	if (ret)
		return ret; /* QPs still use it (EBUSY) */
	wait_async_acks((uintptr_t)srq, &srq->mutex, &srq->cond, &srq->events_completed);
	live_del(srq, OBJ_SRQ);
	free(srq);
	return 0;
}

/* post_recvs posts a list of receive WRs with post (the core's
 * post_recv_list or post_srq_recv_list for handle), GOROCE_POST_BATCH WRs
 * per call into the core. On an error, *bad_wr is the first WR not posted
 * and every one before it is, as rdma-core's providers do. */
static int post_recvs(int (*post)(uint32_t, struct goroce_recv_wr *, int, int *), uint32_t handle,
		      struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct goroce_recv_wr g[GOROCE_POST_BATCH];
	struct ibv_recv_wr *src[GOROCE_POST_BATCH];
	while (wr) {
		int n = 0;
		for (; wr && n < GOROCE_POST_BATCH; wr = wr->next, n++) {
			src[n] = wr;
			g[n] = (struct goroce_recv_wr){.wr_id = wr->wr_id,
						       .sg_list = (const struct goroce_sge *)wr->sg_list,
						       .num_sge = wr->num_sge};
		}
		int posted = 0;
		int ret = post(handle, g, n, &posted);
		if (ret) {
			*bad_wr = src[posted];
			return ret;
		}
	}
	return 0;
}

static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	CHECK_FORK(ENODEV);
	return post_recvs(core.post_srq_recv_list, srq->handle, wr, bad_wr);
}

/* qp_create (shim.h) makes the QP of ibv_create_qp and ibv_create_qp_ex,
 * and writes the capabilities it got into attr->cap, as rdma-core does. */
struct qp *qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	CHECK_FORK(NULL);
	LIVE(pd, OBJ_PD, NULL);
	if (!attr || !live(attr->send_cq, OBJ_CQ) || !live(attr->recv_cq, OBJ_CQ) ||
	    (attr->srq && !live(attr->srq, OBJ_SRQ))) {
		errno = EINVAL;
		return NULL;
	}
	struct qp *q = calloc(1, sizeof *q);
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_qp *qp = &q->qp;
	struct goroce_cap cap = {
		.max_send_wr = attr->cap.max_send_wr,
		.max_recv_wr = attr->cap.max_recv_wr,
		.max_send_sge = attr->cap.max_send_sge,
		.max_recv_sge = attr->cap.max_recv_sge,
		.max_inline_data = attr->cap.max_inline_data,
	};
	int ret = core.create_qp(pd->handle, attr->qp_type, attr->send_cq->handle, attr->recv_cq->handle,
				 attr->srq ? attr->srq->handle : 0, attr->sq_sig_all, &cap, (uintptr_t)qp, &qp->handle,
				 &qp->qp_num);
	if (!ret && (ret = live_add(qp, OBJ_QP)))
		core.destroy_qp(qp->handle);
	if (ret) {
		free(q);
		errno = ret;
		return NULL;
	}
	attr->cap = (struct ibv_qp_cap){.max_send_wr = cap.max_send_wr, .max_recv_wr = cap.max_recv_wr,
				       .max_send_sge = cap.max_send_sge, .max_recv_sge = cap.max_recv_sge,
				       .max_inline_data = cap.max_inline_data};
	q->max_send_wr = cap.max_send_wr;
	q->max_send_sge = cap.max_send_sge;
	q->max_inline = cap.max_inline_data;
	qp->context = pd->context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->qp_type = attr->qp_type;
	qp->state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	pthread_spin_init(&q->lock, PTHREAD_PROCESS_PRIVATE);
	return q;
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct qp *q = qp_create(pd, attr);
	return q ? &q->qp : NULL;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	CHECK_FORK(ENODEV);
	LIVE(qp, OBJ_QP, EINVAL);
	/* It stays live until its async events are acknowledged:
	 * ibv_ack_async_event checks it. The core forgets the handle first,
	 * so a second ibv_destroy_qp meanwhile fails there. */
	int ret = core.destroy_qp(qp->handle);
	if (ret)
		return ret;
	wait_async_acks((uintptr_t)qp, &qp->mutex, &qp->cond, &qp->events_completed);
	live_del(qp, OBJ_QP);
	struct qp *q = qp_of(qp);
	qp_ex_free(q);
	pthread_spin_destroy(&q->lock);
	free(q);
	return 0;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if (!live(qp, OBJ_QP) || !a)
		return EINVAL;
	struct goroce_qp_attr g = {
		.state = a->qp_state,
		.cur_state = a->cur_qp_state,
		.path_mtu = a->path_mtu,
		.qkey = a->qkey,
		.rq_psn = a->rq_psn,
		.sq_psn = a->sq_psn,
		.dest_qp_num = a->dest_qp_num,
		.access_flags = (int)a->qp_access_flags,
		.cap = {a->cap.max_send_wr, a->cap.max_recv_wr, a->cap.max_send_sge, a->cap.max_recv_sge,
			a->cap.max_inline_data},
		.pkey_index = a->pkey_index,
		.port_num = a->port_num,
		.max_rd_atomic = a->max_rd_atomic,
		.max_dest_rd_atomic = a->max_dest_rd_atomic,
		.min_rnr_timer = a->min_rnr_timer,
		.timeout = a->timeout,
		.retry_cnt = a->retry_cnt,
		.rnr_retry = a->rnr_retry,
		.rate_limit = a->rate_limit,
	};
	CHECK_FORK(ENODEV);
	if (mask & IBV_QP_AV) {
		if (!a->ah_attr.is_global) /* RoCE: the path is the GRH's GID */
			return EINVAL;
		av_of(&g.av, &a->ah_attr);
	}
	int ret = core.modify_qp(qp->handle, &g, mask);
	if (!ret && (mask & IBV_QP_STATE))
		qp->state = a->qp_state;
	return ret;
}

EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *init)
{
	struct goroce_qp_attr g;
	(void)mask;
	CHECK_FORK(ENODEV);
	if (!live(qp, OBJ_QP) || !a)
		return EINVAL;
	int ret = core.query_qp(qp->handle, &g);
	if (ret)
		return ret;
	memset(a, 0, sizeof *a);
	a->qp_state = g.state;
	a->cur_qp_state = g.state;
	a->path_mtu = g.path_mtu;
	a->qkey = g.qkey;
	a->rq_psn = g.rq_psn;
	a->sq_psn = g.sq_psn;
	a->dest_qp_num = g.dest_qp_num;
	a->qp_access_flags = (unsigned int)g.access_flags;
	a->cap.max_send_wr = g.cap.max_send_wr;
	a->cap.max_recv_wr = g.cap.max_recv_wr;
	a->cap.max_send_sge = g.cap.max_send_sge;
	a->cap.max_recv_sge = g.cap.max_recv_sge;
	a->cap.max_inline_data = g.cap.max_inline_data;
	a->ah_attr.is_global = 1;
	memcpy(a->ah_attr.grh.dgid.raw, g.av.dgid, 16);
	a->ah_attr.grh.sgid_index = g.av.sgid_index;
	a->ah_attr.grh.hop_limit = g.av.hop_limit;
	a->ah_attr.grh.traffic_class = g.av.traffic_class;
	a->ah_attr.sl = g.av.sl;
	a->ah_attr.port_num = 1;
	a->pkey_index = g.pkey_index;
	a->port_num = g.port_num;
	a->sq_draining = g.sq_draining;
	a->max_rd_atomic = g.max_rd_atomic;
	a->max_dest_rd_atomic = g.max_dest_rd_atomic;
	a->min_rnr_timer = g.min_rnr_timer;
	a->timeout = g.timeout;
	a->retry_cnt = g.retry_cnt;
	a->rnr_retry = g.rnr_retry;
	a->rate_limit = g.rate_limit;
	if (init) {
		memset(init, 0, sizeof *init);
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->srq = qp->srq;
		init->cap = a->cap;
		init->qp_type = qp->qp_type;
	}
	return 0;
}

/* send_wr converts wr, a WR of qp, for the core; it fails with EINVAL
 * for a BIND_MW without a window. */
static int send_wr(struct ibv_qp *qp, struct ibv_send_wr *wr, struct goroce_send_wr *g)
{
	*g = (struct goroce_send_wr){
		.wr_id = wr->wr_id,
		.sg_list = (const struct goroce_sge *)wr->sg_list,
		.num_sge = wr->num_sge,
		.opcode = wr->opcode,
		.flags = wr->send_flags,
	};
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_BIND_MW: /* which takes none: the core refuses one */
		g->imm = ntohl(wr->imm_data);
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		g->imm = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		g->remote_addr = wr->wr.rdma.remote_addr;
		g->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		g->remote_addr = wr->wr.atomic.remote_addr;
		g->rkey = wr->wr.atomic.rkey;
		g->compare_add = wr->wr.atomic.compare_add;
		g->swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_BIND_MW:
		if (!live(wr->bind_mw.mw, OBJ_MW) ||
		    (wr->bind_mw.bind_info.mr && !live(wr->bind_mw.bind_info.mr, OBJ_MR)))
			return EINVAL;
		g->mw = wr->bind_mw.mw->handle;
		g->mr = wr->bind_mw.bind_info.mr ? wr->bind_mw.bind_info.mr->handle : 0;
		g->remote_addr = wr->bind_mw.bind_info.addr;
		g->bind_length = wr->bind_mw.bind_info.length;
		g->bind_access = wr->bind_mw.bind_info.mw_access_flags;
		g->rkey = wr->bind_mw.rkey;
		break;
	default:
		break;
	}
	if (qp->qp_type == IBV_QPT_UD) {
		g->ah = wr->wr.ud.ah ? wr->wr.ud.ah->handle : 0;
		g->remote_qpn = wr->wr.ud.remote_qpn;
		g->remote_qkey = wr->wr.ud.remote_qkey;
	}
	return 0;
}

/* post_send hands the core the list GOROCE_POST_BATCH WRs per call, and the
 * core posts them as one list (the device is told once). On an error,
 * *bad_wr is the first WR not posted and every one before it is, as
 * rdma-core's providers do. */
static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct goroce_send_wr g[GOROCE_POST_BATCH];
	struct ibv_send_wr *src[GOROCE_POST_BATCH];
	CHECK_FORK(ENODEV);
	while (wr) {
		int n = 0, bad = 0;
		for (; wr && n < GOROCE_POST_BATCH; wr = wr->next, n++) {
			src[n] = wr;
			if ((bad = send_wr(qp, wr, &g[n])))
				break;
		}
		int posted = 0;
		int ret = n ? core.post_send_list(qp->handle, g, n, &posted) : 0;
		if (ret || bad) {
			*bad_wr = ret ? src[posted] : wr;
			return ret ? ret : bad;
		}
	}
	return 0;
}

static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	CHECK_FORK(ENODEV);
	return post_recvs(core.post_recv_list, qp->handle, wr, bad_wr);
}

/* ---- async events ---- */

EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	CHECK_FORK(-1);
	LIVE(ctx, OBJ_CONTEXT, -1);
	if (!event) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		uint64_t n;
		struct goroce_async_event g;
		if (read(ctx->async_fd, &n, sizeof n) != sizeof n)
			return -1;
		if (core.async_pop(context_of(ctx)->handle, &g))
			continue;
		memset(event, 0, sizeof *event);
		event->event_type = g.event_type;
		switch (g.event_type) {
		case IBV_EVENT_CQ_ERR:
			event->element.cq = (struct ibv_cq *)g.object;
			break;
		case IBV_EVENT_SRQ_ERR:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			event->element.srq = (struct ibv_srq *)g.object;
			break;
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE:
		case IBV_EVENT_SM_CHANGE:
		case IBV_EVENT_CLIENT_REREGISTER:
		case IBV_EVENT_GID_CHANGE:
			event->element.port_num = (int)g.object;
			break;
		case IBV_EVENT_DEVICE_FATAL:
			break;
		default:
			event->element.qp = (struct ibv_qp *)g.object;
		}
		return 0;
	}
}

/* ibv_ack_async_event acknowledges event: its object's count, if the
 * object still lives. */
EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	if (!event)
		return;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;
		if (!live(cq, OBJ_CQ))
			return;
		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_signal(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		return;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;
		if (!live(qp, OBJ_QP))
			return;
		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		return;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;
		if (!live(srq, OBJ_SRQ))
			return;
		pthread_mutex_lock(&srq->mutex);
		srq->events_completed++;
		pthread_cond_signal(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		return;
	}
	default:
		return;
	}
}

/* ---- what goroce0 does not do: rdma-core's answer for a device
 * without the verb, after the object is checked. Defined here so the
 * real libibverbs never sees a goroce0 object (it would look for its
 * private ops). ---- */

EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cqe;
	LIVE(cq, OBJ_CQ, EINVAL);
	unsupported("ibv_resize_cq");
	return EOPNOTSUPP;
}

EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	(void)attr, (void)mask;
	LIVE(srq, OBJ_SRQ, EINVAL);
	unsupported("ibv_modify_srq");
	return EOPNOTSUPP;
}

EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	(void)attr;
	LIVE(srq, OBJ_SRQ, EINVAL);
	unsupported("ibv_query_srq");
	return EOPNOTSUPP;
}

EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	(void)flags, (void)pd, (void)addr, (void)length, (void)access;
	LIVE(mr, OBJ_MR, IBV_REREG_MR_ERR_INPUT);
	unsupported("ibv_rereg_mr");
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
					int access)
{
	(void)offset, (void)length, (void)iova, (void)fd, (void)access;
	LIVE(pd, OBJ_PD, NULL);
	unsupported("ibv_reg_dmabuf_mr");
	errno = EOPNOTSUPP;
	return NULL;
}

EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)gid, (void)lid;
	LIVE(qp, OBJ_QP, EINVAL);
	unsupported("ibv_attach_mcast");
	return EOPNOTSUPP;
}

EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)gid, (void)lid;
	LIVE(qp, OBJ_QP, EINVAL);
	unsupported("ibv_detach_mcast");
	return EOPNOTSUPP;
}

EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port_num, int index, __be16 *pkey)
{
	LIVE(ctx, OBJ_CONTEXT, -1);
	if (port_num != 1 || index != 0 || !pkey) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htons(0xffff); /* the default P_Key, rxe's only entry */
	return 0;
}

/* ibv_get_pkey_index finds pkey in the port's P_Key table, as rdma-core
 * does: its index, or -1 (errno EINVAL) once the table ends. */
EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port_num, __be16 pkey)
{
	__be16 p;
	for (int i = 0;; i++) {
		if (ibv_query_pkey(ctx, port_num, i, &p))
			return -1;
		if (p == pkey)
			return i;
	}
}
