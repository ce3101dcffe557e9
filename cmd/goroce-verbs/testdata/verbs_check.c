/*
 * verbs_check: what a verbs program sees from goroce0 for bad input and for
 * the paths the examples do not take. Built by the tests with
 * gcc ... -libverbs and run preloaded. It prints one line per check,
 * "NAME: RESULT", where RESULT is what libibverbs returned (an errno name
 * or a work-completion status string); the test compares them with what
 * rdma-core and rxe give. It exits 0 after the last check: the process
 * survives them all.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static const char *errname(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENODEV: return "ENODEV";
	case ENOMEM: return "ENOMEM";
	case EBUSY: return "EBUSY";
	}
	static char b[32];
	snprintf(b, sizeof b, "errno %d", e);
	return b;
}

struct end {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_comp_channel *ch;
};

static struct end make_end_cap(int with_channel, int cqe, enum ibv_qp_type type, uint32_t max_wr)
{
	struct end e = {0};
	if (with_channel && !(e.ch = ibv_create_comp_channel(ctx)))
		DIE("create_comp_channel: %s", strerror(errno));
	if (!(e.cq = ibv_create_cq(ctx, cqe, NULL, e.ch, 0)))
		DIE("create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {.send_cq = e.cq, .recv_cq = e.cq, .qp_type = type,
				      .cap = {.max_send_wr = max_wr, .max_recv_wr = max_wr, .max_send_sge = 2, .max_recv_sge = 2,
					      .max_inline_data = 64}};
	if (!(e.qp = ibv_create_qp(pd, &ia)))
		DIE("create_qp: %s", strerror(errno));
	return e;
}

static struct end make_end_cq(int with_channel, int cqe, enum ibv_qp_type type)
{
	return make_end_cap(with_channel, cqe, type, 8);
}

static struct end make_end(int with_channel) { return make_end_cq(with_channel, 16, IBV_QPT_RC); }

static void connect_to(struct end *e, uint32_t peer_qpn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS");
}

static struct ibv_wc wait_wc(struct end *e)
{
	struct ibv_wc wc;
	for (long i = 0; i < 2000000000L; i++) {
		int n = ibv_poll_cq(e->cq, 1, &wc);
		if (n < 0)
			DIE("poll_cq");
		if (n == 1)
			return wc;
	}
	DIE("no completion");
}

/* unsupported prints what a verb that makes an object gave: "ok" or
 * errno's name. */
static void unsupported(const char *what, const void *obj)
{
	printf("%s: %s\n", what, obj ? "ok" : errname(errno));
}

/* sigalrm_takers counts the threads other than this one that do not
 * block SIGALRM: with the device open, the Go runtime's threads must all
 * block it, so that the program's own handler runs on its own threads. */
