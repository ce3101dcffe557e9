/*
 * signal_check: a program's signal handlers, installed each way glibc
 * offers (sigaction, signal, bsd_signal, sysv_signal, __sysv_signal, which
 * is what signal becomes under gcc -std=c99), while its thread is inside
 * verbs. Built by the tests with gcc ... -libverbs.
 *
 *   signal_check flags   prints, per way, the sa_flags the handler got
 *                        (SA_ONSTACK apart): the same with and without
 *                        the preload, which adds only SA_ONSTACK
 *   signal_check verbs   the same, then for each way a timer signal every
 *                        50 us during 1000 RDMA WRITEs of 4 KiB, each
 *                        posted and polled for on a QP connected to
 *                        itself, and how often the handler ran on the
 *                        small stack of a goroutine (the thread was inside
 *                        a verb): 0 unless a way misses SA_ONSTACK
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

typedef void (*handler_fn)(int);

/* glibc has it, but <signal.h> declares it only for X/Open before 2008. */
extern handler_fn bsd_signal(int sig, handler_fn handler);

static int install_sigaction(int sig, handler_fn h)
{
	struct sigaction a = {.sa_handler = h};
	sigemptyset(&a.sa_mask);
	return sigaction(sig, &a, NULL);
}
static int install_signal(int sig, handler_fn h) { return signal(sig, h) == SIG_ERR ? -1 : 0; }
static int install_bsd_signal(int sig, handler_fn h) { return bsd_signal(sig, h) == SIG_ERR ? -1 : 0; }
static int install_sysv_signal(int sig, handler_fn h) { return sysv_signal(sig, h) == SIG_ERR ? -1 : 0; }
static int install___sysv_signal(int sig, handler_fn h) { return __sysv_signal(sig, h) == SIG_ERR ? -1 : 0; }

/* The ways. A System V handler is reset to SIG_DFL as it runs and installs
 * itself again, as such handlers do: its signal is SIGWINCH, whose default
 * (ignore) is harmless if a second signal comes in between. */
static const struct way {
	const char *name;
	int (*install)(int, handler_fn);
	int sig, oneshot;
} ways[] = {
	{"sigaction", install_sigaction, SIGALRM, 0},
	{"signal", install_signal, SIGALRM, 0},
	{"bsd_signal", install_bsd_signal, SIGALRM, 0},
	{"sysv_signal", install_sysv_signal, SIGWINCH, 1},
	{"__sysv_signal", install___sysv_signal, SIGWINCH, 1},
};

/* on_signal counts the times it ran on neither the main thread's own stack
 * nor the thread's alternate signal stack: then it ran on a goroutine's. */
static volatile sig_atomic_t runs, foreign;
static const struct way *current;
static char *main_lo, *main_hi;
static void on_signal(int sig)
{
	char here;
	stack_t alt;
	int saved = errno;
	runs++;
	if (!(sigaltstack(NULL, &alt) == 0 && (alt.ss_flags & SS_ONSTACK)) && (&here < main_lo || &here >= main_hi))
		foreign++;
	if (current->oneshot)
		current->install(sig, on_signal);
	errno = saved;
}

static int flags_of(int sig)
{
	struct sigaction a;
	if (sigaction(sig, NULL, &a))
		DIE("sigaction query: %s", strerror(errno));
	return a.sa_flags;
}

static void print_flags(void)
{
	for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
		const struct way *w = &ways[i];
		if (w->install(w->sig, on_signal))
			DIE("%s: %s", w->name, strerror(errno));
		int f = flags_of(w->sig);
		printf("%s: SA_RESTART %d SA_RESETHAND %d SA_NODEFER %d SA_SIGINFO %d, SA_ONSTACK %d\n", w->name,
		       !!(f & SA_RESTART), !!(f & SA_RESETHAND), !!(f & SA_NODEFER), !!(f & SA_SIGINFO),
		       !!(f & SA_ONSTACK));
		signal(w->sig, SIG_DFL);
	}
}

static struct ibv_cq *cq;
static struct ibv_qp *qp;
static char src[4096], dst[4096];

/* loop_qp is an RC QP connected to itself on goroce0. */
static void loop_qp(struct ibv_context *ctx, struct ibv_pd *pd)
{
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid) || !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		DIE("gid/cq");
	struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!(qp = ibv_create_qp(pd, &init)))
		DIE("create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qp->qp_num,
				 .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				 .ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .hop_limit = 1}}};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				 .max_rd_atomic = 1};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				      IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS");
}

/* write_once WRITEs src to dst and spins on the CQ for its completion. */
static int write_once(struct ibv_mr *ms, struct ibv_mr *md)
{
	struct ibv_sge sge = {(uintptr_t)src, sizeof src, ms->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = md->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		return 0;
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	return n == 1 && wc.status == IBV_WC_SUCCESS;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "flags") && strcmp(argv[1], "verbs")))
		DIE("usage: signal_check flags|verbs");
	print_flags();
	if (!strcmp(argv[1], "flags"))
		return 0;

	pthread_attr_t pa;
	void *lo;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &pa) || pthread_attr_getstack(&pa, &lo, &size))
		DIE("main thread's stack");
	main_lo = lo;
	main_hi = main_lo + size;

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])) || !(pd = ibv_alloc_pd(ctx)))
		DIE("no device");
	struct ibv_mr *ms = ibv_reg_mr(pd, src, sizeof src, 0);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ms || !md)
		DIE("reg_mr: %s", strerror(errno));
	loop_qp(ctx, pd);

	for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
		const struct way *w = &ways[i];
		current = w;
		runs = foreign = 0;
		if (w->install(w->sig, on_signal))
			DIE("%s: %s", w->name, strerror(errno));
		struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = w->sig};
		timer_t t;
		struct itimerspec every = {{0, 50000}, {0, 50000}}, stop = {{0, 0}, {0, 0}};
		if (timer_create(CLOCK_MONOTONIC, &ev, &t) || timer_settime(t, 0, &every, NULL))
			DIE("timer: %s", strerror(errno));
		int writes = 0, intact = 1;
		for (int k = 0; k < 1000; k++) {
			for (size_t j = 0; j < sizeof src; j += 512)
				src[j] = (char)(k + j);
			writes += write_once(ms, md);
			for (size_t j = 0; j < sizeof src; j += 512)
				intact &= dst[j] == (char)(k + j);
		}
		if (timer_settime(t, 0, &stop, NULL) || timer_delete(t))
			DIE("timer: %s", strerror(errno));
		current = &ways[0]; /* a signal still pending installs nothing */
		signal(w->sig, SIG_IGN);
		printf("%s: WRITEs %d, data intact %d, the handler ran: %d, on a goroutine's stack: %d\n", w->name,
		       writes, intact, runs > 0, (int)foreign);
	}
	return 0;
}
