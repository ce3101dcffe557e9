/*
 * idle_poll: a program whose one thread, confined to one CPU, spins on
 * ibv_poll_cq, as perftest's does under taskset. Built by the tests with
 * gcc ... -libverbs, run preloaded with GOMAXPROCS=1. It prints, for each
 * phase, the polls and the nanoseconds the phase took:
 *
 *   idle: 20000 polls of a CQ nothing fills
 *   rnr:  a SEND of 64 bytes from an RC QP to itself with no receive
 *         posted (rnr_retry 7: retried for ever, min_rnr_timer 0.01 ms),
 *         then 20000 polls, then the receive, then polls until the SEND
 *         completes: every retry waits for the QP's RNR timer, which only
 *         the device's goroutines run; the completions' status and the
 *         received bytes follow.
 *
 * It closes goroce0 at the end, so that GOROCE_DEBUG prints its counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/* The most polls the rnr phase waits for its completions. */
#define MAX_POLLS 20000000L

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static struct ibv_cq *cq;
static struct ibv_qp *qp;

/* loop_qp makes qp an RC QP connected to itself on goroce0. */
static void loop_qp(struct ibv_context *ctx, struct ibv_pd *pd)
{
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid) || !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		DIE("gid/cq");
	struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!(qp = ibv_create_qp(pd, &init)))
		DIE("create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qp->qp_num,
				 .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
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

int main(void)
{
	/* One CPU before the first verb loads the core: its runtime starts
	 * with the affinity it finds. */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof one, &one))
		DIE("sched_setaffinity: %s", strerror(errno));

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])) || !(pd = ibv_alloc_pd(ctx)))
		DIE("no device");
	static char src[64], dst[64];
	struct ibv_mr *ms = ibv_reg_mr(pd, src, sizeof src, 0);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE);
	if (!ms || !md)
		DIE("reg_mr: %s", strerror(errno));
	loop_qp(ctx, pd);
	struct ibv_wc wc[4];

	long t = now_ns();
	for (int i = 0; i < 20000; i++)
		if (ibv_poll_cq(cq, 4, wc) != 0)
			DIE("idle: a completion from a CQ nothing fills");
	printf("idle: polls 20000 ns %ld\n", now_ns() - t);

	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (char)(i * 7 + 1);
	struct ibv_sge s = {(uintptr_t)src, sizeof src, ms->lkey}, r = {(uintptr_t)dst, sizeof dst, md->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &r, .num_sge = 1}, *rbad;
	t = now_ns();
	if (ibv_post_send(qp, &wr, &bad))
		DIE("post_send: %s", strerror(errno));
	long polls = 0;
	for (; polls < 20000; polls++)
		if (ibv_poll_cq(cq, 4, wc) != 0)
			DIE("rnr: a completion before the receive was posted");
	if (ibv_post_recv(qp, &rwr, &rbad))
		DIE("post_recv: %s", strerror(errno));
	int got = 0, ok = 1;
	while (got < 2 && polls < MAX_POLLS) {
		int n = ibv_poll_cq(cq, 4, wc);
		if (n < 0)
			DIE("poll_cq: %s", strerror(errno));
		for (int i = 0; i < n; i++)
			ok &= wc[i].status == IBV_WC_SUCCESS;
		got += n;
		polls++;
	}
	if (got < 2)
		DIE("rnr: %d of 2 completions after %ld polls", got, polls);
	printf("rnr: polls %ld ns %ld status %s data %s\n", polls, now_ns() - t,
	       ok ? "success" : "failed", memcmp(src, dst, sizeof src) ? "differs" : "intact");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(ms) || ibv_dereg_mr(md) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(list);
	return 0;
}
