/*
 * ext_qp: the extended verbs and memory windows between two processes, as
 * rxe has them, data checked both ways. One program plays both roles: run
 * it as the server (no address), and as the client with the server's
 * address; they meet on a TCP side channel (-p, default 18600), trade
 * their QPs, and each in turn is the sender while the other is the target:
 *
 *   - RC through the ibv_wr_* API (ibv_create_qp_ex with send_ops_flags):
 *     SEND, SEND_WITH_IMM over an SGE list, RDMA WRITE of three packets,
 *     WRITE_WITH_IMM of inline data, a SEND of an inline data list, and an
 *     ibv_post_send WRITE on the same QP; RDMA READ, FETCH_ADD and
 *     CMP_AND_SWP; completions read with the ibv_cq_ex poll API
 *     (ibv_start_poll, ibv_next_poll, ibv_end_poll, ibv_wc_read_*);
 *   - UC (SEND, WRITE, WRITE_WITH_IMM) and UD (SEND, SEND_WITH_IMM through
 *     ibv_wr_set_ud_addr), UD's completions read with ibv_poll_cq on the
 *     same CQ (ibv_cq_ex_to_cq);
 *   - memory windows over an MR registered with LOCAL_WRITE|MW_BIND only,
 *     granting REMOTE_WRITE: a type-1 window bound with ibv_bind_mw,
 *     WRITten through, unbound by a bind of length 0 (a WRITE through it
 *     then fails with IBV_WC_REM_ACCESS_ERR and leaves the memory as it
 *     was), and bound again; a type-2 window bound by IBV_WR_BIND_MW with
 *     ibv_post_send and invalidated by IBV_WR_LOCAL_INV; a type-2 window
 *     bound by ibv_wr_bind_mw and invalidated by the peer's
 *     ibv_wr_send_inv (the receive says IBV_WC_WITH_INV and the rkey); a
 *     type-2 bind of length 0 (IBV_WC_MW_BIND_ERR, o10-37.2.40).
 *
 * Before connecting, each side prints "api: NAME: RESULT" lines for the
 * extended verbs' answers to calls that must fail or that report the
 * device (errno values, NULL accessors, ibv_query_gid_ex, ...): the same
 * program on rxe and on goroce must print the same lines. Each check of
 * the exchange prints "check NAME: ok" or "check NAME: FAIL (why)"; at
 * the end "wire: ..." says how many request packets this side sent and
 * how many READ response packets, atomic ACKs and NAKs it asked of the
 * peer, for a capture to be checked against, and "result: N checks, F
 * failed". The exit status is 0 only when no check failed.
 *
 * rdma-core 44's rxe provider (Debian 12's, the lab's) has two bugs its
 * later versions fixed: ibv_next_poll that finds nothing moves the CQ's
 * consumer index on and unlocks it, and ibv_end_poll does both again
 * (b78b414e, 5e7aa410); and ibv_wr_set_inline_data_list posts a length of
 * 0 (1e8ed0af). On an rxe device this program therefore reads one
 * completion per ibv_start_poll, and posts the inline list as one buffer
 * of the same bytes: the packets are the same.
 *
 * Built by the tests with gcc -O2 -Wall -Werror ... -libverbs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define DIE(...)                                      \
	do {                                          \
		fprintf(stderr, "ext_qp: " __VA_ARGS__); \
		fputc('\n', stderr);                  \
		exit(2);                              \
	} while (0)

static int checks, failed;

/* check records one check: ok, or FAIL with why. */
static void check(int ok, const char *name, const char *fmt, ...)
{
	checks++;
	if (ok) {
		printf("check %s: ok\n", name);
	} else {
		va_list ap;
		failed++;
		printf("check %s: FAIL (", name);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf(")\n");
	}
	fflush(stdout);
}

static const char *errname(int e)
{
	static char b[32];
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENODATA: return "ENODATA";
	case ENOSPC: return "ENOSPC";
	case ENOMEM: return "ENOMEM";
	case ENOENT: return "ENOENT";
	}
	snprintf(b, sizeof b, "errno %d", e);
	return b;
}

/* ---- the device ---- */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq_ex *cq;
static union ibv_gid gid;
static int gidx, mtu = 1024, rxe;
static enum ibv_mtu path_mtu = IBV_MTU_1024;

/* The QPs: RC, UC, UD, then per round the four RC QPs of the memory
 * window checks (each ends in ERR by design). */
enum { Q_RC, Q_UC, Q_UD, Q_MW, NQP = Q_MW + 2 * 4 };
static struct ibv_qp *qps[NQP];
static struct ibv_qp_ex *qpx[NQP];
#define QKEY 0x11111111u

/* The memory: buf, the target of the peer's requests; sbuf, this side's
 * source and sink; mwbuf, registered with LOCAL_WRITE|MW_BIND only, behind
 * the windows. */
enum { BUF = 64 << 10, SBUF = 32 << 10, MWBUF = 16 << 10 };
static uint8_t *buf, *sbuf, *mwbuf;
static struct ibv_mr *mr, *smr, *mwmr;

/* Offsets in buf (the target's) and sbuf (the sender's). */
enum {
	T_RECV = 0,          /* four RC receives of 2048 */
	T_WRITE3000 = 8192,  /* RDMA WRITE of 3000 */
	T_WIMM = 12288,      /* WRITE_WITH_IMM of 48 inline bytes */
	T_W1024 = 13312,     /* the ibv_post_send WRITE of 1024 */
	T_READSRC = 16384,   /* 2500 bytes the sender READs */
	T_SLOT = 20480,      /* the atomics' 8 bytes */
	T_UCRECV = 24576,    /* one UC receive of 2048 (the second at +2048) */
	T_UCWIMM = 28672,    /* UC WRITE_WITH_IMM of 900 */
	T_UCW = 30720,       /* UC WRITE of 500 */
	T_UDRECV = 32768,    /* two UD receives of 40 + 1024 */
	T_INVRECV = 36864,   /* the receive of SEND_WITH_INV */
	S_SEND = 0, S_SGE1 = 1024, S_SGE2 = 2048, S_W3000 = 4096, S_W1024 = 8192, S_READ = 12288, S_ATOM = 16384,
	S_UC = 17408, S_UD = 20480, S_MW = 24576,
};
/* Windows in mwbuf: type 1 (then bound again at MW1B), type 2 by
 * ibv_post_send, type 2 by ibv_wr_bind_mw. */
enum { MW1 = 0, MW1_LEN = 4096, MW1B = 4096, MW2 = 8192, MW3 = 12288, MW23_LEN = 1024 };

