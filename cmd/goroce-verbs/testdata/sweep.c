/*
 * sweep: every function Debian's libibverbs.so.1 and librdmacm.so.1
 * export, called preloaded on goroce0 with valid arguments and with bad
 * ones (NULL, destroyed objects, out-of-range ports and GID indexes, an
 * object of the wrong kind), each result held to what rdma-core documents
 * or returns for a device without the function. The process must survive
 * all of it.
 *
 * Each function's block is SYM(name) { ... }: it prints "ok NAME" when
 * every check in it held, "FAIL NAME: check (line, errno)" for each that
 * did not. TestSymbolSweep lists the libraries' own symbol tables and
 * requires an "ok" line for each of their functions, so a function a new
 * libibverbs adds fails the test until a block here calls it. Given names
 * as arguments, the program then prints "where NAME OBJECT" for each: the
 * file the dynamic linker finds it in (the shim, or the real library).
 *
 * Built by the tests with gcc ... -libverbs -lrdmacm.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* libibverbs' exports no installed header declares (its private driver
 * interface and marshall.h). */
struct ibv_command_buffer;
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer *link);
void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size, void *context_offset,
				    uint32_t driver_id);
int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx, const void *ops);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context, struct ibv_comp_channel *channel,
		   void *cq_context);
struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data);
void verbs_register_driver_34(const void *ops);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const void *sysfs_dev, const char *fnfmt, ...);
const char *ibv_get_sysfs_path(void);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

/* The ibv_cmd_* commands, execute_ioctl's kin: called as int f(ctx, 0...)
 * (each takes a context or an object first, then buffers). */
typedef int (*cmd_fn)(void *, void *, void *, void *, void *, void *, void *, void *);
int ibv_cmd_advise_mr(), ibv_cmd_alloc_dm(), ibv_cmd_alloc_mw(), ibv_cmd_alloc_pd(), ibv_cmd_attach_mcast(),
	ibv_cmd_close_xrcd(), ibv_cmd_create_ah(), ibv_cmd_create_counters(), ibv_cmd_create_cq(),
	ibv_cmd_create_cq_ex(), ibv_cmd_create_flow(), ibv_cmd_create_flow_action_esp(), ibv_cmd_create_qp(),
	ibv_cmd_create_qp_ex(), ibv_cmd_create_qp_ex2(), ibv_cmd_create_rwq_ind_table(), ibv_cmd_create_srq(),
	ibv_cmd_create_srq_ex(), ibv_cmd_create_wq(), ibv_cmd_dealloc_mw(), ibv_cmd_dealloc_pd(),
	ibv_cmd_dereg_mr(), ibv_cmd_destroy_ah(), ibv_cmd_destroy_counters(), ibv_cmd_destroy_cq(),
	ibv_cmd_destroy_flow(), ibv_cmd_destroy_flow_action(), ibv_cmd_destroy_qp(), ibv_cmd_destroy_rwq_ind_table(),
	ibv_cmd_destroy_srq(), ibv_cmd_destroy_wq(), ibv_cmd_detach_mcast(), ibv_cmd_free_dm(),
	ibv_cmd_get_context(), ibv_cmd_modify_cq(), ibv_cmd_modify_flow_action_esp(), ibv_cmd_modify_qp(),
	ibv_cmd_modify_qp_ex(), ibv_cmd_modify_srq(), ibv_cmd_modify_wq(), ibv_cmd_open_qp(), ibv_cmd_open_xrcd(),
	ibv_cmd_poll_cq(), ibv_cmd_post_recv(), ibv_cmd_post_send(), ibv_cmd_post_srq_recv(),
	ibv_cmd_query_context(), ibv_cmd_query_device_any(), ibv_cmd_query_mr(), ibv_cmd_query_port(),
	ibv_cmd_query_qp(), ibv_cmd_query_srq(), ibv_cmd_read_counters(), ibv_cmd_reg_dm_mr(),
	ibv_cmd_reg_dmabuf_mr(), ibv_cmd_reg_mr(), ibv_cmd_req_notify_cq(), ibv_cmd_rereg_mr(),
	ibv_cmd_resize_cq();

static const char *cur;
static int cur_bad, symbols, failed;

static int begin(const char *name)
{
	cur = name;
	cur_bad = 0;
	errno = 0;
	return 1;
}

static void end(void)
{
	symbols++;
	if (cur_bad)
		failed++;
	else
		printf("ok %s\n", cur);
	fflush(stdout);
}

/* SYM(name) { checks } is the block of one exported function. */
#define SYM(name) for (int once_ = begin(#name); once_; once_ = 0, end())

/* T checks cond. */
#define T(cond)                                                                                             \
	do {                                                                                                \
		if (!(cond)) {                                                                              \
			printf("FAIL %s: %s (line %d, errno %d %s)\n", cur, #cond, __LINE__, errno,          \
			       strerror(errno));                                                           \
			cur_bad = 1;                                                                        \
		}                                                                                           \
	} while (0)

/* E runs expr, an object-making call, and checks it gave NULL with errno
 * e. */
#define E(expr, e)                            \
	do {                                  \
		errno = 0;                    \
		void *p_ = (void *)(expr);    \
		T(p_ == NULL && errno == (e)); \
	} while (0)

/* N runs expr, a call that answers -1 with errno, and checks the errno. */
#define N(expr, e)                        \
	do {                              \
		errno = 0;                \
		long r_ = (long)(expr);   \
		T(r_ == -1 && errno == (e)); \
	} while (0)

#define DIE(...)                                       \
	do {                                           \
		fprintf(stderr, "sweep: " __VA_ARGS__); \
		fputc('\n', stderr);                   \
		exit(2);                               \
	} while (0)

static struct ibv_device *dev;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static union ibv_gid gid;
static char buf[65536];
static struct sockaddr_in me; /* goroce0's address, from its GID */

static struct ibv_qp *make_qp(enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = t,
				     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *q = ibv_create_qp(pd, &a);
	if (!q)
		DIE("create_qp: %s", strerror(errno));
	return q;
}

/* dead_* are objects made and destroyed at once: a call given one must
 * not touch it. Each is used before anything else is allocated. */
static struct ibv_pd *dead_pd(void)
{
	struct ibv_pd *p = ibv_alloc_pd(ctx);
	ibv_dealloc_pd(p);
	return p;
}

static struct ibv_cq *dead_cq(void)
{
	struct ibv_cq *c = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	ibv_destroy_cq(c);
	return c;
}

static struct ibv_qp *dead_qp(void)
{
	struct ibv_qp *q = make_qp(IBV_QPT_RC);
	ibv_destroy_qp(q);
	return q;
}

