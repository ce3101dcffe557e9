/*
 * wrloop: a posting loop, RDMA WRITEs of -s bytes in batches of -b on one
 * RC QP, through the ibv_wr_* API (-m wr: ibv_wr_start, ibv_wr_rdma_write
 * and ibv_wr_set_sge per WR, ibv_wr_complete) or through ibv_post_send
 * (-m post: the batch's WRs filled in and posted as one list), the rest
 * the same: the QP is made by ibv_create_qp_ex either way, the last WR of
 * a batch is signaled, and the loop waits for its completion before the
 * next batch. The QP writes to a second one of the same device (goroce0,
 * preloaded). It prints perftest's shape of table:
 *
 *	 #bytes  #iterations  batch  post[MWR/s]  loop[MWR/s]
 *
 * post is the WRs over the time spent building and posting them (the
 * posting calls, timed around each batch), loop the WRs over the whole
 * loop's time. bench/cmd/verbscompare builds it with gcc -libverbs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define DIE(...)                                       \
	do {                                           \
		fprintf(stderr, "wrloop: " __VA_ARGS__); \
		fputc('\n', stderr);                   \
		exit(1);                               \
	} while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void connect_qp(struct ibv_qp *qp, uint32_t peer, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS");
}

int main(int argc, char **argv)
{
	int n = 100000, batch = 16, size = 64, wr = -1, opt;
	while ((opt = getopt(argc, argv, "m:n:b:s:")) != -1) {
		switch (opt) {
		case 'm': wr = !strcmp(optarg, "wr") ? 1 : !strcmp(optarg, "post") ? 0 : -1; break;
		case 'n': n = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		default: wr = -1;
		}
	}
	if (wr < 0 || n < 1 || batch < 1 || batch > 1024 || size < 1 || size > 4096)
		DIE("usage: wrloop -m wr|post [-n WRs] [-b batch (1-1024)] [-s bytes (1-4096)]");
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!ctx)
		DIE("no device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	union ibv_gid gid;
	if (!pd || ibv_query_gid(ctx, 1, 0, &gid))
		DIE("pd/gid");
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * batch + 16, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	static char src[4096], dst[65536];
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof src, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!cq || !rcq || !smr || !dmr)
		DIE("cq/mr: %s", strerror(errno));
	struct ibv_qp_init_attr_ex a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
					.cap = {.max_send_wr = 2 * batch + 16, .max_recv_wr = 1, .max_send_sge = 1,
						.max_recv_sge = 1},
					.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
	a.send_cq = a.recv_cq = rcq;
	struct ibv_qp *peer = ibv_create_qp_ex(ctx, &a);
	struct ibv_qp_ex *x = qp ? ibv_qp_to_qp_ex(qp) : NULL;
	if (!qp || !peer || !x)
		DIE("create_qp_ex: %s", strerror(errno));
	connect_qp(qp, peer->qp_num, &gid);
	connect_qp(peer, qp->qp_num, &gid);

	struct ibv_send_wr *wrs = calloc(batch, sizeof *wrs);
	struct ibv_sge *sges = calloc(batch, sizeof *sges);
	if (!wrs || !sges)
		DIE("no memory");
	double posting = 0, start = now();
	for (int done = 0; done < n;) {
		int k = n - done < batch ? n - done : batch;
		double t0 = now();
		if (wr) {
			ibv_wr_start(x);
			for (int i = 0; i < k; i++) {
				x->wr_id = done + i;
				x->wr_flags = i == k - 1 ? IBV_SEND_SIGNALED : 0;
				ibv_wr_rdma_write(x, dmr->rkey, (uintptr_t)dst + (size_t)(i % 16) * 4096);
				ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src, size);
			}
			if (ibv_wr_complete(x))
				DIE("ibv_wr_complete: %s", strerror(errno));
		} else {
			for (int i = 0; i < k; i++) {
				sges[i] = (struct ibv_sge){(uintptr_t)src, (uint32_t)size, smr->lkey};
				wrs[i] = (struct ibv_send_wr){.wr_id = done + i, .sg_list = &sges[i], .num_sge = 1,
							      .opcode = IBV_WR_RDMA_WRITE,
							      .send_flags = i == k - 1 ? IBV_SEND_SIGNALED : 0,
							      .next = i + 1 < k ? &wrs[i + 1] : NULL};
				wrs[i].wr.rdma.remote_addr = (uintptr_t)dst + (size_t)(i % 16) * 4096;
				wrs[i].wr.rdma.rkey = dmr->rkey;
			}
			struct ibv_send_wr *bad;
			if (ibv_post_send(qp, wrs, &bad))
				DIE("ibv_post_send");
		}
		posting += now() - t0;
		done += k;
		struct ibv_wc wc;
		int got;
		while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
			;
		if (got < 0 || wc.status != IBV_WC_SUCCESS)
			DIE("completion: %s", got < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
	}
	double loop = now() - start;
	printf(" #bytes  #iterations  batch  post[MWR/s]  loop[MWR/s]\n");
	printf(" %-7d %-12d %-6d %-12.3f %.3f\n", size, n, batch, n / posting / 1e6, n / loop / 1e6);
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(peer) || ibv_destroy_cq(cq) || ibv_destroy_cq(rcq) || ibv_dereg_mr(smr) ||
	    ibv_dereg_mr(dmr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		DIE("teardown");
	ibv_free_device_list(list);
	return 0;
}