static int sigalrm_takers(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;
	pid_t self = gettid();
	while (d && (de = readdir(d))) {
		char path[300], line[256];
		if (de->d_name[0] == '.' || atoi(de->d_name) == self)
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			if (!strncmp(line, "SigBlk:", 7) && !(strtoull(line + 7, NULL, 16) & (1ULL << (SIGALRM - 1))))
				n++;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

/* on_alarm is a SIGALRM handler, installed with signal() as programs
 * install theirs. It counts the times it ran on neither the main thread's
 * own stack nor the thread's alternate signal stack: then it ran on the
 * small stack of a goroutine (the thread was inside a verb, running the
 * device's Go code), where a handler's frame overruns memory the Go
 * runtime owns. */
static volatile sig_atomic_t alarms, foreign;
static char *main_lo, *main_hi;
static void on_alarm(int sig)
{
	char here;
	stack_t alt;
	(void)sig;
	alarms++;
	if (sigaltstack(NULL, &alt) == 0 && (alt.ss_flags & SS_ONSTACK))
		return;
	if (&here < main_lo || &here >= main_hi)
		foreign++;
}

static void main_stack(void)
{
	pthread_attr_t a;
	void *lo;
	size_t n;
	if (pthread_getattr_np(pthread_self(), &a) || pthread_attr_getstack(&a, &lo, &n))
		DIE("main thread's stack");
	main_lo = lo;
	main_hi = main_lo + n;
	pthread_attr_destroy(&a);
}

/* A connected pair of RC QPs on goroce0, to itself. */
static void pair(struct end *a, struct end *b, int with_channel)
{
	*a = make_end(with_channel);
	*b = make_end(0);
	connect_to(a, b->qp->qp_num);
	connect_to(b, a->qp->qp_num);
}

static int post_send(struct end *e, enum ibv_wr_opcode op, struct ibv_sge *sge, uint64_t raddr, uint32_t rkey,
		     uint32_t imm)
{
	struct ibv_send_wr wr = {.wr_id = 7, .sg_list = sge, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm)}, *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* write_through WRITEs n bytes of pattern seed from bufa to addr through
 * rkey on e's QP, and gives the completion's status. */
static char bufa[8192], bufb[8192], bufw[8192];
static struct ibv_mr *mra;

static enum ibv_wc_status write_through(struct end *e, uint64_t addr, uint32_t rkey, int n, char seed)
{
	for (int i = 0; i < n; i++)
		bufa[i] = (char)(seed + i);
	struct ibv_sge sge = {(uintptr_t)bufa, n, mra->lkey};
	if (post_send(e, IBV_WR_RDMA_WRITE, &sge, addr, rkey, 0))
		DIE("post WRITE through a window");
	return wait_wc(e).status;
}

/* arrived says whether n bytes of pattern seed are at p. */
static int arrived(const char *p, int n, char seed)
{
	for (int i = 0; i < n; i++)
		if (p[i] != (char)(seed + i))
			return 0;
	return 1;
}

/* bind2 binds the type-2 window mw to [addr, addr+n) of mr with a BIND_MW
 * posted on e's QP, prints its completion, and gives the new rkey. */
static uint32_t bind2(struct end *e, struct ibv_mw *mw, struct ibv_mr *mr, void *addr, int n)
{
	struct ibv_send_wr wr = {.wr_id = 41, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = mr, .addr = (uintptr_t)addr, .length = n,
							 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
	int ret = ibv_post_send(e->qp, &wr, &bad);
	struct ibv_wc wc = wait_wc(e);
	printf("post_send IBV_WR_BIND_MW: %s, completion %s, opcode BIND_MW %d\n", errname(ret),
	       ibv_wc_status_str(wc.status), wc.opcode == IBV_WC_BIND_MW);
	return wr.bind_mw.rkey;
}

/* list_checks posts lists of work requests, each in one call: longer than
 * the shim hands the core at once (16), with a bad WR late in the list,
 * and with inline SENDs among the others. As rdma-core's providers do,
 * bad_wr is the first WR not posted and every one before it is posted. */
static char lista[4096], listb[4096];
static void list_checks(void)
{
	enum { N = 40, BAD = 35, RN = 20, RBAD = 17, SZ = 100 };
	struct ibv_mr *ma = ibv_reg_mr(pd, lista, sizeof lista, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *mb = ibv_reg_mr(pd, listb, sizeof listb, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ma || !mb)
		DIE("reg_mr: %s", strerror(errno));
	struct end a = make_end_cap(0, 128, IBV_QPT_RC, 64), b = make_end_cap(0, 128, IBV_QPT_RC, 64);
	connect_to(&a, b.qp->qp_num);
	connect_to(&b, a.qp->qp_num);

	struct ibv_send_wr wrs[N], *bad = NULL;
	struct ibv_sge sges[N];
	for (int i = 0; i < N * SZ; i++)
		lista[i] = (char)(i * 11 + 3);
	for (int i = 0; i < N; i++) {
		sges[i] = (struct ibv_sge){(uintptr_t)lista + i * SZ, SZ, ma->lkey};
		wrs[i] = (struct ibv_send_wr){.wr_id = 1000 + i, .sg_list = &sges[i], .num_sge = 1,
					      .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
					      .next = i + 1 < N ? &wrs[i + 1] : NULL};
		wrs[i].wr.rdma.remote_addr = (uintptr_t)listb + i * SZ;
		wrs[i].wr.rdma.rkey = mb->rkey;
	}
	wrs[BAD].num_sge = 3; /* max_send_sge is 2 */
	int ret = ibv_post_send(a.qp, wrs, &bad);
	int order = 1, ok = 1;
	for (int i = 0; i < BAD; i++) {
		struct ibv_wc wc = wait_wc(&a);
		order &= wc.wr_id == (uint64_t)(1000 + i);
		ok &= wc.status == IBV_WC_SUCCESS;
	}
	/* One more WRITE: its completion comes next, so no WR after bad_wr
	 * was posted, and their bytes never arrive. */
	wrs[0].next = NULL;
	wrs[0].wr_id = 2000;
	if (ibv_post_send(a.qp, wrs, &bad))
		DIE("post_send after the list");
	struct ibv_wc last = wait_wc(&a);
	int same = 1, untouched = 1;
	for (int i = 0; i < BAD * SZ; i++)
		same &= listb[i] == (char)(i * 11 + 3);
	for (int i = BAD * SZ; i < N * SZ; i++)
		untouched &= listb[i] == 0;
	printf("post_send list of %d, WR %d bad: %s, bad_wr WR %d: %d, completions in order %d, status %d, next "
	       "completion the next WR %d, data arrived %d, none after bad_wr %d\n",
	       N, BAD, errname(ret), BAD, bad == &wrs[BAD], order, ok, last.wr_id == 2000 && last.status == 0, same,
	       untouched);

	/* Receives as one list, the one at RBAD bad; then as many SENDs as
	 * were posted, as one list, every third inline (from a buffer the
	 * program overwrites once the post returns). */
	struct ibv_recv_wr rwrs[RN], *rbad = NULL;
	struct ibv_sge rsges[RN];
	memset(listb, 0, sizeof listb);
	for (int i = 0; i < RN; i++) {
		rsges[i] = (struct ibv_sge){(uintptr_t)listb + i * SZ, SZ, mb->lkey};
		rwrs[i] = (struct ibv_recv_wr){.wr_id = 3000 + i, .sg_list = &rsges[i], .num_sge = 1,
					       .next = i + 1 < RN ? &rwrs[i + 1] : NULL};
	}
	rwrs[RBAD].num_sge = 3; /* max_recv_sge is 2 */
	ret = ibv_post_recv(b.qp, rwrs, &rbad);
	char inl[RBAD][40];
	for (int i = 0; i < RBAD; i++) {
		int in = i % 3 == 2;
		if (in) {
			memcpy(inl[i], lista + i * SZ, sizeof inl[i]);
			sges[i] = (struct ibv_sge){(uintptr_t)inl[i], sizeof inl[i], 0};
		} else
			sges[i] = (struct ibv_sge){(uintptr_t)lista + i * SZ, SZ, ma->lkey};
		wrs[i] = (struct ibv_send_wr){.wr_id = 4000 + i, .sg_list = &sges[i], .num_sge = 1,
					      .opcode = IBV_WR_SEND,
					      .send_flags = IBV_SEND_SIGNALED | (in ? IBV_SEND_INLINE : 0),
					      .next = i + 1 < RBAD ? &wrs[i + 1] : NULL};
	}
	int sret = ibv_post_send(a.qp, wrs, &bad);
	memset(inl, 0, sizeof inl);
	int sorder = 1, rorder = 1;
	same = 1;
	for (int i = 0; i < RBAD; i++) {
		struct ibv_wc wc = wait_wc(&a);
		sorder &= wc.wr_id == (uint64_t)(4000 + i) && wc.status == IBV_WC_SUCCESS;
	}
	for (int i = 0; i < RBAD; i++) {
		struct ibv_wc wc = wait_wc(&b);
		int n = i % 3 == 2 ? 40 : SZ;
		rorder &= wc.wr_id == (uint64_t)(3000 + i) && wc.status == IBV_WC_SUCCESS && wc.byte_len == (uint32_t)n;
		for (int j = 0; j < n; j++)
			same &= listb[i * SZ + j] == lista[i * SZ + j];
	}
	printf("post_recv list of %d, WR %d bad: %s, bad_wr WR %d: %d; post_send list of %d SENDs, every third "
	       "inline: %s, completions in order %d, receives in order %d, data arrived %d\n",
	       RN, RBAD, errname(ret), RBAD, rbad == &rwrs[RBAD], RBAD, errname(sret), sorder, rorder, same);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		DIE("no device");
	if (!(pd = ibv_alloc_pd(ctx)) || ibv_query_gid(ctx, 1, 0, &gid))
		DIE("pd/gid");
	mra = ibv_reg_mr(pd, bufa, sizeof bufa, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *mrb = ibv_reg_mr(pd, bufb, sizeof bufb, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mra || !mrb)
		DIE("reg_mr: %s", strerror(errno));

	printf("device threads that take SIGALRM: %d\n", sigalrm_takers());

	/* A post to a QP in RESET. */
	struct end r = make_end(0);
	struct ibv_sge sge = {(uintptr_t)bufa, 16, mra->lkey};
	printf("post_send in RESET: %s\n", errname(post_send(&r, IBV_WR_SEND, &sge, 0, 0, 0)));

	/* Data both ways: a RDMA WRITE WITH_IMM a->b, then a SEND b->a. */
	struct end a, b;
	pair(&a, &b, 1);
	struct ibv_sge rs = {(uintptr_t)bufb + 4096, 4096, mrb->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 9, .sg_list = &rs, .num_sge = 1}, *rbad;
	if (ibv_post_recv(b.qp, &rwr, &rbad))
		DIE("post_recv");
	for (int i = 0; i < 3000; i++)
		bufa[i] = (char)(i * 7 + 1);
	sge.length = 3000;
	if (ibv_req_notify_cq(a.cq, 0))
		DIE("req_notify_cq");
	if (post_send(&a, IBV_WR_RDMA_WRITE_WITH_IMM, &sge, (uintptr_t)bufb + 100, mrb->rkey, 0x12345678))
		DIE("post write");
	struct pollfd pfd = {.fd = a.ch->fd, .events = POLLIN};
	printf("poll on the completion channel: %d\n", poll(&pfd, 1, 10000));
	struct ibv_cq *ecq;
	void *ectx;
	int got = ibv_get_cq_event(a.ch, &ecq, &ectx);
	printf("get_cq_event: %d, the CQ armed: %d\n", got, got == 0 && ecq == a.cq);
	ibv_ack_cq_events(a.cq, 1);
	struct ibv_wc wc = wait_wc(&a);
	printf("write: %s\n", ibv_wc_status_str(wc.status));
	wc = wait_wc(&b);
	printf("write seen: %s opcode %d imm 0x%x with_imm %d\n", ibv_wc_status_str(wc.status), wc.opcode,
	       ntohl(wc.imm_data), !!(wc.wc_flags & IBV_WC_WITH_IMM));
	int same = 1;
	for (int i = 0; i < 3000; i++)
		same &= bufb[100 + i] == (char)(i * 7 + 1);
	printf("written data arrived: %d\n", same);
	for (int i = 0; i < 1000; i++)
		bufb[6000 + i] = (char)(i * 13 + 5);
	struct ibv_sge bs = {(uintptr_t)bufb + 6000, 1000, mrb->lkey};
	struct ibv_sge as = {(uintptr_t)bufa + 4096, 4096, mra->lkey};
	struct ibv_recv_wr arwr = {.wr_id = 11, .sg_list = &as, .num_sge = 1};
	if (ibv_post_recv(a.qp, &arwr, &rbad) || post_send(&b, IBV_WR_SEND, &bs, 0, 0, 0))
		DIE("post send b->a");
	wait_wc(&b);
	wc = wait_wc(&a);
	same = wc.byte_len == 1000;
	for (int i = 0; i < 1000; i++)
		same &= bufa[4096 + i] == (char)(i * 13 + 5);
	printf("send b->a: %s, data arrived: %d\n", ibv_wc_status_str(wc.status), same);
	/* Inline, as rxe takes it: the SGEs' addresses are read as pointers
	 * and their lkeys are not looked at (librdmacm's rdma_client posts
	 * from unregistered memory with lkey 0). */
	char part1[20], part2[30];
	for (int i = 0; i < 20; i++)
		part1[i] = (char)(i * 3 + 2);
	for (int i = 0; i < 30; i++)
		part2[i] = (char)(i * 5 + 9);
	struct ibv_sge isge[2] = {{(uintptr_t)part1, 20, 0}, {(uintptr_t)part2, 30, 0}};
	struct ibv_send_wr iwr = {.wr_id = 12, .sg_list = isge, .num_sge = 2, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE}, *inbad;
	if (ibv_post_recv(a.qp, &arwr, &rbad) || ibv_post_send(b.qp, &iwr, &inbad))
		DIE("post inline send b->a");
	memset(part1, 0, sizeof part1); /* inline data is taken at post time */
	memset(part2, 0, sizeof part2);
	wait_wc(&b);
	wc = wait_wc(&a);
	same = wc.byte_len == 50;
	for (int i = 0; i < 20; i++)
		same &= bufa[4096 + i] == (char)(i * 3 + 2);
	for (int i = 0; i < 30; i++)
		same &= bufa[4096 + 20 + i] == (char)(i * 5 + 9);
	printf("inline send b->a with lkey 0: %s, data arrived: %d\n", ibv_wc_status_str(wc.status), same);
	isge[1].length = 60; /* 80 bytes > max_inline_data 64 */
	printf("inline send beyond max_inline_data: %s\n", errname(ibv_post_send(b.qp, &iwr, &inbad)));
	list_checks();

	/* The program's signal handler while its thread is inside verbs: a
	 * SIGALRM every 50 us during 3000 WRITEs of 4 KiB, each posted and
	 * polled for, calls into the device. */
	main_stack();
	signal(SIGALRM, on_alarm);
	struct itimerval every = {{0, 50}, {0, 50}}, stop = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &every, NULL);
	int writes = 0;
	sge.length = 4096;
	for (int i = 0; i < 3000; i++)
		writes += !post_send(&a, IBV_WR_RDMA_WRITE, &sge, (uintptr_t)bufb, mrb->rkey, 0) &&
			  wait_wc(&a).status == IBV_WC_SUCCESS;
	setitimer(ITIMER_REAL, &stop, NULL);
	signal(SIGALRM, SIG_DFL);
	printf("WRITEs under SIGALRM: %d, the handler ran: %d, on a goroutine's stack: %d\n", writes, alarms > 0,
	       (int)foreign);

	/* A bad lkey, and an SGE beyond its MR: local protection errors. */
	struct end c, d;
	pair(&c, &d, 0);
	struct ibv_sge bad = {(uintptr_t)bufa, 16, mra->lkey ^ 0x5a5a00};
	if (post_send(&c, IBV_WR_RDMA_WRITE, &bad, (uintptr_t)bufb, mrb->rkey, 0))
		DIE("post bad lkey");
	printf("bad lkey: %s\n", ibv_wc_status_str(wait_wc(&c).status));
	struct end e, f;
	pair(&e, &f, 0);
	struct ibv_sge beyond = {(uintptr_t)bufa + sizeof bufa - 8, 64, mra->lkey};
	if (post_send(&e, IBV_WR_RDMA_WRITE, &beyond, (uintptr_t)bufb, mrb->rkey, 0))
		DIE("post beyond");
	printf("SGE beyond the MR: %s\n", ibv_wc_status_str(wait_wc(&e).status));

	/* UD: a datagram, and the reply through an AH made from its GRH. */
	struct end u1 = make_end_cq(0, 16, IBV_QPT_UD), u2 = make_end_cq(0, 16, IBV_QPT_UD);
	for (struct end *u = &u1; u; u = u == &u1 ? &u2 : NULL) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};
		if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			DIE("UD INIT");
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE))
			DIE("UD RTR");
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			DIE("UD RTS");
	}
	struct ibv_ah_attr aha = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .hop_limit = 1}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aha);
	if (!ah)
		DIE("create_ah: %s", strerror(errno));
	struct ibv_sge ur2 = {(uintptr_t)bufb, 40 + 64, mrb->lkey}, ur1 = {(uintptr_t)bufa, 40 + 64, mra->lkey};
	struct ibv_recv_wr urw2 = {.wr_id = 21, .sg_list = &ur2, .num_sge = 1}, urw1 = {.wr_id = 22, .sg_list = &ur1, .num_sge = 1};
	if (ibv_post_recv(u2.qp, &urw2, &rbad) || ibv_post_recv(u1.qp, &urw1, &rbad))
		DIE("UD post_recv");
	memcpy(bufa + 1000, "ping", 4);
	struct ibv_sge us = {(uintptr_t)bufa + 1000, 4, mra->lkey};
	struct ibv_send_wr uw = {.wr_id = 23, .sg_list = &us, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *ubad;
	uw.wr.ud.ah = ah;
	uw.wr.ud.remote_qpn = u2.qp->qp_num;
	uw.wr.ud.remote_qkey = 0x11111111;
	if (ibv_post_send(u1.qp, &uw, &ubad))
		DIE("UD post_send");
	wait_wc(&u1);
	wc = wait_wc(&u2);
	printf("UD datagram: %s, bytes %u, GRH %d, from the sender's QP %d, data %d\n", ibv_wc_status_str(wc.status),
	       wc.byte_len, !!(wc.wc_flags & IBV_WC_GRH), wc.src_qp == u1.qp->qp_num, !memcmp(bufb + 40, "ping", 4));
	struct ibv_ah *back = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)bufb, 1);
	if (!back)
		DIE("create_ah_from_wc: %s", strerror(errno));
	memcpy(bufb + 2000, "pong", 4);
	us = (struct ibv_sge){(uintptr_t)bufb + 2000, 4, mrb->lkey};
	uw.wr.ud.ah = back;
	uw.wr.ud.remote_qpn = wc.src_qp;
	if (ibv_post_send(u2.qp, &uw, &ubad))
		DIE("UD reply");
	wait_wc(&u2);
	wc = wait_wc(&u1);
	printf("UD reply through ibv_create_ah_from_wc: %s, data %d\n", ibv_wc_status_str(wc.status),
	       !memcmp(bufa + 40, "pong", 4));

	/* A CQ overrun: IBV_EVENT_CQ_ERR on the async fd, after the port's
	 * IBV_EVENT_PORT_ACTIVE of the device's start and the
	 * IBV_EVENT_QP_FATAL of the two QPs the protection errors above
	 * moved to ERR. */
	struct ibv_context *ctx2 = ibv_open_device(list[0]); /* a second context sees every event too */
	if (!ctx2)
		DIE("second open_device: %s", strerror(errno));
	struct end g = make_end_cq(0, 2, IBV_QPT_RC), h = make_end(0);
	connect_to(&g, h.qp->qp_num);
	connect_to(&h, g.qp->qp_num);
	sge = (struct ibv_sge){(uintptr_t)bufa, 8, mra->lkey};
	for (int i = 0; i < 4; i++)
		post_send(&g, IBV_WR_RDMA_WRITE, &sge, (uintptr_t)bufb, mrb->rkey, 0);
	for (int i = 0, cq_err = 0; i < 5 && !cq_err; i++) {
		struct pollfd afd = {.fd = ctx->async_fd, .events = POLLIN};
		struct ibv_async_event ev;
		if (poll(&afd, 1, 10000) != 1 || ibv_get_async_event(ctx, &ev))
			DIE("no async event");
		switch (ev.event_type) {
		case IBV_EVENT_CQ_ERR:
			cq_err = 1;
			printf("async event: %s, the overrun CQ: %d\n", ibv_event_type_str(ev.event_type), ev.element.cq == g.cq);
			break;
		case IBV_EVENT_PORT_ACTIVE:
			printf("async event: %s, port %d\n", ibv_event_type_str(ev.event_type), ev.element.port_num);
			break;
		default:
			printf("async event: %s, a QP that failed above: %d\n", ibv_event_type_str(ev.event_type),
			       ev.element.qp == c.qp || ev.element.qp == e.qp);
		}
		ibv_ack_async_event(&ev);
	}

	int seen = 0;
	for (int i = 0; i < 5 && !seen; i++) {
		struct pollfd afd = {.fd = ctx2->async_fd, .events = POLLIN};
		struct ibv_async_event ev;
		if (poll(&afd, 1, 10000) != 1 || ibv_get_async_event(ctx2, &ev))
			DIE("no async event on the second context");
		seen = ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == g.cq;
		ibv_ack_async_event(&ev);
	}
	printf("the second context got the CQ error too: %d, closes: %d\n", seen, ibv_close_device(ctx2));

	/* Memory windows over an MR with no remote rights of its own. A
	 * type-1 window is bound with ibv_bind_mw, which completes on the send
	 * CQ; a WRITE through it lands; once unbound (length 0) its rkey
	 * gets a remote access error. */
	struct ibv_mr *mrw = ibv_reg_mr(pd, bufw, sizeof bufw, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mrw)
		DIE("reg_mr MW_BIND: %s", strerror(errno));
	struct end w1, w2;
	pair(&w1, &w2, 0);
	errno = 0;
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	printf("alloc_mw type 1: %s\n", mw1 ? "ok" : errname(errno));
	if (!mw1)
		DIE("no window");
	uint32_t before = mw1->rkey;
	struct ibv_mw_bind mb = {.wr_id = 31, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = {.mr = mrw, .addr = (uintptr_t)bufw + 1024, .length = 1024,
					       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
	int ret = ibv_bind_mw(w2.qp, mw1, &mb);
	wc = wait_wc(&w2);
	printf("bind_mw: %s, completion %s, opcode BIND_MW %d, rkey incremented %d\n", errname(ret),
	       ibv_wc_status_str(wc.status), wc.opcode == IBV_WC_BIND_MW, mw1->rkey == ibv_inc_rkey(before));
	printf("WRITE through the type-1 window: %s, ", ibv_wc_status_str(write_through(&w1, (uintptr_t)bufw + 1024, mw1->rkey, 512, 3)));
	printf("data arrived: %d\n", arrived(bufw + 1024, 512, 3));
	uint32_t bound = mw1->rkey;
	mb.bind_info = (struct ibv_mw_bind_info){0};
	ret = ibv_bind_mw(w2.qp, mw1, &mb);
	printf("bind_mw of length 0: %s, completion %s\n", errname(ret), ibv_wc_status_str(wait_wc(&w2).status));
	printf("WRITE through the unbound window: %s, ", ibv_wc_status_str(write_through(&w1, (uintptr_t)bufw + 1024, bound, 512, 4)));
	printf("memory untouched: %d\n", arrived(bufw + 1024, 512, 3));
	printf("dealloc_mw: %s\n", errname(ibv_dealloc_mw(mw1)));

	/* A type-2 window, bound by a BIND_MW work request, invalidated by
	 * LOCAL_INV on its QP, then refused. */
	struct end t1, t2;
	pair(&t1, &t2, 0);
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mw2)
		DIE("alloc_mw type 2: %s", strerror(errno));
	uint32_t rkey2 = bind2(&t2, mw2, mrw, bufw + 4096, 1024);
	printf("WRITE through the type-2 window: %s, ", ibv_wc_status_str(write_through(&t1, (uintptr_t)bufw + 4096, rkey2, 256, 5)));
	printf("data arrived: %d\n", arrived(bufw + 4096, 256, 5));
	struct ibv_send_wr inv = {.wr_id = 42, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = rkey2}, *ibad;
	ret = ibv_post_send(t2.qp, &inv, &ibad);
	wc = wait_wc(&t2);
	printf("LOCAL_INV: %s, completion %s, opcode LOCAL_INV %d\n", errname(ret), ibv_wc_status_str(wc.status),
	       wc.opcode == IBV_WC_LOCAL_INV);
	printf("WRITE through the invalidated window: %s\n",
	       ibv_wc_status_str(write_through(&t1, (uintptr_t)bufw + 4096, rkey2, 256, 6)));

	/* SEND_WITH_INV: the peer invalidates a type-2 window with its SEND. */
	struct end s1, s2;
	pair(&s1, &s2, 0);
	struct ibv_mw *mw3 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mw3)
		DIE("alloc_mw type 2: %s", strerror(errno));
	uint32_t rkey3 = bind2(&s2, mw3, mrw, bufw + 6144, 1024);
	printf("WRITE through the second type-2 window: %s\n",
	       ibv_wc_status_str(write_through(&s1, (uintptr_t)bufw + 6144, rkey3, 128, 7)));
	struct ibv_sge rsge = {(uintptr_t)bufb, 64, mrb->lkey};
	struct ibv_recv_wr rw = {.wr_id = 43, .sg_list = &rsge, .num_sge = 1};
	struct ibv_sge ssge = {(uintptr_t)bufa, 16, mra->lkey};
	struct ibv_send_wr si = {.wr_id = 44, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
				 .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = rkey3};
	if (ibv_post_recv(s2.qp, &rw, &rbad) || ibv_post_send(s1.qp, &si, &ibad))
		DIE("post SEND_WITH_INV");
	wait_wc(&s1);
	wc = wait_wc(&s2);
	printf("SEND_WITH_INV received: %s, with_inv %d, the window's rkey %d\n", ibv_wc_status_str(wc.status),
	       !!(wc.wc_flags & IBV_WC_WITH_INV), wc.invalidated_rkey == rkey3);
	printf("WRITE through the window the peer invalidated: %s\n",
	       ibv_wc_status_str(write_through(&s1, (uintptr_t)bufw + 6144, rkey3, 128, 8)));

	/* Verbs goroce0 lacks: NULL with errno EOPNOTSUPP, or EOPNOTSUPP,
	 * as rdma-core gives for a device without them (dummy_ops.c). */
	struct ibv_xrcd_init_attr xia = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1,
					 .oflags = O_CREAT};
	errno = 0;
	unsupported("open_xrcd", ibv_open_xrcd(ctx, &xia));
	errno = 0;
	unsupported("open_xrcd again", ibv_open_xrcd(ctx, &xia));
	struct ibv_srq_init_attr_ex sia = {.attr = {.max_wr = 4, .max_sge = 1}, .srq_type = IBV_SRQT_XRC, .pd = pd,
					   .cq = c.cq, .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
								    IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_XRCD};
	errno = 0;
	unsupported("create_srq_ex XRC", ibv_create_srq_ex(ctx, &sia));
	struct ibv_qp_init_attr xa = {.send_cq = c.cq, .recv_cq = c.cq, .qp_type = IBV_QPT_XRC_SEND,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	errno = 0;
	unsupported("create_qp XRC_SEND", ibv_create_qp(pd, &xa));
	xa.qp_type = IBV_QPT_RAW_PACKET;
	errno = 0;
	unsupported("create_qp RAW_PACKET", ibv_create_qp(pd, &xa));
	/* DC QPs are a driver QP type (mlx5dv_create_qp makes them). */
	struct ibv_qp_init_attr_ex qia = {.send_cq = c.cq, .recv_cq = c.cq, .qp_type = IBV_QPT_DRIVER, .pd = pd,
					  .comp_mask = IBV_QP_INIT_ATTR_PD,
					  .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	errno = 0;
	unsupported("create_qp_ex DRIVER (DC)", ibv_create_qp_ex(ctx, &qia));
	/* ATOMIC WRITE: rxe's provider takes the flag, goroce has no such
	 * operation. */
	qia.qp_type = IBV_QPT_RC;
	qia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE;
	errno = 0;
	unsupported("create_qp_ex for ibv_wr_atomic_write", ibv_create_qp_ex(ctx, &qia));
	printf("qp_to_qp_ex of an ibv_create_qp QP: %s\n", ibv_qp_to_qp_ex(c.qp) ? "a qp_ex" : "NULL");
	struct ibv_cq_init_attr_ex cqa = {.cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	errno = 0;
	unsupported("create_cq_ex with completion timestamps", ibv_create_cq_ex(ctx, &cqa));
	printf("resize_cq: %s\n", errname(ibv_resize_cq(c.cq, 64)));
	errno = 0;
	unsupported("reg_mr ON_DEMAND (ODP)", ibv_reg_mr(pd, bufa, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND));
	struct ibv_sge asge = {(uintptr_t)bufa, 4096, mra->lkey};
	printf("advise_mr (ODP): %s\n", errname(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &asge, 1)));
	errno = 0;
	unsupported("reg_dmabuf_mr", ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE));
	struct ibv_flow_attr fa = {.size = sizeof fa, .type = IBV_FLOW_ATTR_NORMAL, .port = 1};
	errno = 0;
	unsupported("create_flow", ibv_create_flow(c.qp, &fa));
	struct ibv_counters_init_attr cia = {0};
	errno = 0;
	unsupported("create_counters", ibv_create_counters(ctx, &cia));
	struct ibv_alloc_dm_attr dma = {.length = 64};
	errno = 0;
	unsupported("alloc_dm", ibv_alloc_dm(ctx, &dma));
	struct ibv_td_init_attr tda = {0};
	errno = 0;
	unsupported("alloc_td", ibv_alloc_td(ctx, &tda));
	struct ibv_wq_init_attr wqa = {.wq_type = IBV_WQT_RQ, .max_wr = 1, .max_sge = 1, .pd = pd, .cq = c.cq};
	errno = 0;
	unsupported("create_wq", ibv_create_wq(ctx, &wqa));
	printf("attach_mcast: %s\n", errname(ibv_attach_mcast(u1.qp, &gid, 0)));

	/* Fork: a child that execs runs; one that calls a verb gets ENODEV. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("forked child that execs: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		errno = 0;
		struct ibv_pd *p = ibv_alloc_pd(ctx);
		printf("alloc_pd in a forked child: %s\n", p ? "ok" : errname(errno));
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	errno = 0;
	struct ibv_pd *p2 = ibv_alloc_pd(ctx);
	printf("alloc_pd in the parent after fork: %s\n", p2 ? "ok" : errname(errno));
	printf("dealloc_pd of a PD with MRs: %s\n", errname(ibv_dealloc_pd(pd)));
	return 0;
}