static void verbs(void)
{
	struct ibv_device **list;
	int n = 0;

	SYM(ibv_get_device_list) {
		list = ibv_get_device_list(&n);
		T(list && n == 1 && list[0] && !list[1]);
		struct ibv_device **l2 = ibv_get_device_list(NULL);
		T(l2 && l2[0] == list[0]);
		ibv_free_device_list(l2);
	}
	dev = list[0];
	SYM(ibv_get_device_name) {
		T(!strcmp(ibv_get_device_name(dev), "goroce0"));
		E(ibv_get_device_name(NULL), EINVAL);
		E(ibv_get_device_name((struct ibv_device *)buf), EINVAL);
	}
	SYM(ibv_get_device_guid) {
		T(ibv_get_device_guid(dev) != 0);
		T(ibv_get_device_guid(NULL) == 0);
	}
	SYM(ibv_get_device_index) {
		T(ibv_get_device_index(dev) == 0);
		T(ibv_get_device_index(NULL) == -1);
	}
	SYM(ibv_open_device) {
		ctx = ibv_open_device(dev);
		T(ctx != NULL);
		E(ibv_open_device(NULL), ENODEV);
		E(ibv_open_device((struct ibv_device *)buf), ENODEV);
	}
	if (!ctx)
		DIE("no context");
	SYM(verbs_open_device) {
		struct ibv_context *c = verbs_open_device(dev, NULL);
		T(c != NULL && ibv_close_device(c) == 0);
		E(verbs_open_device(NULL, NULL), ENODEV);
	}
	SYM(ibv_close_device) {
		struct ibv_context *c = ibv_open_device(dev);
		T(c && ibv_close_device(c) == 0);
		N(ibv_close_device(c), EINVAL); /* closed */
		N(ibv_close_device(NULL), EINVAL);
	}
	SYM(ibv_free_device_list) {
		ibv_free_device_list(list);
		ibv_free_device_list(list); /* freed */
		ibv_free_device_list(NULL);
		struct ibv_device *mine[2] = {dev, NULL};
		ibv_free_device_list(mine); /* not one of the library's */
	}
	SYM(ibv_query_device) {
		struct ibv_device_attr a;
		T(ibv_query_device(ctx, &a) == 0 && a.phys_port_cnt == 1 && a.max_qp > 0);
		T(ibv_query_device(ctx, NULL) == EINVAL);
		T(ibv_query_device(NULL, &a) == EINVAL);
	}
	SYM(ibv_query_port) {
		struct ibv_port_attr a;
		memset(&a, 0, sizeof a);
		T(ibv_query_port(ctx, 1, (struct _compat_ibv_port_attr *)&a) == 0 && a.state == IBV_PORT_ACTIVE &&
		  a.gid_tbl_len == 1024);
		T(ibv_query_port(ctx, 0, (struct _compat_ibv_port_attr *)&a) == EINVAL);
		T(ibv_query_port(ctx, 2, (struct _compat_ibv_port_attr *)&a) == EINVAL);
		T(ibv_query_port(ctx, 1, NULL) == EINVAL);
		T(ibv_query_port(NULL, 1, (struct _compat_ibv_port_attr *)&a) == EINVAL);
	}
	SYM(ibv_query_gid) {
		union ibv_gid g;
		T(ibv_query_gid(ctx, 1, 0, &gid) == 0);
		memset(&g, 1, sizeof g);
		T(ibv_query_gid(ctx, 1, 7, &g) == 0 && g.global.subnet_prefix == 0 && g.global.interface_id == 0);
		N(ibv_query_gid(ctx, 1, 1024, &g), EINVAL);
		N(ibv_query_gid(ctx, 1, -1, &g), EINVAL);
		N(ibv_query_gid(ctx, 2, 0, &g), EINVAL);
		N(ibv_query_gid(ctx, 1, 0, NULL), EINVAL);
		N(ibv_query_gid(NULL, 1, 0, &g), EINVAL);
	}
	me.sin_family = AF_INET;
	memcpy(&me.sin_addr, gid.raw + 12, 4);
	SYM(ibv_query_gid_type) {
		int t = -1;
		T(ibv_query_gid_type(ctx, 1, 0, &t) == 0 && t == 1);
		N(ibv_query_gid_type(ctx, 1, 7, &t), EINVAL);
		N(ibv_query_gid_type(ctx, 1, 5000, &t), EINVAL);
		N(ibv_query_gid_type(ctx, 1, 0, NULL), EINVAL);
		N(ibv_query_gid_type(NULL, 1, 0, &t), EINVAL);
	}
	SYM(_ibv_query_gid_ex) {
		struct ibv_gid_entry e;
		T(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, sizeof e) == 0 && !memcmp(e.gid.raw, gid.raw, 16) &&
		  e.gid_type == IBV_GID_TYPE_ROCE_V2);
		T(_ibv_query_gid_ex(ctx, 1, 9, &e, 0, sizeof e) == ENODATA);
		T(_ibv_query_gid_ex(ctx, 1, 1024, &e, 0, sizeof e) == EINVAL);
		T(_ibv_query_gid_ex(ctx, 3, 0, &e, 0, sizeof e) == EINVAL);
		T(_ibv_query_gid_ex(ctx, 1, 0, &e, 1, sizeof e) == EINVAL);
		T(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, 4) == EINVAL);
		T(_ibv_query_gid_ex(ctx, 1, 0, NULL, 0, sizeof e) == EINVAL);
		T(_ibv_query_gid_ex(NULL, 1, 0, &e, 0, sizeof e) == EINVAL);
	}
	SYM(_ibv_query_gid_table) {
		struct ibv_gid_entry e[4];
		T(_ibv_query_gid_table(ctx, e, 4, 0, sizeof e[0]) == 1 && e[0].gid_index == 0);
		T(_ibv_query_gid_table(ctx, e, 0, 0, sizeof e[0]) == -EINVAL);
		T(_ibv_query_gid_table(ctx, e, 4, 1, sizeof e[0]) == -EINVAL);
		T(_ibv_query_gid_table(ctx, e, 4, 0, 8) == -EINVAL);
		T(_ibv_query_gid_table(ctx, NULL, 4, 0, sizeof e[0]) == -EINVAL);
		T(_ibv_query_gid_table(NULL, e, 4, 0, sizeof e[0]) == -EINVAL);
	}
	SYM(ibv_query_pkey) {
		__be16 p;
		T(ibv_query_pkey(ctx, 1, 0, &p) == 0 && p == htons(0xffff));
		N(ibv_query_pkey(ctx, 1, 1, &p), EINVAL);
		N(ibv_query_pkey(ctx, 2, 0, &p), EINVAL);
		N(ibv_query_pkey(ctx, 1, 0, NULL), EINVAL);
		N(ibv_query_pkey(NULL, 1, 0, &p), EINVAL);
	}
	SYM(ibv_get_pkey_index) {
		T(ibv_get_pkey_index(ctx, 1, htons(0xffff)) == 0);
		N(ibv_get_pkey_index(ctx, 1, htons(0x1234)), EINVAL);
		N(ibv_get_pkey_index(NULL, 1, htons(0xffff)), EINVAL);
	}
	SYM(ibv_alloc_pd) {
		pd = ibv_alloc_pd(ctx);
		T(pd != NULL);
		E(ibv_alloc_pd(NULL), EINVAL);
		E(ibv_alloc_pd((struct ibv_context *)buf), EINVAL);
	}
	if (!pd)
		DIE("no PD");
	SYM(ibv_dealloc_pd) {
		struct ibv_pd *p = ibv_alloc_pd(ctx);
		T(ibv_dealloc_pd(p) == 0);
		T(ibv_dealloc_pd(p) == EINVAL); /* deallocated */
		T(ibv_dealloc_pd(NULL) == EINVAL);
		p = ibv_alloc_pd(ctx);
		struct ibv_mr *m = ibv_reg_mr(p, buf, 64, IBV_ACCESS_LOCAL_WRITE);
		T(ibv_dealloc_pd(p) == EBUSY);
		T(ibv_dereg_mr(m) == 0 && ibv_dealloc_pd(p) == 0);
	}
	SYM(ibv_reg_mr) {
		struct ibv_mr *m = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		T(m && m->addr == buf && m->length == 4096 && ibv_dereg_mr(m) == 0);
		E(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE), EINVAL); /* without LOCAL_WRITE */
		E(ibv_reg_mr(pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL);
		E(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
		E(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_ON_DEMAND), EOPNOTSUPP);
		E(ibv_reg_mr(NULL, buf, 64, 0), EINVAL);
		E(ibv_reg_mr(dead_pd(), buf, 64, 0), EINVAL);
	}
	SYM(ibv_reg_mr_iova) {
		struct ibv_mr *m = ibv_reg_mr_iova(pd, buf, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE);
		T(m && ibv_dereg_mr(m) == 0);
		E(ibv_reg_mr_iova(NULL, buf, 64, 0, 0), EINVAL);
		E(ibv_reg_mr_iova(pd, NULL, 64, 0, 0), EINVAL);
	}
	SYM(ibv_reg_mr_iova2) {
		struct ibv_mr *m = ibv_reg_mr_iova2(pd, buf, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
		T(m && ibv_dereg_mr(m) == 0);
		E(ibv_reg_mr_iova2(NULL, buf, 64, 0, 0), EINVAL);
		E(ibv_reg_mr_iova2(pd, buf, 0, 0, 0), EINVAL);
	}
	SYM(ibv_dereg_mr) {
		struct ibv_mr *m = ibv_reg_mr(pd, buf, 64, 0);
		T(ibv_dereg_mr(m) == 0);
		T(ibv_dereg_mr(m) == EINVAL);
		T(ibv_dereg_mr(NULL) == EINVAL);
		T(ibv_dereg_mr((struct ibv_mr *)pd) == EINVAL); /* a PD */
	}
	SYM(ibv_rereg_mr) {
		struct ibv_mr *m = ibv_reg_mr(pd, buf, 64, 0);
		errno = 0;
		T(ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) ==
			  IBV_REREG_MR_ERR_INPUT &&
		  errno == EOPNOTSUPP);
		ibv_dereg_mr(m);
		errno = 0;
		T(ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL);
		errno = 0;
		T(ibv_rereg_mr(NULL, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL);
	}
	SYM(ibv_reg_dmabuf_mr) {
		E(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, 0), EOPNOTSUPP);
		E(ibv_reg_dmabuf_mr(NULL, 0, 4096, 0, -1, 0), EINVAL);
	}
	SYM(ibv_create_comp_channel) {
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		T(ch && ch->fd >= 0 && ibv_destroy_comp_channel(ch) == 0);
		E(ibv_create_comp_channel(NULL), EINVAL);
	}
	SYM(ibv_destroy_comp_channel) {
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		struct ibv_cq *c = ibv_create_cq(ctx, 4, NULL, ch, 0);
		T(ibv_destroy_comp_channel(ch) == EBUSY); /* a CQ uses it */
		T(ibv_destroy_cq(c) == 0 && ibv_destroy_comp_channel(ch) == 0);
		T(ibv_destroy_comp_channel(ch) == EINVAL);
		T(ibv_destroy_comp_channel(NULL) == EINVAL);
	}
	SYM(ibv_create_cq) {
		cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		T(cq && cq->cqe >= 16);
		E(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
		E(ibv_create_cq(ctx, 1 << 30, NULL, NULL, 0), EINVAL);
		E(ibv_create_cq(ctx, 4, NULL, NULL, 1), EINVAL); /* one completion vector */
		E(ibv_create_cq(NULL, 4, NULL, NULL, 0), EINVAL);
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		ibv_destroy_comp_channel(ch);
		E(ibv_create_cq(ctx, 4, NULL, ch, 0), EINVAL); /* destroyed channel */
	}
	if (!cq)
		DIE("no CQ");
	SYM(ibv_destroy_cq) {
		struct ibv_cq *c = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		T(ibv_destroy_cq(c) == 0);
		T(ibv_destroy_cq(c) == EINVAL);
		T(ibv_destroy_cq(NULL) == EINVAL);
		T(ibv_destroy_cq((struct ibv_cq *)pd) == EINVAL);
	}
	SYM(ibv_resize_cq) {
		T(ibv_resize_cq(cq, 32) == EOPNOTSUPP);
		T(ibv_resize_cq(NULL, 32) == EINVAL);
		T(ibv_resize_cq(dead_cq(), 32) == EINVAL);
	}
	SYM(ibv_ack_cq_events) {
		ibv_ack_cq_events(cq, 0);
		ibv_ack_cq_events(NULL, 1);
		ibv_ack_cq_events(dead_cq(), 1);
	}
	SYM(ibv_create_qp) {
		qp = make_qp(IBV_QPT_RC);
		T(qp && qp->state == IBV_QPS_RESET && qp->qp_num != 0);
		struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
		E(ibv_create_qp(pd, NULL), EINVAL);
		E(ibv_create_qp(NULL, &a), EINVAL);
		a.send_cq = (struct ibv_cq *)pd; /* a PD where the CQ belongs */
		E(ibv_create_qp(pd, &a), EINVAL);
		a.send_cq = dead_cq();
		E(ibv_create_qp(pd, &a), EINVAL);
		a.send_cq = cq;
		a.qp_type = IBV_QPT_XRC_SEND;
		E(ibv_create_qp(pd, &a), EOPNOTSUPP);
		a.qp_type = IBV_QPT_RC;
		a.cap.max_send_wr = 1 << 30;
		E(ibv_create_qp(pd, &a), EINVAL);
	}
	SYM(ibv_destroy_qp) {
		struct ibv_qp *q = make_qp(IBV_QPT_UD);
		T(ibv_destroy_qp(q) == 0);
		T(ibv_destroy_qp(q) == EINVAL);
		T(ibv_destroy_qp(NULL) == EINVAL);
		T(ibv_destroy_qp((struct ibv_qp *)cq) == EINVAL);
	}
	SYM(ibv_qp_to_qp_ex) {
		T(ibv_qp_to_qp_ex(qp) == NULL); /* made by ibv_create_qp */
		struct ibv_qp_init_attr_ex a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
						.cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
						.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
						.send_ops_flags = IBV_QP_EX_WITH_SEND};
		struct ibv_qp *q = ibv_create_qp_ex(ctx, &a);
		T(q && ibv_qp_to_qp_ex(q) == (struct ibv_qp_ex *)q);
		ibv_destroy_qp(q);
		T(ibv_qp_to_qp_ex(q) == NULL); /* destroyed */
		T(ibv_qp_to_qp_ex(NULL) == NULL);
	}
	SYM(ibv_modify_qp) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
		T(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0 &&
		  qp->state == IBV_QPS_INIT);
		a.qp_state = IBV_QPS_RTS; /* INIT to RTS skips RTR */
		T(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL);
		T(ibv_modify_qp(qp, NULL, IBV_QP_STATE) == EINVAL);
		T(ibv_modify_qp(NULL, &a, IBV_QP_STATE) == EINVAL);
		T(ibv_modify_qp(dead_qp(), &a, IBV_QP_STATE) == EINVAL);
	}
	SYM(ibv_query_qp) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		T(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0 && a.qp_state == IBV_QPS_INIT && ia.send_cq == cq);
		T(ibv_query_qp(qp, &a, IBV_QP_STATE, NULL) == 0);
		T(ibv_query_qp(qp, NULL, IBV_QP_STATE, &ia) == EINVAL);
		T(ibv_query_qp(NULL, &a, IBV_QP_STATE, &ia) == EINVAL);
		T(ibv_query_qp(dead_qp(), &a, IBV_QP_STATE, &ia) == EINVAL);
	}
	SYM(ibv_query_qp_data_in_order) {
		T(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0) == 0);
		T(ibv_query_qp_data_in_order(NULL, IBV_WR_SEND, 1) == 0);
	}
	SYM(ibv_query_ece) {
		struct ibv_ece e;
		T(ibv_query_ece(qp, &e) == EOPNOTSUPP);
		T(ibv_query_ece(NULL, &e) == EINVAL);
	}
	SYM(ibv_set_ece) {
		struct ibv_ece e = {0};
		T(ibv_set_ece(qp, &e) == EOPNOTSUPP);
		T(ibv_set_ece(dead_qp(), &e) == EINVAL);
	}
	SYM(ibv_attach_mcast) {
		T(ibv_attach_mcast(qp, &gid, 0) == EOPNOTSUPP);
		T(ibv_attach_mcast(NULL, &gid, 0) == EINVAL);
	}
	SYM(ibv_detach_mcast) {
		T(ibv_detach_mcast(qp, &gid, 0) == EOPNOTSUPP);
		T(ibv_detach_mcast(dead_qp(), &gid, 0) == EINVAL);
	}
	SYM(ibv_create_srq) {
		struct ibv_srq_init_attr a = {.attr = {.max_wr = 4, .max_sge = 1}};
		struct ibv_srq *s = ibv_create_srq(pd, &a);
		T(s && ibv_destroy_srq(s) == 0);
		E(ibv_create_srq(pd, NULL), EINVAL);
		E(ibv_create_srq(NULL, &a), EINVAL);
		a.attr.max_wr = 1 << 30;
		E(ibv_create_srq(pd, &a), EINVAL);
	}
	SYM(ibv_destroy_srq) {
		struct ibv_srq_init_attr a = {.attr = {.max_wr = 4, .max_sge = 1}};
		struct ibv_srq *s = ibv_create_srq(pd, &a);
		T(ibv_destroy_srq(s) == 0);
		T(ibv_destroy_srq(s) == EINVAL);
		T(ibv_destroy_srq(NULL) == EINVAL);
	}
	SYM(ibv_modify_srq) {
		struct ibv_srq_init_attr a = {.attr = {.max_wr = 4, .max_sge = 1}};
		struct ibv_srq *s = ibv_create_srq(pd, &a);
		struct ibv_srq_attr sa = {.srq_limit = 1};
		T(ibv_modify_srq(s, &sa, IBV_SRQ_LIMIT) == EOPNOTSUPP);
		ibv_destroy_srq(s);
		T(ibv_modify_srq(s, &sa, IBV_SRQ_LIMIT) == EINVAL);
		T(ibv_modify_srq(NULL, &sa, IBV_SRQ_LIMIT) == EINVAL);
	}
	SYM(ibv_query_srq) {
		struct ibv_srq_init_attr a = {.attr = {.max_wr = 4, .max_sge = 1}};
		struct ibv_srq *s = ibv_create_srq(pd, &a);
		struct ibv_srq_attr sa;
		T(ibv_query_srq(s, &sa) == EOPNOTSUPP);
		ibv_destroy_srq(s);
		T(ibv_query_srq(s, &sa) == EINVAL);
		T(ibv_query_srq(NULL, &sa) == EINVAL);
	}

	/* Address handles, and the way back from a UD receive's GRH area
	 * (an IPv4 header in its last 20 bytes, from goroce0's address). */
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .hop_limit = 1}};
	struct ibv_wc wc = {.wc_flags = IBV_WC_GRH, .opcode = IBV_WC_RECV};
	uint8_t grh[40] = {0};
	grh[20] = 0x45;
	memcpy(grh + 20 + 12, gid.raw + 12, 4);
	SYM(ibv_create_ah) {
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		T(ah && ibv_destroy_ah(ah) == 0);
		struct ibv_ah_attr local = aa;
		local.is_global = 0; /* RoCE needs the GRH */
		E(ibv_create_ah(pd, &local), EINVAL);
		E(ibv_create_ah(pd, NULL), EINVAL);
		E(ibv_create_ah(NULL, &aa), EINVAL);
		E(ibv_create_ah(dead_pd(), &aa), EINVAL);
	}
	SYM(ibv_destroy_ah) {
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		T(ibv_destroy_ah(ah) == 0);
		T(ibv_destroy_ah(ah) == EINVAL);
		T(ibv_destroy_ah(NULL) == EINVAL);
	}
	SYM(ibv_init_ah_from_wc) {
		struct ibv_ah_attr a;
		T(ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &a) == 0 && a.is_global &&
		  !memcmp(a.grh.dgid.raw, gid.raw, 16));
		struct ibv_wc nogrh = wc;
		nogrh.wc_flags = 0;
		N(ibv_init_ah_from_wc(ctx, 1, &nogrh, (struct ibv_grh *)grh, &a), EINVAL);
		N(ibv_init_ah_from_wc(ctx, 2, &wc, (struct ibv_grh *)grh, &a), EINVAL);
		N(ibv_init_ah_from_wc(ctx, 1, NULL, (struct ibv_grh *)grh, &a), EINVAL);
		N(ibv_init_ah_from_wc(ctx, 1, &wc, NULL, &a), EINVAL);
		N(ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, NULL), EINVAL);
		N(ibv_init_ah_from_wc(NULL, 1, &wc, (struct ibv_grh *)grh, &a), EINVAL);
	}
	SYM(ibv_create_ah_from_wc) {
		struct ibv_ah *ah = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)grh, 1);
		T(ah && ibv_destroy_ah(ah) == 0);
		E(ibv_create_ah_from_wc(pd, NULL, (struct ibv_grh *)grh, 1), EINVAL);
		E(ibv_create_ah_from_wc(NULL, &wc, (struct ibv_grh *)grh, 1), EINVAL);
	}
	SYM(ibv_resolve_eth_l2_from_gid) {
		uint8_t mac[6];
		uint16_t vid;
		T(ibv_resolve_eth_l2_from_gid(ctx, &aa, mac, &vid) == EOPNOTSUPP);
		T(ibv_resolve_eth_l2_from_gid(ctx, NULL, mac, &vid) == EINVAL);
		T(ibv_resolve_eth_l2_from_gid(NULL, &aa, mac, &vid) == EINVAL);
	}

	/* Completion events: a CQ on a channel, armed, gets the flush
	 * completion of a receive when its QP enters ERR. */
	SYM(ibv_get_cq_event) {
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		struct ibv_cq *c = ibv_create_cq(ctx, 4, (void *)0x5a, ch, 0);
		struct ibv_qp_init_attr ia = {.send_cq = c, .recv_cq = c, .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
		struct ibv_qp *q = ibv_create_qp(pd, &ia);
		struct ibv_mr *m = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
		struct ibv_sge s = {(uintptr_t)buf, 64, m ? m->lkey : 0};
		struct ibv_recv_wr r = {.wr_id = 1, .sg_list = &s, .num_sge = 1}, *bad;
		T(q && m && ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
		T(ibv_post_recv(q, &r, &bad) == 0 && ibv_req_notify_cq(c, 0) == 0);
		a.qp_state = IBV_QPS_ERR;
		T(ibv_modify_qp(q, &a, IBV_QP_STATE) == 0);
		struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
		struct ibv_cq *ecq = NULL;
		void *ectx = NULL;
		T(poll(&pfd, 1, 10000) == 1 && ibv_get_cq_event(ch, &ecq, &ectx) == 0 && ecq == c && ectx == (void *)0x5a);
		if (ecq)
			ibv_ack_cq_events(ecq, 1);
		struct ibv_wc w;
		T(ibv_poll_cq(c, 1, &w) == 1 && w.status == IBV_WC_WR_FLUSH_ERR);
		N(ibv_get_cq_event(ch, NULL, &ectx), EINVAL);
		N(ibv_get_cq_event(NULL, &ecq, &ectx), EINVAL);
		ibv_destroy_qp(q);
		ibv_dereg_mr(m);
		ibv_destroy_cq(c);
		ibv_destroy_comp_channel(ch);
		N(ibv_get_cq_event(ch, &ecq, &ectx), EINVAL); /* destroyed */
	}
	/* Async events: the QP that entered ERR above reported nothing (a
	 * program's move to ERR is no fatal event), so make one: an overrun
	 * CQ is IBV_EVENT_CQ_ERR. Any event pending is taken and acknowledged. */
	SYM(ibv_get_async_event) {
		struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
		struct ibv_async_event ev;
		while (poll(&pfd, 1, 0) == 1 && ibv_get_async_event(ctx, &ev) == 0)
			ibv_ack_async_event(&ev);
		N(ibv_get_async_event(ctx, NULL), EINVAL);
		N(ibv_get_async_event(NULL, &ev), EINVAL);
	}
	SYM(ibv_ack_async_event) {
		struct ibv_async_event ev = {.event_type = IBV_EVENT_QP_FATAL};
		ev.element.qp = dead_qp();
		ibv_ack_async_event(&ev); /* its QP is gone */
		ev.event_type = IBV_EVENT_CQ_ERR;
		ev.element.cq = dead_cq();
		ibv_ack_async_event(&ev);
		ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		ev.element.srq = NULL;
		ibv_ack_async_event(&ev);
		ibv_ack_async_event(NULL);
	}

	/* Fork. */
	SYM(ibv_fork_init) { T(ibv_fork_init() == 0); }
	SYM(ibv_is_fork_initialized) { T(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED); }
	SYM(ibv_dontfork_range) {
		T(ibv_dontfork_range(buf, sizeof buf) == 0);
		T(ibv_dontfork_range(NULL, 0) == 0);
	}
	SYM(ibv_dofork_range) {
		T(ibv_dofork_range(buf, sizeof buf) == 0);
		T(ibv_dofork_range(NULL, 0) == 0);
	}

	/* Import. */
	SYM(ibv_import_device) { E(ibv_import_device(ctx->cmd_fd), EOPNOTSUPP); }
	SYM(ibv_import_pd) {
		E(ibv_import_pd(ctx, pd->handle), EOPNOTSUPP);
		E(ibv_import_pd(NULL, 1), EINVAL);
	}
	SYM(ibv_import_mr) {
		E(ibv_import_mr(pd, 1), EOPNOTSUPP);
		E(ibv_import_mr(NULL, 1), EINVAL);
	}
	SYM(ibv_import_dm) {
		E(ibv_import_dm(ctx, 1), EOPNOTSUPP);
		E(ibv_import_dm(NULL, 1), EINVAL);
	}
	SYM(ibv_unimport_pd) {
		ibv_unimport_pd(pd);
		ibv_unimport_pd(NULL);
		T(ibv_alloc_pd(ctx) != NULL); /* the PD is as it was */
	}
	SYM(ibv_unimport_mr) { ibv_unimport_mr(NULL); }
	SYM(ibv_unimport_dm) { ibv_unimport_dm(NULL); }

	/* The pure helpers, libibverbs' own. */
	SYM(ibv_wc_status_str) {
		T(!strcmp(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error"));
		T(ibv_wc_status_str((enum ibv_wc_status)9999) != NULL);
	}
	SYM(ibv_event_type_str) {
		T(!strcmp(ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error"));
		T(ibv_event_type_str((enum ibv_event_type)9999) != NULL);
	}
	SYM(ibv_node_type_str) { T(!strcmp(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter")); }
	SYM(ibv_port_state_str) { T(!strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active")); }
	SYM(ibv_rate_to_mbps) {
		T(ibv_rate_to_mbps(IBV_RATE_10_GBPS) == 10000);
		T(ibv_rate_to_mbps((enum ibv_rate)9999) == -1);
	}
	SYM(ibv_rate_to_mult) { T(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && ibv_rate_to_mult((enum ibv_rate)9999) == -1); }
	SYM(mbps_to_ibv_rate) { T(mbps_to_ibv_rate(10000) == IBV_RATE_10_GBPS && mbps_to_ibv_rate(3) == IBV_RATE_MAX); }
	SYM(mult_to_ibv_rate) { T(mult_to_ibv_rate(4) == IBV_RATE_10_GBPS && mult_to_ibv_rate(3) == IBV_RATE_MAX); }
	SYM(ibv_get_sysfs_path) { T(ibv_get_sysfs_path() != NULL); }
	SYM(ibv_read_sysfs_file) {
		char b[64];
		T(ibv_read_sysfs_file("/proc/self", "comm", b, sizeof b) > 0);
		T(ibv_read_sysfs_file("/nonexistent", "x", b, sizeof b) < 0);
	}
	SYM(__ioctl_final_num_attrs) { T(__ioctl_final_num_attrs(5, NULL) == 5); }

	/* The kernel-ABI converters. */
	SYM(ibv_copy_ah_attr_from_kern) {
		struct ib_uverbs_ah_attr k = {.dlid = htons(7), .sl = 3, .is_global = 1};
		struct ibv_ah_attr a;
		ibv_copy_ah_attr_from_kern(&a, &k);
		T(a.sl == 3 && a.is_global == 1);
		ibv_copy_ah_attr_from_kern(NULL, &k);
		ibv_copy_ah_attr_from_kern(&a, NULL);
	}
	SYM(ibv_copy_qp_attr_from_kern) {
		struct ib_uverbs_qp_attr k = {.qkey = 0x11, .dest_qp_num = 0x22};
		struct ibv_qp_attr a;
		ibv_copy_qp_attr_from_kern(&a, &k);
		T(a.qkey == 0x11 && a.dest_qp_num == 0x22);
		ibv_copy_qp_attr_from_kern(NULL, NULL);
	}
	SYM(ibv_copy_path_rec_from_kern) {
		struct ib_user_path_rec k = {.hop_limit = 9};
		struct ibv_sa_path_rec p;
		ibv_copy_path_rec_from_kern(&p, &k);
		T(p.hop_limit == 9);
		ibv_copy_path_rec_from_kern(&p, NULL);
	}
	SYM(ibv_copy_path_rec_to_kern) {
		struct ibv_sa_path_rec p = {.hop_limit = 11};
		struct ib_user_path_rec k;
		ibv_copy_path_rec_to_kern(&k, &p);
		T(k.hop_limit == 11);
		ibv_copy_path_rec_to_kern(NULL, &p);
	}

	/* The provider interface: no kernel command channel on goroce0. */
#define CMD(name)                                                                       \
	SYM(name) {                                                                     \
		T(((cmd_fn)(void (*)(void))name)(ctx, 0, 0, 0, 0, 0, 0, 0) == EOPNOTSUPP); \
		T(((cmd_fn)(void (*)(void))name)(0, 0, 0, 0, 0, 0, 0, 0) == EOPNOTSUPP);   \
	}
	CMD(ibv_cmd_advise_mr) CMD(ibv_cmd_alloc_dm) CMD(ibv_cmd_alloc_mw) CMD(ibv_cmd_alloc_pd)
	CMD(ibv_cmd_attach_mcast) CMD(ibv_cmd_close_xrcd) CMD(ibv_cmd_create_ah) CMD(ibv_cmd_create_counters)
	CMD(ibv_cmd_create_cq) CMD(ibv_cmd_create_cq_ex) CMD(ibv_cmd_create_flow) CMD(ibv_cmd_create_flow_action_esp)
	CMD(ibv_cmd_create_qp) CMD(ibv_cmd_create_qp_ex) CMD(ibv_cmd_create_qp_ex2) CMD(ibv_cmd_create_rwq_ind_table)
	CMD(ibv_cmd_create_srq) CMD(ibv_cmd_create_srq_ex) CMD(ibv_cmd_create_wq) CMD(ibv_cmd_dealloc_mw)
	CMD(ibv_cmd_dealloc_pd) CMD(ibv_cmd_dereg_mr) CMD(ibv_cmd_destroy_ah) CMD(ibv_cmd_destroy_counters)
	CMD(ibv_cmd_destroy_cq) CMD(ibv_cmd_destroy_flow) CMD(ibv_cmd_destroy_flow_action) CMD(ibv_cmd_destroy_qp)
	CMD(ibv_cmd_destroy_rwq_ind_table) CMD(ibv_cmd_destroy_srq) CMD(ibv_cmd_destroy_wq) CMD(ibv_cmd_detach_mcast)
	CMD(ibv_cmd_free_dm) CMD(ibv_cmd_get_context) CMD(ibv_cmd_modify_cq) CMD(ibv_cmd_modify_flow_action_esp)
	CMD(ibv_cmd_modify_qp) CMD(ibv_cmd_modify_qp_ex) CMD(ibv_cmd_modify_srq) CMD(ibv_cmd_modify_wq)
	CMD(ibv_cmd_open_qp) CMD(ibv_cmd_open_xrcd) CMD(ibv_cmd_poll_cq) CMD(ibv_cmd_post_recv) CMD(ibv_cmd_post_send)
	CMD(ibv_cmd_post_srq_recv) CMD(ibv_cmd_query_context) CMD(ibv_cmd_query_device_any) CMD(ibv_cmd_query_mr)
	CMD(ibv_cmd_query_port) CMD(ibv_cmd_query_qp) CMD(ibv_cmd_query_srq) CMD(ibv_cmd_read_counters)
	CMD(ibv_cmd_reg_dm_mr) CMD(ibv_cmd_reg_dmabuf_mr) CMD(ibv_cmd_reg_mr) CMD(ibv_cmd_req_notify_cq)
	CMD(ibv_cmd_rereg_mr) CMD(ibv_cmd_resize_cq)
#undef CMD
	SYM(execute_ioctl) {
		T(execute_ioctl(ctx, NULL) == EOPNOTSUPP);
		T(execute_ioctl(NULL, NULL) == EOPNOTSUPP);
	}
	SYM(_verbs_init_and_alloc_context) {
		E(_verbs_init_and_alloc_context(dev, ctx->cmd_fd, 4096, NULL, 0), EOPNOTSUPP);
		E(_verbs_init_and_alloc_context(NULL, -1, 0, NULL, 0), EOPNOTSUPP);
	}
	SYM(verbs_uninit_context) {
		verbs_uninit_context(container_of(ctx, struct verbs_context, context));
		verbs_uninit_context(NULL);
		T(ibv_alloc_pd(ctx) != NULL); /* the context is as it was */
	}
	SYM(verbs_set_ops) {
		verbs_set_ops(container_of(ctx, struct verbs_context, context), NULL);
		verbs_set_ops(NULL, NULL);
		T(ibv_alloc_pd(ctx) != NULL);
	}
	SYM(verbs_register_driver_34) {
		char ops[256] = {0};
		verbs_register_driver_34(ops);
		verbs_register_driver_34(NULL);
	}
	SYM(ibv_register_driver) {
		void (*reg)(const char *, void *) = (void (*)(const char *, void *))dlsym(RTLD_DEFAULT, "ibv_register_driver");
		T(reg != NULL);
		if (reg) {
			reg("sweep", NULL);
			reg(NULL, NULL);
		}
	}
	SYM(verbs_init_cq) {
		struct ibv_cq c;
		memset(&c, 0x5a, sizeof c);
		verbs_init_cq(&c, ctx, NULL, (void *)7);
		T(c.context == ctx && c.cq_context == (void *)7 && c.comp_events_completed == 0);
		verbs_init_cq(NULL, ctx, NULL, NULL);
		verbs_init_cq(&c, NULL, NULL, NULL);
	}
	SYM(__verbs_log) {
		__verbs_log(container_of(ctx, struct verbs_context, context), 0, "sweep: __verbs_log %d\n", 1);
		__verbs_log(NULL, 0, NULL);
	}
	SYM(ibv_read_ibdev_sysfs_file) {
		char b[64];
		N(ibv_read_ibdev_sysfs_file(b, sizeof b, NULL, "node_guid"), EOPNOTSUPP);
		N(ibv_read_ibdev_sysfs_file(NULL, 0, NULL, NULL), EOPNOTSUPP);
	}
}

/* ---- librdmacm ---- */

/* cm_event takes ch's next event, which must be of type want. */
static struct rdma_cm_event *cm_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *e = NULL;
	if (poll(&pfd, 1, 10000) != 1 || rdma_get_cm_event(ch, &e))
		return NULL;
	if (e->event != want) {
		printf("FAIL %s: event %s, want %s\n", cur, rdma_event_str(e->event), rdma_event_str(want));
		cur_bad = 1;
		rdma_ack_cm_event(e);
		return NULL;
	}
	return e;
}

static struct sockaddr_in at(int port)
{
	struct sockaddr_in a = me;
	a.sin_port = htons(port);
	return a;
}

static void rdmacm(int port)
{
	struct rdma_event_channel *chs, *chc;
	struct rdma_cm_id *lis = NULL, *cli = NULL, *srv = NULL;
	struct sockaddr_in sa = at(port);
	struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1}};

	SYM(rdma_create_event_channel) {
		chs = rdma_create_event_channel();
		chc = rdma_create_event_channel();
		T(chs && chc && chs->fd >= 0);
	}
	if (!chs || !chc)
		DIE("no event channels");
	SYM(rdma_destroy_event_channel) {
		struct rdma_event_channel *c = rdma_create_event_channel();
		rdma_destroy_event_channel(c);
		rdma_destroy_event_channel(c); /* destroyed */
		rdma_destroy_event_channel(NULL);
	}
	SYM(rdma_create_id) {
		T(rdma_create_id(chs, &lis, NULL, RDMA_PS_TCP) == 0 && lis);
		T(rdma_create_id(chc, &cli, (void *)9, RDMA_PS_TCP) == 0 && cli && cli->context == (void *)9);
		N(rdma_create_id(chs, NULL, NULL, RDMA_PS_TCP), EINVAL);
		struct rdma_event_channel *c = rdma_create_event_channel();
		rdma_destroy_event_channel(c);
		struct rdma_cm_id *x;
		N(rdma_create_id(c, &x, NULL, RDMA_PS_TCP), EINVAL); /* destroyed channel */
	}
	if (!lis || !cli)
		DIE("no CM IDs");
	SYM(rdma_destroy_id) {
		struct rdma_cm_id *x;
		T(rdma_create_id(NULL, &x, NULL, RDMA_PS_TCP) == 0 && rdma_destroy_id(x) == 0);
		N(rdma_destroy_id(x), EINVAL);
		N(rdma_destroy_id(NULL), EINVAL);
	}
	SYM(rdma_bind_addr) {
		T(rdma_bind_addr(lis, (struct sockaddr *)&sa) == 0 && lis->verbs != NULL);
		struct sockaddr_un un = {.sun_family = AF_UNIX};
		N(rdma_bind_addr(cli, (struct sockaddr *)&un), EAFNOSUPPORT);
		N(rdma_bind_addr(cli, NULL), EINVAL);
		N(rdma_bind_addr(NULL, (struct sockaddr *)&sa), EINVAL);
	}
	SYM(rdma_listen) {
		T(rdma_listen(lis, 4) == 0);
		N(rdma_listen(NULL, 4), EINVAL);
	}
	SYM(rdma_get_src_port) {
		T(rdma_get_src_port(lis) == htons(port));
		T(rdma_get_src_port(NULL) == 0);
	}
	SYM(rdma_resolve_addr) {
		struct rdma_cm_event *e = NULL;
		T(rdma_resolve_addr(cli, NULL, (struct sockaddr *)&sa, 2000) == 0 &&
		  (e = cm_event(chc, RDMA_CM_EVENT_ADDR_RESOLVED)));
		if (e)
			rdma_ack_cm_event(e);
		N(rdma_resolve_addr(cli, NULL, NULL, 2000), EINVAL);
		N(rdma_resolve_addr(NULL, NULL, (struct sockaddr *)&sa, 2000), EINVAL);
	}
	SYM(rdma_resolve_route) {
		struct rdma_cm_event *e = NULL;
		T(rdma_resolve_route(cli, 2000) == 0 && (e = cm_event(chc, RDMA_CM_EVENT_ROUTE_RESOLVED)));
		if (e)
			rdma_ack_cm_event(e);
		N(rdma_resolve_route(NULL, 2000), EINVAL);
	}
	SYM(rdma_get_dst_port) {
		T(rdma_get_dst_port(cli) == htons(port));
		T(rdma_get_dst_port(NULL) == 0);
	}
	SYM(rdma_create_qp) {
		struct ibv_qp_init_attr a = qa;
		T(rdma_create_qp(cli, NULL, &a) == 0 && cli->qp && cli->send_cq);
		N(rdma_create_qp(cli, NULL, NULL), EINVAL);
		N(rdma_create_qp(NULL, NULL, &a), EINVAL);
		N(rdma_create_qp(lis, (struct ibv_pd *)cli, &a), EINVAL); /* an ID where the PD belongs */
	}
	SYM(rdma_create_qp_ex) {
		struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_RC};
		N(rdma_create_qp_ex(cli, &a), ENOSYS);
		N(rdma_create_qp_ex(NULL, &a), EINVAL);
	}
	SYM(rdma_connect) {
		struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = 7};
		T(rdma_connect(cli, &p) == 0);
		N(rdma_connect(NULL, &p), EINVAL);
	}
	struct rdma_cm_event *req = NULL;
	SYM(rdma_get_cm_event) {
		T((req = cm_event(chs, RDMA_CM_EVENT_CONNECT_REQUEST)) && req->listen_id == lis && req->id);
		struct rdma_cm_event *e;
		N(rdma_get_cm_event(chs, NULL), EINVAL);
		N(rdma_get_cm_event(NULL, &e), EINVAL);
	}
	if (!req)
		DIE("no CONNECT_REQUEST");
	srv = req->id;
	SYM(rdma_ack_cm_event) {
		T(rdma_ack_cm_event(req) == 0);
		N(rdma_ack_cm_event(req), EINVAL); /* acknowledged */
		N(rdma_ack_cm_event(NULL), EINVAL);
	}
	SYM(rdma_accept) {
		struct ibv_qp_init_attr a = qa;
		T(rdma_create_qp(srv, NULL, &a) == 0 && rdma_accept(srv, NULL) == 0);
		N(rdma_accept(NULL, NULL), EINVAL);
		struct rdma_cm_event *e = NULL, *f = NULL;
		T((e = cm_event(chc, RDMA_CM_EVENT_ESTABLISHED)) && (f = cm_event(chs, RDMA_CM_EVENT_ESTABLISHED)));
		if (e)
			rdma_ack_cm_event(e);
		if (f)
			rdma_ack_cm_event(f);
	}
	SYM(rdma_establish) {
		N(rdma_establish(srv), ENOSYS);
		N(rdma_establish(NULL), EINVAL);
	}
	SYM(rdma_notify) {
		N(rdma_notify(srv, IBV_EVENT_COMM_EST), ENOSYS);
		N(rdma_notify(NULL, IBV_EVENT_COMM_EST), EINVAL);
	}
	SYM(rdma_init_qp_attr) {
		struct ibv_qp_attr a;
		int mask;
		N(rdma_init_qp_attr(srv, &a, &mask), ENOSYS);
		N(rdma_init_qp_attr(NULL, &a, &mask), EINVAL);
	}
	SYM(rdma_migrate_id) {
		struct rdma_event_channel *c = rdma_create_event_channel();
		T(rdma_migrate_id(srv, c) == 0 && srv->channel == c);
		T(rdma_migrate_id(srv, chs) == 0);
		rdma_destroy_event_channel(c);
		N(rdma_migrate_id(srv, c), EINVAL); /* destroyed channel */
		N(rdma_migrate_id(NULL, chs), EINVAL);
	}
	/* The client's DREQ is DISCONNECTED for the server, whose
	 * rdma_disconnect answers it (DREP): DISCONNECTED for the client. */
	SYM(rdma_disconnect) {
		struct rdma_cm_event *e = NULL, *f = NULL;
		T(rdma_disconnect(cli) == 0 && (f = cm_event(chs, RDMA_CM_EVENT_DISCONNECTED)));
		if (f)
			rdma_ack_cm_event(f);
		T(rdma_disconnect(srv) == 0 && (e = cm_event(chc, RDMA_CM_EVENT_DISCONNECTED)));
		if (e)
			rdma_ack_cm_event(e);
		N(rdma_disconnect(NULL), EINVAL);
	}
	SYM(rdma_reject) {
		struct rdma_cm_id *c3;
		struct rdma_cm_event *e = NULL;
		struct rdma_conn_param p = {.retry_count = 7};
		struct ibv_qp_init_attr a3 = qa;
		T(rdma_create_id(chc, &c3, NULL, RDMA_PS_TCP) == 0 &&
		  rdma_resolve_addr(c3, NULL, (struct sockaddr *)&sa, 2000) == 0 &&
		  (e = cm_event(chc, RDMA_CM_EVENT_ADDR_RESOLVED)));
		if (e)
			rdma_ack_cm_event(e);
		e = NULL;
		T(rdma_resolve_route(c3, 2000) == 0 && (e = cm_event(chc, RDMA_CM_EVENT_ROUTE_RESOLVED)));
		if (e)
			rdma_ack_cm_event(e);
		e = NULL;
		T(rdma_create_qp(c3, NULL, &a3) == 0 && rdma_connect(c3, &p) == 0);
		T((e = cm_event(chs, RDMA_CM_EVENT_CONNECT_REQUEST)) && rdma_reject(e->id, "no", 3) == 0);
		struct rdma_cm_id *rejected = e ? e->id : NULL;
		if (e)
			rdma_ack_cm_event(e);
		e = NULL;
		T((e = cm_event(chc, RDMA_CM_EVENT_REJECTED)));
		if (e)
			rdma_ack_cm_event(e);
		N(rdma_reject(NULL, NULL, 0), EINVAL);
		N(rdma_reject(lis, NULL, 5), EINVAL); /* a length without data */
		if (rejected)
			rdma_destroy_id(rejected);
		rdma_destroy_qp(c3);
		rdma_destroy_id(c3);
	}
	SYM(rdma_destroy_qp) {
		rdma_destroy_qp(cli);
		T(cli->qp == NULL);
		rdma_destroy_qp(cli); /* none left */
		rdma_destroy_qp(NULL);
	}
	rdma_destroy_qp(srv);
	SYM(rdma_set_option) {
		int one = 1;
		T(rdma_set_option(lis, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one) == 0);
		N(rdma_set_option(lis, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, sizeof one), ENOSYS);
		N(rdma_set_option(lis, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, NULL, 4), EINVAL);
		N(rdma_set_option(NULL, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one), EINVAL);
	}
	SYM(rdma_join_multicast) {
		N(rdma_join_multicast(lis, (struct sockaddr *)&sa, NULL), ENOSYS);
		N(rdma_join_multicast(NULL, (struct sockaddr *)&sa, NULL), EINVAL);
	}
	SYM(rdma_join_multicast_ex) {
		struct rdma_cm_join_mc_attr_ex a = {0};
		N(rdma_join_multicast_ex(lis, &a, NULL), ENOSYS);
		N(rdma_join_multicast_ex(NULL, &a, NULL), EINVAL);
	}
	SYM(rdma_leave_multicast) {
		N(rdma_leave_multicast(lis, (struct sockaddr *)&sa), ENOSYS);
		N(rdma_leave_multicast(NULL, (struct sockaddr *)&sa), EINVAL);
	}
	SYM(rdma_create_srq) {
		struct ibv_srq_init_attr a = {.attr = {.max_wr = 2, .max_sge = 1}};
		N(rdma_create_srq(cli, NULL, &a), ENOSYS);
		N(rdma_create_srq(NULL, NULL, &a), EINVAL);
	}
	SYM(rdma_create_srq_ex) {
		struct ibv_srq_init_attr_ex a = {0};
		N(rdma_create_srq_ex(cli, &a), ENOSYS);
		N(rdma_create_srq_ex(NULL, &a), EINVAL);
	}
	SYM(rdma_destroy_srq) {
		rdma_destroy_srq(cli);
		rdma_destroy_srq(NULL);
	}
	SYM(rdma_reject_ece) {
		N(rdma_reject_ece(lis, NULL, 0), ENOSYS);
		N(rdma_reject_ece(NULL, NULL, 0), EINVAL);
	}
	SYM(rdma_set_local_ece) {
		struct ibv_ece e = {0};
		N(rdma_set_local_ece(lis, &e), ENOSYS);
		N(rdma_set_local_ece(NULL, &e), EINVAL);
	}
	SYM(rdma_get_remote_ece) {
		struct ibv_ece e;
		N(rdma_get_remote_ece(lis, &e), ENOSYS);
		N(rdma_get_remote_ece(NULL, &e), EINVAL);
	}
	rdma_destroy_id(srv);
	rdma_destroy_id(cli);
	rdma_destroy_id(lis);
	SYM(rdma_event_str) {
		T(!strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED"));
		T(!strcmp(rdma_event_str((enum rdma_cm_event_type)999), "UNKNOWN EVENT"));
	}
	SYM(rdma_get_devices) {
		int n = 0;
		struct ibv_context **l = rdma_get_devices(&n);
		T(l && n == 1 && l[0] && !l[1]);
		rdma_free_devices(l);
		T(rdma_get_devices(NULL) != NULL); /* not freed: left to exit */
	}
	SYM(rdma_free_devices) {
		struct ibv_context **l = rdma_get_devices(NULL);
		rdma_free_devices(l);
		rdma_free_devices(l); /* freed */
		rdma_free_devices(NULL);
	}
	struct rdma_addrinfo *ai = NULL;
	char addr[INET_ADDRSTRLEN], svc[16];
	inet_ntop(AF_INET, &me.sin_addr, addr, sizeof addr);
	snprintf(svc, sizeof svc, "%d", port + 1);
	SYM(rdma_getaddrinfo) {
		struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP};
		T(rdma_getaddrinfo(addr, svc, &hints, &ai) == 0 && ai && ai->ai_src_addr);
		struct rdma_addrinfo *h = NULL; /* neither node nor service: the hints, as librdmacm */
		T(rdma_getaddrinfo(NULL, NULL, &hints, &h) == 0 && h && h->ai_flags == RAI_PASSIVE && !h->ai_src_addr);
		rdma_freeaddrinfo(h);
		N(rdma_getaddrinfo(NULL, NULL, NULL, &h), EINVAL);
		N(rdma_getaddrinfo(addr, svc, &hints, NULL), EINVAL);
	}
	SYM(rdma_create_ep) {
		struct rdma_cm_id *ep;
		T(ai && rdma_create_ep(&ep, ai, NULL, NULL) == 0);
		if (ai)
			rdma_destroy_ep(ep);
		N(rdma_create_ep(&ep, NULL, NULL, NULL), EINVAL);
		N(rdma_create_ep(NULL, ai, NULL, NULL), EINVAL);
	}
	SYM(rdma_destroy_ep) {
		struct rdma_cm_id *ep = NULL;
		T(ai && rdma_create_ep(&ep, ai, NULL, NULL) == 0);
		if (ep)
			rdma_destroy_ep(ep);
		rdma_destroy_ep(ep); /* destroyed */
		rdma_destroy_ep(NULL);
	}
	SYM(rdma_get_request) {
		struct rdma_cm_id *ep = NULL, *got;
		T(ai && rdma_create_ep(&ep, ai, NULL, NULL) == 0 && rdma_listen(ep, 1) == 0);
		struct rdma_cm_id *async;
		T(rdma_create_id(chs, &async, NULL, RDMA_PS_TCP) == 0);
		N(rdma_get_request(async, &got), EINVAL); /* not a synchronous ID */
		N(rdma_get_request(NULL, &got), EINVAL);
		N(rdma_get_request(ep, NULL), EINVAL);
		rdma_destroy_id(async);
		if (ep)
			rdma_destroy_ep(ep);
	}
	SYM(rdma_freeaddrinfo) {
		rdma_freeaddrinfo(ai);
		rdma_freeaddrinfo(ai); /* freed */
		rdma_freeaddrinfo(NULL);
	}
	rdma_destroy_event_channel(chs);
	rdma_destroy_event_channel(chc);

	/* rsockets: none can be made, so a call on one is EBADF. */
	SYM(rsocket) { N(rsocket(AF_INET, SOCK_STREAM, 0), ENOSYS); }
	char b[8];
	struct iovec iov = {b, sizeof b};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	socklen_t sl = sizeof sa;
	int fd = 3;
	SYM(rbind) { N(rbind(fd, (struct sockaddr *)&sa, sizeof sa), EBADF); }
	SYM(rlisten) { N(rlisten(fd, 1), EBADF); }
	SYM(raccept) { N(raccept(fd, NULL, NULL), EBADF); }
	SYM(rconnect) { N(rconnect(fd, (struct sockaddr *)&sa, sizeof sa), EBADF); }
	SYM(rshutdown) { N(rshutdown(fd, SHUT_RDWR), EBADF); }
	SYM(rclose) { N(rclose(fd), EBADF); }
	SYM(rrecv) { N(rrecv(fd, b, sizeof b, 0), EBADF); }
	SYM(rrecvfrom) { N(rrecvfrom(fd, b, sizeof b, 0, NULL, NULL), EBADF); }
	SYM(rrecvmsg) { N(rrecvmsg(fd, &mh, 0), EBADF); }
	SYM(rsend) { N(rsend(fd, b, sizeof b, 0), EBADF); }
	SYM(rsendto) { N(rsendto(fd, b, sizeof b, 0, (struct sockaddr *)&sa, sizeof sa), EBADF); }
	SYM(rsendmsg) { N(rsendmsg(fd, &mh, 0), EBADF); }
	SYM(rread) { N(rread(fd, b, sizeof b), EBADF); }
	SYM(rreadv) { N(rreadv(fd, &iov, 1), EBADF); }
	SYM(rwrite) { N(rwrite(fd, b, sizeof b), EBADF); }
	SYM(rwritev) { N(rwritev(fd, &iov, 1), EBADF); }
	SYM(rgetpeername) { N(rgetpeername(fd, (struct sockaddr *)&sa, &sl), EBADF); }
	SYM(rgetsockname) { N(rgetsockname(fd, (struct sockaddr *)&sa, &sl), EBADF); }
	SYM(rsetsockopt) { N(rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &fd, sizeof fd), EBADF); }
	SYM(rgetsockopt) { N(rgetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, b, &sl), EBADF); }
	SYM(rfcntl) { N(rfcntl(fd, F_GETFL), EBADF); }
	SYM(riomap) { N(riomap(fd, b, sizeof b, PROT_WRITE, 0, -1), EBADF); }
	SYM(riounmap) { N(riounmap(fd, b, sizeof b), EBADF); }
	SYM(riowrite) {
		errno = 0;
		T(riowrite(fd, b, sizeof b, 0, 0) == (size_t)-1 && errno == EBADF);
	}
	SYM(rpoll) {
		int p[2];
		T(pipe(p) == 0 && write(p[1], "x", 1) == 1);
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		T(rpoll(&pfd, 1, 1000) == 1 && (pfd.revents & POLLIN));
		N(rpoll(NULL, 1, 0), EFAULT);
		close(p[0]);
		close(p[1]);
	}
	SYM(rselect) {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(0, &r);
		struct timeval tv = {0, 0};
		T(rselect(1, &r, NULL, NULL, &tv) >= 0);
		N(rselect(-1, NULL, NULL, NULL, &tv), EINVAL);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		DIE("usage: sweep PORT [NAME...]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	verbs();
	rdmacm(atoi(argv[1]));
	printf("sweep: %d functions called, %d failed\n", symbols, failed);
	/* Where each function of the libraries' tables is found. */
	for (int i = 2; i < argc; i++) {
		Dl_info in;
		void *f = dlsym(RTLD_DEFAULT, argv[i]);
		const char *where = f && dladdr(f, &in) && in.dli_fname ? in.dli_fname : "none";
		const char *slash = strrchr(where, '/');
		printf("where %s %s\n", argv[i], slash ? slash + 1 : where);
	}
	return failed ? 1 : 0;
}