/* pat is byte i of the pattern of seed. */
static uint8_t pat(int seed, int i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 8) + 1); }
static void fill(uint8_t *p, int n, int seed)
{
	for (int i = 0; i < n; i++)
		p[i] = pat(seed, i);
}
static int same(const uint8_t *p, int n, int seed)
{
	for (int i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return 0;
	return 1;
}

/* What this side puts on the wire, and asks of the peer's (the "wire:"
 * line). */
static int w_requests, w_read_responses, w_atomic_acks, w_naks;
static int pkts(int len) { return len <= mtu ? 1 : (len + mtu - 1) / mtu; }

/* ---- the side channel ---- */

static int sock = -1;

/* The peer's, from its struct info. */
static uint64_t peer_buf, peer_mwbuf;
static uint32_t peer_rkey, peer_qpn[NQP];
static uint8_t peer_gid[16];

struct info {
	uint8_t gid[16];
	uint32_t qpn[NQP], psn[NQP];
	uint64_t buf, mwbuf;
	uint32_t rkey;
};

struct msg {
	char tag[16];
	uint64_t v[4];
};

static void put(const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = write(sock, c, n);
		if (w <= 0)
			DIE("side channel write: %s", strerror(errno));
		c += w, n -= (size_t)w;
	}
}

static void get(void *p, size_t n)
{
	for (char *c = p; n;) {
		ssize_t r = read(sock, c, n);
		if (r <= 0)
			DIE("side channel read: %s", r ? strerror(errno) : "the peer closed it");
		c += r, n -= (size_t)r;
	}
}

static void send_msg(const char *tag, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	struct msg m = {.v = {a, b, c, d}};
	snprintf(m.tag, sizeof m.tag, "%s", tag);
	put(&m, sizeof m);
}

static struct msg expect_msg(const char *tag)
{
	struct msg m;
	get(&m, sizeof m);
	if (strncmp(m.tag, tag, sizeof m.tag))
		DIE("side channel: got %.16s, want %s", m.tag, tag);
	return m;
}

static void side_channel(const char *server, int port)
{
	if (!server) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1))
			DIE("listen on port %d: %s", port, strerror(errno));
		sock = accept(l, NULL, NULL);
		close(l);
		if (sock < 0)
			DIE("accept: %s", strerror(errno));
		return;
	}
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	if (getaddrinfo(server, ps, &hints, &res))
		DIE("resolve %s", server);
	sock = socket(AF_INET, SOCK_STREAM, 0);
	if (sock < 0 || connect(sock, res->ai_addr, res->ai_addrlen)) {
		fprintf(stderr, "ext_qp: Couldn't connect to %s:%d\n", server, port);
		exit(1);
	}
	freeaddrinfo(res);
}

/* ---- completions ---- */

struct wc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, imm, inv, qp_num, src_qp, wc_flags;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* read_ex records the ibv_cq_ex's current completion. */
static void read_ex(struct wc *w)
{
	*w = (struct wc){.wr_id = cq->wr_id, .status = cq->status, .opcode = ibv_wc_read_opcode(cq),
			 .byte_len = ibv_wc_read_byte_len(cq), .qp_num = ibv_wc_read_qp_num(cq),
			 .src_qp = ibv_wc_read_src_qp(cq), .wc_flags = ibv_wc_read_wc_flags(cq)};
	/* One field: the immediate data (network order) or the rkey. */
	w->imm = ntohl(ibv_wc_read_imm_data(cq));
	w->inv = ibv_wc_read_invalidated_rkey(cq);
}

/* collect takes n completions, with the ibv_cq_ex poll API or, classic,
 * with ibv_poll_cq on the same CQ, within 30 s. */
static void collect(struct wc *out, int n, int classic, const char *what)
{
	int got = 0;
	double end = now() + 30;
	while (got < n) {
		if (now() > end)
			DIE("%s: %d of %d completions within 30 s", what, got, n);
		if (classic) {
			struct ibv_wc w;
			int r = ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &w);
			if (r < 0)
				DIE("%s: ibv_poll_cq failed", what);
			if (r == 1) {
				out[got] = (struct wc){.wr_id = w.wr_id, .status = w.status, .opcode = w.opcode,
						       .byte_len = w.byte_len, .qp_num = w.qp_num, .src_qp = w.src_qp,
						       .wc_flags = w.wc_flags};
				out[got].imm = ntohl(w.imm_data);
				out[got].inv = w.invalidated_rkey;
				got++;
			}
			continue;
		}
		struct ibv_poll_cq_attr attr = {0};
		int r = ibv_start_poll(cq, &attr);
		if (r == ENOENT)
			continue;
		if (r)
			DIE("%s: ibv_start_poll: %s", what, errname(r));
		read_ex(&out[got++]);
		/* rdma-core 44's rxe: no ibv_next_poll that may find nothing. */
		while (!rxe && got < n && (r = ibv_next_poll(cq)) == 0)
			read_ex(&out[got++]);
		if (!rxe && got < n && r != ENOENT)
			DIE("%s: ibv_next_poll: %s", what, errname(r));
		ibv_end_poll(cq);
	}
}

/* find is the completion of wr_id among n, or NULL. */
static const struct wc *find(const struct wc *w, int n, uint64_t wr_id)
{
	for (int i = 0; i < n; i++)
		if (w[i].wr_id == wr_id)
			return &w[i];
	return NULL;
}

/* checkwc checks the completion of wr_id among n for status, and for a
 * successful one the opcode: an error completion's opcode is undefined
 * (rxe gives 0, goroce the WR's). */
static const struct wc *checkwc(const char *name, const struct wc *w, int n, uint64_t wr_id,
				enum ibv_wc_status status, enum ibv_wc_opcode opcode)
{
	const struct wc *c = find(w, n, wr_id);
	if (!c) {
		check(0, name, "no completion of wr_id %llu", (unsigned long long)wr_id);
		return NULL;
	}
	check(c->status == status && (status != IBV_WC_SUCCESS || c->opcode == opcode), name,
	      "status %s opcode %d, want %s opcode %d", ibv_wc_status_str(c->status), c->opcode,
	      ibv_wc_status_str(status), opcode);
	return c;
}

/* ---- QPs ---- */

static struct ibv_qp *create_qp(enum ibv_qp_type type, uint64_t ops, struct ibv_qp_ex **x, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq), .qp_type = type, .pd = pd,
		.cap = {.max_send_wr = 32, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 1, .max_inline_data = 64},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .send_ops_flags = ops};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
	if (!qp)
		DIE("ibv_create_qp_ex type %d: %s", type, strerror(errno));
	if (!(*x = ibv_qp_to_qp_ex(qp)))
		DIE("ibv_qp_to_qp_ex gave NULL");
	if (cap)
		*cap = a.cap;
	return qp;
}

