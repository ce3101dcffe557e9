/*
 * async_check: ibv_destroy_qp against a thread that holds the QP's async
 * event, as UCX's async thread does while its main thread tears down.
 * rdma-core's destroy verbs wait until every async event the program took
 * for the object is acknowledged (ibv_cmd_destroy_qp waits for the kernel's
 * events_reported), so that ibv_ack_async_event never touches a freed QP;
 * an event still queued when the QP is destroyed is dropped (the kernel's
 * uverbs releases it). One process, one device, an RC QP connected to a
 * second one of the same port: a WRITE with a bad lkey fails the QP, whose
 * IBV_EVENT_QP_FATAL a second thread takes and acknowledges only a while
 * later.
 *
 *	async_check [GID_INDEX]   (default 0)
 *
 * Built with gcc -O2 -Wall -o async_check async_check.c -libverbs -lpthread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gid_index;
static uint8_t buf[4096];
static struct ibv_mr *mr;

static struct ibv_qp *make_qp(void)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		DIE("create_qp: %m");
	return qp;
}

static void rc_connect(struct ibv_qp *qp, uint32_t peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT: %m");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer,
				 .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				 .ah_attr = {.is_global = 1, .port_num = 1,
					     .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}}};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR: %m");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS: %m");
}

/* fail_qp posts a WRITE with a bad lkey on qp and waits for its error
 * completion: the QP goes to the error state, with IBV_EVENT_QP_FATAL. */
static void fail_qp(struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct ibv_sge s = {(uintptr_t)buf, 16, mr->lkey ^ 0x5a5a00};
	struct ibv_send_wr w = {.wr_id = 7, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = {.remote_addr = (uintptr_t)buf + 2048, .rkey = mr->rkey}}, *bad;
	if (ibv_post_send(qp, &w, &bad))
		DIE("post_send: %m");
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n == 1 && wc.wr_id == 7 && wc.status != IBV_WC_SUCCESS)
			return;
		if (n == 1 && wc.wr_id == 7)
			DIE("the WRITE with a bad lkey succeeded");
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			DIE("no completion of the WRITE in 10 s");
	}
	(void)peer;
}

static struct ibv_qp *watched;
static atomic_int got, acked;

/* holder takes async events until it gets the watched QP's, holds it for
 * 300 ms, and acknowledges it. */
static void *holder(void *arg)
{
	(void)arg;
	for (;;) {
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev))
			DIE("get_async_event: %m");
		if (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == watched) {
			atomic_store(&got, 1);
			usleep(300 * 1000);
			atomic_store(&acked, 1);
			ibv_ack_async_event(&ev);
			return NULL;
		}
		ibv_ack_async_event(&ev);
	}
}

/* wait_flag waits, for 10 s at most, until *f is set. */
static void wait_flag(atomic_int *f, const char *what)
{
	for (int i = 0; i < 10000 && !atomic_load(f); i++)
		usleep(1000);
	if (!atomic_load(f))
		DIE("%s: not in 10 s", what);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		gid_index = atoi(argv[1]);
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		DIE("no RDMA device");
	if (!(ctx = ibv_open_device(list[0])))
		DIE("open_device: %m");
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		DIE("query_gid: %m");
	if (!(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		DIE("alloc_pd/create_cq: %m");
	if (!(mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		DIE("reg_mr: %m");

	/* A QP whose event a thread holds while the main thread destroys it. */
	struct ibv_qp *a = make_qp(), *b = make_qp();
	rc_connect(a, b->qp_num);
	rc_connect(b, a->qp_num);
	watched = a;
	pthread_t th;
	pthread_create(&th, NULL, holder, NULL);
	fail_qp(a, b);
	wait_flag(&got, "IBV_EVENT_QP_FATAL of the failed QP");
	if (ibv_destroy_qp(a))
		DIE("destroy_qp: %m");
	printf("destroy_qp of a QP whose event another thread holds: returned after the ack %d\n", atomic_load(&acked));
	pthread_join(th, NULL);

	/* A QP destroyed before anyone takes its event: the event is gone. */
	struct ibv_qp *c = make_qp();
	rc_connect(c, b->qp_num);
	fail_qp(c, b);
	/* Let the event be queued before the QP goes: the case this checks. */
	usleep(100 * 1000);
	if (ibv_destroy_qp(c))
		DIE("destroy_qp: %m");
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	int stale = 0;
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	while (poll(&p, 1, 100) == 1) {
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev))
			break;
		stale += ev.element.qp == c;
		ibv_ack_async_event(&ev);
	}
	printf("the event of a QP destroyed before anyone took it: delivered %d times\n", stale);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