static const uint64_t rc_ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
static const uint64_t uc_ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_BIND_MW;
static const uint64_t ud_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	int r = ibv_modify_qp(qp, a, mask);
	if (r)
		DIE("modify QP %#x to %s: %s", qp->qp_num, what, errname(r));
}

static void connect_qp(int i, const struct info *peer)
{
	struct ibv_qp *qp = qps[i];
	enum ibv_qp_type t = qp->qp_type;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (t == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (t == IBV_QPT_RC)
			a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	modify(qp, &a, mask, "INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (t != IBV_QPT_UD) {
		a.path_mtu = path_mtu;
		a.dest_qp_num = peer->qpn[i];
		a.rq_psn = peer->psn[i];
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		a.ah_attr.grh.sgid_index = gidx;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (t == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	modify(qp, &a, mask, "RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = (i * 1000 + 123) & 0xffffff;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (t == IBV_QPT_RC) {
		a.timeout = 18;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	modify(qp, &a, mask, "RTS");
}

static void post_recv(int q, uint64_t wr_id, uint8_t *p, int n)
{
	struct ibv_sge s = {(uintptr_t)p, (uint32_t)n, mr->lkey};
	struct ibv_recv_wr w = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad;
	if (ibv_post_recv(qps[q], &w, &bad))
		DIE("post_recv on QP %d", q);
}

/* write posts an ibv_post_send RDMA WRITE of n bytes of sbuf at off. */
static void write_to(int q, uint64_t wr_id, int off, int n, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge s = {(uintptr_t)sbuf + off, (uint32_t)n, smr->lkey};
	struct ibv_send_wr w = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED}, *bad;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	if (ibv_post_send(qps[q], &w, &bad))
		DIE("post WRITE on QP %d", q);
	w_requests += pkts(n);
}

/* ---- the api lines ---- */

static void api(const char *name, const char *fmt, ...)
{
	va_list ap;
	printf("api: %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static const char *obj_errno(const void *obj)
{
	return obj ? "ok" : errname(errno);
}

static void api_checks(void)
{
	/* ibv_create_cq_ex: fields rxe does not read, flags it refuses, and
	 * the accessors a CQ gets as asked. */
	struct ibv_cq_init_attr_ex ca = {.cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	struct ibv_cq_ex *c;
	errno = 0;
	api("create_cq_ex with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP", "%s", obj_errno(c = ibv_create_cq_ex(ctx, &ca)));
	ca.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
	errno = 0;
	api("create_cq_ex with IBV_WC_EX_WITH_FLOW_TAG", "%s", obj_errno(ibv_create_cq_ex(ctx, &ca)));
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
	ca.cqe = 0;
	errno = 0;
	api("create_cq_ex with cqe 0", "%s", obj_errno(ibv_create_cq_ex(ctx, &ca)));
	ca.cqe = 4;
	ca.comp_vector = 7;
	errno = 0;
	api("create_cq_ex with comp_vector 7", "%s", obj_errno(ibv_create_cq_ex(ctx, &ca)));
	ca.comp_vector = 0;
	ca.wc_flags = 0;
	errno = 0;
	c = ibv_create_cq_ex(ctx, &ca);
	api("create_cq_ex without wc_flags", "%s, read_opcode set %d, read_wc_flags set %d, read_byte_len NULL %d, "
	    "read_imm_data NULL %d, read_qp_num NULL %d", obj_errno(c), c && c->read_opcode, c && c->read_wc_flags,
	    c && !c->read_byte_len, c && !c->read_imm_data, c && !c->read_qp_num);
	struct ibv_poll_cq_attr pa = {0};
	if (c) {
		errno = 0;
		int r = ibv_start_poll(c, &pa);
		api("start_poll on an empty CQ", "%s, errno %s", errname(r), errname(errno));
		api("destroy_cq of a cq_ex", "%s", errname(ibv_destroy_cq(ibv_cq_ex_to_cq(c))));
	}

	/* ibv_create_qp_ex: send_ops_flags the QP type does not take, and
	 * what else rxe refuses. */
	struct ibv_qp_init_attr_ex qa = {.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
					 .qp_type = IBV_QPT_UD, .pd = pd,
					 .cap = {.max_send_wr = 15, .max_recv_wr = 1, .max_send_sge = 2, .max_recv_sge = 1},
					 .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					 .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE};
	errno = 0;
	api("create_qp_ex UD with IBV_QP_EX_WITH_RDMA_WRITE", "%s", obj_errno(ibv_create_qp_ex(ctx, &qa)));
	qa.qp_type = IBV_QPT_UC;
	qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
	errno = 0;
	api("create_qp_ex UC with IBV_QP_EX_WITH_RDMA_READ", "%s", obj_errno(ibv_create_qp_ex(ctx, &qa)));
	qa.qp_type = IBV_QPT_RC;
	qa.send_ops_flags = IBV_QP_EX_WITH_TSO;
	errno = 0;
	api("create_qp_ex RC with IBV_QP_EX_WITH_TSO", "%s", obj_errno(ibv_create_qp_ex(ctx, &qa)));
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
	qa.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	qa.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	errno = 0;
	api("create_qp_ex with IBV_QP_CREATE_SCATTER_FCS", "%s", obj_errno(ibv_create_qp_ex(ctx, &qa)));
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	qa.max_tso_header = 64;
	errno = 0;
	api("create_qp_ex with IBV_QP_INIT_ATTR_MAX_TSO_HEADER", "%s", obj_errno(ibv_create_qp_ex(ctx, &qa)));

	/* A QP of ibv_create_qp has no ibv_qp_ex; one of ibv_create_qp_ex
	 * has the builders it asked for and every setter. */
	struct ibv_qp_init_attr ia = {.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
				      .qp_type = IBV_QPT_RC, .cap = {.max_send_wr = 1, .max_recv_wr = 1,
								     .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *plain = ibv_create_qp(pd, &ia);
	api("qp_to_qp_ex of an ibv_create_qp QP", "%s", plain && !ibv_qp_to_qp_ex(plain) ? "NULL" : "not NULL");
	if (plain)
		ibv_destroy_qp(plain);
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.qp_type = IBV_QPT_UC;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
	qa.cap.max_inline_data = 16;
	struct ibv_qp *q = ibv_create_qp_ex(ctx, &qa);
	struct ibv_qp_ex *x = q ? ibv_qp_to_qp_ex(q) : NULL;
	api("create_qp_ex UC with IBV_QP_EX_WITH_SEND",
	    "%s, qp_ex %d, wr_send set %d, wr_rdma_write NULL %d, wr_set_sge set %d, wr_set_ud_addr set %d", obj_errno(q),
	    x == (struct ibv_qp_ex *)q, x && x->wr_send, x && !x->wr_rdma_write, x && x->wr_set_sge,
	    x && x->wr_set_ud_addr);
	if (x) {
		/* Batches ibv_wr_complete refuses before posting anything, on a
		 * QP in RESET: data beyond max_inline_data, SGEs beyond
		 * max_send_sge, more WRs than the send queue holds. */
		char data[512] = {0};
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_set_inline_data(x, data, qa.cap.max_inline_data + 1);
		api("wr_complete with inline data beyond max_inline_data", "%s", errname(ibv_wr_complete(x)));
		struct ibv_sge sg[64];
		for (int i = 0; i < 64; i++)
			sg[i] = (struct ibv_sge){(uintptr_t)sbuf, 8, smr->lkey};
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_set_sge_list(x, qa.cap.max_send_sge + 1, sg);
		api("wr_complete with SGEs beyond max_send_sge", "%s", errname(ibv_wr_complete(x)));
		ibv_wr_start(x);
		for (uint32_t i = 0; i <= qa.cap.max_send_wr; i++) {
			ibv_wr_send(x);
			ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf, 8);
		}
		api("wr_complete with max_send_wr + 1 WRs", "max_send_wr %u, %s", qa.cap.max_send_wr,
		    errname(ibv_wr_complete(x)));
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_abort(x);
		api("wr_abort", "done");
		ibv_destroy_qp(q);
	}

	/* ibv_query_device_ex, the GID entry queries, the fork status,
	 * ibv_query_qp_data_in_order. */
	struct ibv_device_attr_ex dx;
	int r = ibv_query_device_ex(ctx, NULL, &dx);
	api("query_device_ex", "%s, phys_port_cnt_ex = phys_port_cnt %d, device_cap_flags_ex = device_cap_flags %d, "
	    "memory windows %d", errname(r), !r && dx.phys_port_cnt_ex == dx.orig_attr.phys_port_cnt,
	    !r && dx.device_cap_flags_ex == dx.orig_attr.device_cap_flags,
	    !r && (dx.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	api("query_device_ex with comp_mask 1", "%s", errname(ibv_query_device_ex(ctx, &in, &dx)));
	struct ibv_port_attr port;
	if (ibv_query_port(ctx, 1, &port))
		DIE("query_port");
	struct ibv_gid_entry e;
	r = ibv_query_gid_ex(ctx, 1, gidx, &e, 0);
	api("query_gid_ex of the -g index", "%s, the GID of ibv_query_gid %d, RoCE v2 %d, port 1 %d, an interface %d",
	    errname(r), !r && !memcmp(e.gid.raw, gid.raw, 16), !r && e.gid_type == IBV_GID_TYPE_ROCE_V2,
	    !r && e.port_num == 1, !r && e.ndev_ifindex != 0);
	api("query_gid_ex of index 100", "%s", errname(ibv_query_gid_ex(ctx, 1, 100, &e, 0)));
	api("query_gid_ex of index gid_tbl_len", "%s", errname(ibv_query_gid_ex(ctx, 1, port.gid_tbl_len, &e, 0)));
	api("query_gid_ex of port 2", "%s", errname(ibv_query_gid_ex(ctx, 2, 0, &e, 0)));
	api("query_gid_ex with flags 1", "%s", errname(ibv_query_gid_ex(ctx, 1, gidx, &e, 1)));
	union ibv_gid g;
	memset(&g, 0xab, sizeof g);
	r = ibv_query_gid(ctx, 1, 100, &g);
	static const uint8_t zero[16];
	api("query_gid of index 100", "%d, zero GID %d", r, !memcmp(g.raw, zero, 16));
	struct ibv_gid_entry tab[64];
	ssize_t n = ibv_query_gid_table(ctx, tab, 64, 0);
	int has = 0, all_v2 = 1;
	for (ssize_t i = 0; i < n; i++) {
		has |= tab[i].gid_index == (uint32_t)gidx && !memcmp(tab[i].gid.raw, gid.raw, 16);
		all_v2 &= tab[i].gid_type == IBV_GID_TYPE_ROCE_V2;
	}
	api("query_gid_table", "at least one %d, the -g entry %d, all RoCE v2 %d", n >= 1, has, all_v2);
	api("query_gid_table with flags 1", "%zd", ibv_query_gid_table(ctx, tab, 64, 1));
	api("query_gid_table with room for none", "%zd", ibv_query_gid_table(ctx, tab, 0, 0));
	api("is_fork_initialized", "%s", ibv_is_fork_initialized() == IBV_FORK_UNNEEDED ? "IBV_FORK_UNNEEDED" : "other");
	api("query_qp_data_in_order RC WRITE", "%d", ibv_query_qp_data_in_order(qps[Q_RC], IBV_WR_RDMA_WRITE, 0));
}

/* ---- one round: this side the sender, or the target ---- */

static int round_no;
static struct ibv_mw *mw1, *mw2, *mw3, *mw4;

/* bind2 posts the type-2 bind of mw on QP q with ibv_post_send, as an
 * IBV_WR_BIND_MW work request, and gives the new rkey. */
static uint32_t bind2_post(int q, struct ibv_mw *mw, uint64_t wr_id, uint64_t addr, uint64_t len)
{
	struct ibv_send_wr w = {.wr_id = wr_id, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
	w.bind_mw.mw = mw;
	w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = mwmr, .addr = addr, .length = len,
							.mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
	int r = ibv_post_send(qps[q], &w, &bad);
	if (r)
		DIE("post IBV_WR_BIND_MW: %s", errname(r));
	return w.bind_mw.rkey;
}

static void target(void)
{
	int r0 = round_no, mwq = Q_MW + 4 * r0;
	char name[96];
	struct wc w[16];
	/* Receives for the sender's SENDs, its READ source and atomic slot. */
	for (int i = 0; i < 4; i++)
		post_recv(Q_RC, 100 + i, buf + T_RECV + i * 2048, 2048);
	post_recv(Q_UC, 110, buf + T_UCRECV, 2048);
	post_recv(Q_UC, 111, buf + T_UCRECV + 2048, 2048);
	post_recv(Q_UD, 120, buf + T_UDRECV, 40 + 1024);
	post_recv(Q_UD, 121, buf + T_UDRECV + 2048, 40 + 1024);
	post_recv(mwq + 2, 130, buf + T_INVRECV, 256);
	fill(buf + T_READSRC, 2500, 40 + r0);
	uint64_t v0 = 1000 + 7 * (uint64_t)r0;
	memcpy(buf + T_SLOT, &v0, 8);
	memset(mwbuf, 0, MWBUF);

	/* The windows: type 1 with ibv_bind_mw (access as rdma-core's own
	 * tests give it: REMOTE_WRITE|LOCAL_WRITE); type 2 with
	 * IBV_WR_BIND_MW; type 2 with ibv_wr_bind_mw. */
	if (!(mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1)) || !(mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2)) ||
	    !(mw3 = ibv_alloc_mw(pd, IBV_MW_TYPE_2)) || !(mw4 = ibv_alloc_mw(pd, IBV_MW_TYPE_2)))
		DIE("alloc_mw: %s", strerror(errno));
	uint32_t before = mw1->rkey;
	struct ibv_mw_bind b = {.wr_id = 140, .send_flags = IBV_SEND_SIGNALED,
				.bind_info = {.mr = mwmr, .addr = (uintptr_t)mwbuf + MW1, .length = MW1_LEN,
					      .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE}};
	int r = ibv_bind_mw(qps[Q_RC], mw1, &b);
	check(r == 0, "ibv_bind_mw type 1", "%s", errname(r));
	uint32_t rkey2 = bind2_post(mwq + 1, mw2, 141, (uintptr_t)mwbuf + MW2, MW23_LEN);
	uint32_t rkey3 = ibv_inc_rkey(mw3->rkey);
	struct ibv_mw_bind_info bi = {.mr = mwmr, .addr = (uintptr_t)mwbuf + MW3, .length = MW23_LEN,
				      .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
	struct ibv_qp_ex *x3 = qpx[mwq + 2];
	ibv_wr_start(x3);
	x3->wr_id = 142;
	x3->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x3, mw3, rkey3, &bi);
	r = ibv_wr_complete(x3);
	check(r == 0, "ibv_wr_bind_mw type 2: wr_complete", "%s", errname(r));
	collect(w, 3, 0, "the binds");
	checkwc("ibv_bind_mw type 1 over LOCAL_WRITE|MW_BIND granting REMOTE_WRITE", w, 3, 140, IBV_WC_SUCCESS,
		IBV_WC_BIND_MW);
	check(mw1->rkey == ibv_inc_rkey(before), "ibv_bind_mw gives the window ibv_inc_rkey of its rkey", "%#x -> %#x",
	      before, mw1->rkey);
	checkwc("IBV_WR_BIND_MW type 2 with ibv_post_send", w, 3, 141, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	checkwc("ibv_wr_bind_mw type 2", w, 3, 142, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	uint32_t rkey1 = mw1->rkey;
	send_msg("ready", rkey1, rkey2, rkey3, v0);

	/* The sender's operations have landed. */
	expect_msg("phase1");
	collect(w, 8, 0, "the receives");
	const struct wc *c;
	if ((c = checkwc("RC receive of wr_send", w, 8, 100, IBV_WC_SUCCESS, IBV_WC_RECV)))
		check(c->byte_len == 1000 && same(buf + T_RECV, 1000, 10 + r0) && c->qp_num == qps[Q_RC]->qp_num,
		      "RC wr_send data", "byte_len %u", c->byte_len);
	if ((c = checkwc("RC receive of wr_send_imm over wr_set_sge_list", w, 8, 101, IBV_WC_SUCCESS, IBV_WC_RECV)))
		check(c->byte_len == 1200 && (c->wc_flags & IBV_WC_WITH_IMM) && c->imm == 0x1000u + r0 &&
			      same(buf + T_RECV + 2048, 600, 11 + r0) && same(buf + T_RECV + 2048 + 600, 600, 12 + r0),
		      "RC wr_send_imm data and immediate", "byte_len %u imm %#x flags %#x", c->byte_len, c->imm,
		      c->wc_flags);
	if ((c = checkwc("RC receive of wr_rdma_write_imm (inline)", w, 8, 102, IBV_WC_SUCCESS,
			 IBV_WC_RECV_RDMA_WITH_IMM)))
		check((c->wc_flags & IBV_WC_WITH_IMM) && c->imm == 0x2000u + r0 && same(buf + T_WIMM, 48, 14 + r0),
		      "RC wr_rdma_write_imm inline data and immediate", "imm %#x flags %#x", c->imm, c->wc_flags);
	if ((c = checkwc("RC receive of wr_send with wr_set_inline_data_list", w, 8, 103, IBV_WC_SUCCESS,
			 IBV_WC_RECV)))
		check(c->byte_len == 50 && same(buf + T_RECV + 3 * 2048, 50, 15 + r0), "RC inline data list data",
		      "byte_len %u", c->byte_len);
	check(same(buf + T_WRITE3000, 3000, 13 + r0), "RC wr_rdma_write of 3 packets data", "differs");
	check(same(buf + T_W1024, 1024, 16 + r0), "RC ibv_post_send WRITE between ibv_wr_* batches data", "differs");
	uint64_t v;
	memcpy(&v, buf + T_SLOT, 8);
	check(v == 0xabcdef00u + r0, "RC wr_atomic_cmp_swp swapped the slot", "%#llx", (unsigned long long)v);
	if ((c = checkwc("UC receive of wr_send", w, 8, 110, IBV_WC_SUCCESS, IBV_WC_RECV)))
		check(c->byte_len == 700 && same(buf + T_UCRECV, 700, 20 + r0), "UC wr_send data", "byte_len %u",
		      c->byte_len);
	if ((c = checkwc("UC receive of wr_rdma_write_imm", w, 8, 111, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM)))
		check(c->imm == 0x3000u + r0 && same(buf + T_UCWIMM, 900, 22 + r0) && same(buf + T_UCW, 500, 21 + r0),
		      "UC wr_rdma_write and wr_rdma_write_imm data", "imm %#x", c->imm);
	if ((c = checkwc("UD receive of wr_send (wr_set_ud_addr)", w, 8, 120, IBV_WC_SUCCESS, IBV_WC_RECV)))
		check(c->byte_len == 40 + 300 && (c->wc_flags & IBV_WC_GRH) && c->src_qp != 0 &&
			      same(buf + T_UDRECV + 40, 300, 30 + r0),
		      "UD wr_send data, GRH and source QP", "byte_len %u flags %#x src_qp %#x", c->byte_len,
		      c->wc_flags, c->src_qp);
	if ((c = checkwc("UD receive of wr_send_imm (inline)", w, 8, 121, IBV_WC_SUCCESS, IBV_WC_RECV)))
		check(c->byte_len == 40 + 64 && (c->wc_flags & IBV_WC_WITH_IMM) && c->imm == 0x4000u + r0 &&
			      same(buf + T_UDRECV + 2048 + 40, 64, 31 + r0),
		      "UD wr_send_imm data and immediate", "byte_len %u imm %#x", c->byte_len, c->imm);
	check(same(mwbuf + MW1, 2000, 50 + r0), "WRITE through the type-1 window data", "differs");
	check(same(mwbuf + MW2, 256, 51 + r0), "WRITE through the type-2 window (IBV_WR_BIND_MW) data", "differs");
	check(same(mwbuf + MW3, 256, 52 + r0), "WRITE through the type-2 window (ibv_wr_bind_mw) data", "differs");

	/* Unbind the type-1 window (a bind of length 0; with its MR, which
	 * rdma-core 44's rxe provider reads even then), invalidate the first
	 * type-2 window (IBV_WR_LOCAL_INV through ibv_wr_local_inv), and bind
	 * a type-2 window with length 0 (o10-37.2.40). */
	b = (struct ibv_mw_bind){.wr_id = 150, .send_flags = IBV_SEND_SIGNALED, .bind_info = {.mr = mwmr}};
	r = ibv_bind_mw(qps[Q_RC], mw1, &b);
	check(r == 0, "ibv_bind_mw of length 0", "%s", errname(r));
	struct ibv_qp_ex *x2 = qpx[mwq + 1];
	ibv_wr_start(x2);
	x2->wr_id = 151;
	x2->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(x2, rkey2);
	r = ibv_wr_complete(x2);
	check(r == 0, "ibv_wr_local_inv: wr_complete", "%s", errname(r));
	bind2_post(mwq + 3, mw4, 152, (uintptr_t)mwbuf + MW2, 0);
	collect(w, 3, 0, "unbind, LOCAL_INV and the bind of length 0");
	checkwc("ibv_bind_mw of length 0 unbinds the type-1 window", w, 3, 150, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	checkwc("IBV_WR_LOCAL_INV of the type-2 window", w, 3, 151, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	checkwc("a type-2 bind of length 0 (o10-37.2.40)", w, 3, 152, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
	send_msg("phase2", 0, 0, 0, 0);

	/* The sender's WRITEs through revoked windows failed, and its
	 * SEND_WITH_INV invalidated the third window. */
	expect_msg("phase3");
	collect(w, 1, 0, "the SEND_WITH_INV");
	/* The lab's rxe (Linux 6.1) writes the kernel's
	 * IB_WC_WITH_INVALIDATE (1 << 2) into the completion user space
	 * reads, where 1 << 2 is IBV_WC_IP_CSUM_OK: on rxe that bit stands
	 * for IBV_WC_WITH_INV. */
	if ((c = checkwc("receive of ibv_wr_send_inv", w, 1, 130, IBV_WC_SUCCESS, IBV_WC_RECV))) {
		int with_inv = c->wc_flags & IBV_WC_WITH_INV;
		if (rxe && !with_inv && (c->wc_flags & IBV_WC_IP_CSUM_OK)) {
			printf("note: rxe marked the SEND_WITH_INV receive IBV_WC_IP_CSUM_OK, not IBV_WC_WITH_INV\n");
			with_inv = 1;
		}
		check(with_inv && c->inv == rkey3 && c->byte_len == 64 && same(buf + T_INVRECV, 64, 53 + r0),
		      "ibv_wr_send_inv: IBV_WC_WITH_INV, the window's rkey, data",
		      "flags %#x rkey %#x (want %#x) byte_len %u data %d", c->wc_flags, c->inv, rkey3, c->byte_len,
		      same(buf + T_INVRECV, 64, 53 + r0));
	}
	check(same(mwbuf + MW1, 2000, 50 + r0), "memory behind the unbound type-1 window untouched", "written");
	check(same(mwbuf + MW2, 256, 51 + r0), "memory behind the invalidated type-2 window untouched", "written");
	check(same(mwbuf + MW3, 256, 52 + r0), "memory behind the peer-invalidated window untouched", "written");

	/* Bind the type-1 window again, elsewhere. */
	b = (struct ibv_mw_bind){.wr_id = 160, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = {.mr = mwmr, .addr = (uintptr_t)mwbuf + MW1B, .length = 1024,
					       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
	r = ibv_bind_mw(qps[Q_RC], mw1, &b);
	collect(w, 1, 0, "the second type-1 bind");
	checkwc("ibv_bind_mw binds the unbound type-1 window again", w, 1, 160, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	send_msg("phase4", mw1->rkey, 0, 0, 0);
	expect_msg("phase5");
	check(same(mwbuf + MW1B, 512, 54 + r0), "WRITE through the type-1 window bound again data", "differs");
	snprintf(name, sizeof name, "round %d dealloc_mw", r0 + 1);
	r = ibv_dealloc_mw(mw1) | ibv_dealloc_mw(mw2) | ibv_dealloc_mw(mw3) | ibv_dealloc_mw(mw4);
	check(r == 0, name, "%s", errname(r));
	send_msg("done", 0, 0, 0, 0);
}

static void sender(void)
{
	int r0 = round_no, mwq = Q_MW + 4 * r0;
	struct wc w[16];
	const struct wc *c;
	struct msg m = expect_msg("ready");
	uint32_t rkey1 = (uint32_t)m.v[0], rkey2 = (uint32_t)m.v[1], rkey3 = (uint32_t)m.v[2];
	uint64_t v0 = m.v[3];
	uint64_t tb = peer_buf;
	uint32_t trkey = peer_rkey;
	uint64_t tmw = peer_mwbuf;

	/* RC: one batch of ibv_wr_* builders, then an ibv_post_send WRITE. */
	struct ibv_qp_ex *x = qpx[Q_RC];
	fill(sbuf + S_SEND, 1000, 10 + r0);
	fill(sbuf + S_SGE1, 600, 11 + r0);
	fill(sbuf + S_SGE2, 600, 12 + r0);
	fill(sbuf + S_W3000, 3000, 13 + r0);
	uint8_t inl[48], l1[20], l2[30], l12[50];
	fill(inl, 48, 14 + r0);
	fill(l12, 50, 15 + r0);
	memcpy(l1, l12, 20);
	memcpy(l2, l12 + 20, 30);
	fill(sbuf + S_W1024, 1024, 16 + r0);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 1;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_SEND, 1000);
	x->wr_id = 2;
	ibv_wr_send_imm(x, htonl(0x1000u + r0));
	struct ibv_sge sg[2] = {{(uintptr_t)sbuf + S_SGE1, 600, smr->lkey}, {(uintptr_t)sbuf + S_SGE2, 600, smr->lkey}};
	ibv_wr_set_sge_list(x, 2, sg);
	x->wr_id = 3;
	ibv_wr_rdma_write(x, trkey, tb + T_WRITE3000);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_W3000, 3000);
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write_imm(x, trkey, tb + T_WIMM, htonl(0x2000u + r0));
	ibv_wr_set_inline_data(x, inl, sizeof inl);
	x->wr_id = 5;
	ibv_wr_send(x);
	if (rxe) { /* rdma-core 44's list posts 0 bytes: the same bytes as one buffer */
		ibv_wr_set_inline_data(x, l12, sizeof l12);
	} else {
		struct ibv_data_buf bl[2] = {{l1, sizeof l1}, {l2, sizeof l2}};
		ibv_wr_set_inline_data_list(x, 2, bl);
	}
	int r = ibv_wr_complete(x);
	check(r == 0, "RC ibv_wr_complete of 5 WRs", "%s", errname(r));
	memset(inl, 0, sizeof inl); /* inline data is taken by the builder */
	memset(l1, 0, sizeof l1);
	memset(l12, 0, sizeof l12);
	w_requests += pkts(1000) + pkts(1200) + pkts(3000) + pkts(48) + pkts(50);
	write_to(Q_RC, 6, S_W1024, 1024, tb + T_W1024, trkey);
	collect(w, 6, 0, "the RC batch");
	int order = 0;
	while (order < 6 && w[order].wr_id == (uint64_t)order + 1)
		order++;
	check(order == 6, "RC completions in posting order", "completion %d is wr_id %llu", order,
	      order < 6 ? (unsigned long long)w[order].wr_id : 0ull);
	checkwc("RC wr_send completion", w, 6, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	checkwc("RC wr_send_imm completion", w, 6, 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	checkwc("RC wr_rdma_write completion", w, 6, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	checkwc("RC wr_rdma_write_imm completion", w, 6, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	checkwc("RC wr_send inline list completion", w, 6, 5, IBV_WC_SUCCESS, IBV_WC_SEND);
	checkwc("RC ibv_post_send WRITE completion", w, 6, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	/* RC: READ and atomics in one batch. */
	memset(sbuf + S_READ, 0, 2500);
	memset(sbuf + S_ATOM, 0, 16);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 7;
	ibv_wr_rdma_read(x, trkey, tb + T_READSRC);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_READ, 2500);
	x->wr_id = 8;
	ibv_wr_atomic_fetch_add(x, trkey, tb + T_SLOT, 5);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_ATOM, 8);
	x->wr_id = 9;
	ibv_wr_atomic_cmp_swp(x, trkey, tb + T_SLOT, v0 + 5, 0xabcdef00u + r0);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_ATOM + 8, 8);
	r = ibv_wr_complete(x);
	check(r == 0, "RC ibv_wr_complete of READ and atomics", "%s", errname(r));
	w_requests += 3;
	w_read_responses += pkts(2500);
	w_atomic_acks += 2;
	collect(w, 3, 0, "READ and atomics");
	if ((c = checkwc("RC wr_rdma_read completion", w, 3, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_READ)))
		check(c->byte_len == 2500 && same(sbuf + S_READ, 2500, 40 + r0), "RC wr_rdma_read data",
		      "byte_len %u", c->byte_len);
	uint64_t got[2];
	memcpy(got, sbuf + S_ATOM, 16);
	if ((c = checkwc("RC wr_atomic_fetch_add completion", w, 3, 8, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD)))
		check(got[0] == v0, "RC wr_atomic_fetch_add original value", "%llu, want %llu",
		      (unsigned long long)got[0], (unsigned long long)v0);
	if ((c = checkwc("RC wr_atomic_cmp_swp completion", w, 3, 9, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP)))
		check(got[1] == v0 + 5, "RC wr_atomic_cmp_swp original value", "%llu, want %llu",
		      (unsigned long long)got[1], (unsigned long long)v0 + 5);

	/* UC: SEND, WRITE, then WRITE_WITH_IMM, whose receive on the target
	 * follows the WRITE's data (UC keeps the order). */
	x = qpx[Q_UC];
	fill(sbuf + S_UC, 700, 20 + r0);
	fill(sbuf + S_UC + 1024, 500, 21 + r0);
	fill(sbuf + S_UC + 2048, 900, 22 + r0);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 10;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_UC, 700);
	x->wr_id = 11;
	ibv_wr_rdma_write(x, trkey, tb + T_UCW);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_UC + 1024, 500);
	x->wr_id = 12;
	ibv_wr_rdma_write_imm(x, trkey, tb + T_UCWIMM, htonl(0x3000u + r0));
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_UC + 2048, 900);
	r = ibv_wr_complete(x);
	check(r == 0, "UC ibv_wr_complete", "%s", errname(r));
	w_requests += pkts(700) + pkts(500) + pkts(900);
	collect(w, 3, 0, "UC");
	checkwc("UC wr_send completion", w, 3, 10, IBV_WC_SUCCESS, IBV_WC_SEND);
	checkwc("UC wr_rdma_write completion", w, 3, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	checkwc("UC wr_rdma_write_imm completion", w, 3, 12, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	/* UD: two datagrams through wr_set_ud_addr; completions read with
	 * ibv_poll_cq. */
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
				 .grh = {.sgid_index = (uint8_t)gidx, .hop_limit = 64}};
	memcpy(aa.grh.dgid.raw, peer_gid, 16);
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	if (!ah)
		DIE("create_ah: %s", strerror(errno));
	x = qpx[Q_UD];
	fill(sbuf + S_UD, 300, 30 + r0);
	uint8_t ud2[64];
	fill(ud2, 64, 31 + r0);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 13;
	ibv_wr_send(x);
	ibv_wr_set_ud_addr(x, ah, peer_qpn[Q_UD], QKEY);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_UD, 300);
	x->wr_id = 14;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send_imm(x, htonl(0x4000u + r0));
	ibv_wr_set_ud_addr(x, ah, peer_qpn[Q_UD], QKEY);
	ibv_wr_set_inline_data(x, ud2, sizeof ud2);
	r = ibv_wr_complete(x);
	check(r == 0, "UD ibv_wr_complete", "%s", errname(r));
	w_requests += 2;
	collect(w, 2, 1, "UD");
	checkwc("UD wr_send completion (ibv_poll_cq)", w, 2, 13, IBV_WC_SUCCESS, IBV_WC_SEND);
	checkwc("UD wr_send_imm completion (ibv_poll_cq)", w, 2, 14, IBV_WC_SUCCESS, IBV_WC_SEND);
	ibv_destroy_ah(ah);

	/* WRITEs through the three windows. */
	fill(sbuf + S_MW, 2000, 50 + r0);
	write_to(Q_RC, 20, S_MW, 2000, tmw + MW1, rkey1);
	collect(w, 1, 0, "the type-1 window's WRITE");
	checkwc("WRITE through the type-1 window", w, 1, 20, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	fill(sbuf + S_MW, 256, 51 + r0);
	write_to(mwq + 1, 21, S_MW, 256, tmw + MW2, rkey2);
	collect(w, 1, 0, "the type-2 window's WRITE");
	checkwc("WRITE through the type-2 window (IBV_WR_BIND_MW)", w, 1, 21, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	fill(sbuf + S_MW, 256, 52 + r0);
	write_to(mwq + 2, 22, S_MW, 256, tmw + MW3, rkey3);
	collect(w, 1, 0, "the second type-2 window's WRITE");
	checkwc("WRITE through the type-2 window (ibv_wr_bind_mw)", w, 1, 22, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	send_msg("phase1", 0, 0, 0, 0);

	/* The windows are revoked: WRITEs through them fail, the memory
	 * behind them stays. The third is invalidated by this side's
	 * SEND_WITH_INV first. */
	expect_msg("phase2");
	fill(sbuf + S_MW, 256, 99);
	write_to(mwq + 0, 23, S_MW, 256, tmw + MW1, rkey1);
	collect(w, 1, 0, "the unbound window's WRITE");
	checkwc("WRITE through the unbound type-1 window", w, 1, 23, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	write_to(mwq + 1, 24, S_MW, 256, tmw + MW2, rkey2);
	collect(w, 1, 0, "the invalidated window's WRITE");
	checkwc("WRITE through the invalidated type-2 window", w, 1, 24, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	w_naks += 2;
	fill(sbuf + S_MW + 1024, 64, 53 + r0);
	x = qpx[mwq + 2];
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 25;
	ibv_wr_send_inv(x, rkey3);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)sbuf + S_MW + 1024, 64);
	r = ibv_wr_complete(x);
	check(r == 0, "ibv_wr_send_inv: wr_complete", "%s", errname(r));
	w_requests += 1;
	collect(w, 1, 0, "SEND_WITH_INV");
	checkwc("ibv_wr_send_inv completion", w, 1, 25, IBV_WC_SUCCESS, IBV_WC_SEND);
	write_to(mwq + 2, 26, S_MW, 256, tmw + MW3, rkey3);
	collect(w, 1, 0, "the peer-invalidated window's WRITE");
	checkwc("WRITE through the window this side invalidated", w, 1, 26, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	w_naks += 1;
	send_msg("phase3", 0, 0, 0, 0);

	m = expect_msg("phase4");
	fill(sbuf + S_MW, 512, 54 + r0);
	write_to(Q_RC, 27, S_MW, 512, tmw + MW1B, (uint32_t)m.v[0]);
	collect(w, 1, 0, "the rebound window's WRITE");
	checkwc("WRITE through the type-1 window bound again", w, 1, 27, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	send_msg("phase5", 0, 0, 0, 0);
	expect_msg("done");
}

int main(int argc, char **argv)
{
	const char *devname = NULL;
	int port = 18600, opt;
	while ((opt = getopt(argc, argv, "d:g:p:m:")) != -1) {
		switch (opt) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'm': mtu = atoi(optarg); break;
		default: DIE("usage: ext_qp [-d dev] [-g gid_index] [-p port] [-m 1024|2048|4096] [server]");
		}
	}
	const char *server = optind < argc ? argv[optind] : NULL;
	switch (mtu) {
	case 1024: path_mtu = IBV_MTU_1024; break;
	case 2048: path_mtu = IBV_MTU_2048; break;
	case 4096: path_mtu = IBV_MTU_4096; break;
	default: DIE("-m %d: want 1024, 2048 or 4096", mtu);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev || !(ctx = ibv_open_device(dev)))
		DIE("no device %s", devname ? devname : "");
	rxe = !strncmp(ibv_get_device_name(dev), "rxe", 3);
	if (rxe)
		printf("note: rxe: one completion per ibv_start_poll, the inline list as one buffer (rdma-core 44)\n");
	if (!(pd = ibv_alloc_pd(ctx)) || ibv_query_gid(ctx, 1, gidx, &gid))
		DIE("pd/gid");
	struct ibv_cq_init_attr_ex ca = {.cqe = 256,
					 .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
						     IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_SLID |
						     IBV_WC_EX_WITH_DLID_PATH_BITS};
	if (!(cq = ibv_create_cq_ex(ctx, &ca)))
		DIE("create_cq_ex: %s", strerror(errno));
	buf = aligned_alloc(4096, BUF);
	sbuf = aligned_alloc(4096, SBUF);
	mwbuf = aligned_alloc(4096, MWBUF);
	memset(buf, 0, BUF);
	memset(sbuf, 0, SBUF);
	if (!(mr = ibv_reg_mr(pd, buf, BUF,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC)) ||
	    !(smr = ibv_reg_mr(pd, sbuf, SBUF, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(mwmr = ibv_reg_mr(pd, mwbuf, MWBUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)))
		DIE("reg_mr: %s", strerror(errno));
	struct ibv_qp_cap cap;
	qps[Q_RC] = create_qp(IBV_QPT_RC, rc_ops, &qpx[Q_RC], &cap);
	if (cap.max_inline_data < 64 || cap.max_send_sge < 2)
		DIE("RC QP caps: max_inline_data %u, max_send_sge %u", cap.max_inline_data, cap.max_send_sge);
	qps[Q_UC] = create_qp(IBV_QPT_UC, uc_ops, &qpx[Q_UC], NULL);
	qps[Q_UD] = create_qp(IBV_QPT_UD, ud_ops, &qpx[Q_UD], NULL);
	for (int i = Q_MW; i < NQP; i++)
		qps[i] = create_qp(IBV_QPT_RC, rc_ops, &qpx[i], NULL);

	api_checks();

	side_channel(server, port);
	struct info mine = {.buf = (uintptr_t)buf, .mwbuf = (uintptr_t)mwbuf, .rkey = mr->rkey}, peer;
	memcpy(mine.gid, gid.raw, 16);
	for (int i = 0; i < NQP; i++) {
		mine.qpn[i] = qps[i]->qp_num;
		mine.psn[i] = (i * 1000 + 123) & 0xffffff;
	}
	put(&mine, sizeof mine);
	get(&peer, sizeof peer);
	peer_buf = peer.buf;
	peer_mwbuf = peer.mwbuf;
	peer_rkey = peer.rkey;
	memcpy(peer_gid, peer.gid, 16);
	memcpy(peer_qpn, peer.qpn, sizeof peer_qpn);
	for (int i = 0; i < NQP; i++)
		connect_qp(i, &peer);

	/* Round 1: the client sends, the server is the target; round 2 the
	 * other way. */
	for (round_no = 0; round_no < 2; round_no++) {
		if ((round_no == 0) == (server != NULL))
			sender();
		else
			target();
	}
	printf("wire: requests=%d read_responses=%d atomic_acks=%d naks=%d\n", w_requests, w_read_responses,
	       w_atomic_acks, w_naks);
	printf("result: %d checks, %d failed\n", checks, failed);
	return failed ? 1 : 0;
}
