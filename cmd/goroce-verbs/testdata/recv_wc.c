/*
 * recv_wc: what a receive completion and a UD receive buffer hold, printed
 * so that the same program on rxe (in the rxe lab) and on goroce0 (preloaded)
 * prints the same lines when the two agree. One process, one device: a UD
 * QP sends SENDs (without and with immediate data) to a second UD QP of the
 * same port through an AH to the port's own GID, and an RC QP connected to a
 * second RC QP does the same; the program prints every field of each
 * receive's struct ibv_wc and the 40-byte GRH area at the head of the UD
 * buffers, field by field, with the values that depend on the machine (QP
 * numbers, addresses, the IPv4 Identification) given as what they equal.
 *
 *	recv_wc [GID_INDEX]   (default 0)
 *
 * Built with gcc -O2 -Wall -o recv_wc recv_wc.c -libverbs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gid_index;
static uint8_t buf[8192];
static struct ibv_mr *mr;

static struct ibv_qp *make_qp(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = type,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		DIE("create_qp: %m");
	return qp;
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	if (ibv_modify_qp(qp, a, mask))
		DIE("modify_qp to %s: %m", what);
}

static void ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "INIT");
	a.qp_state = IBV_QPS_RTR;
	modify(qp, &a, IBV_QP_STATE, "RTR");
	a.qp_state = IBV_QPS_RTS;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
}

static void rc_connect(struct ibv_qp *qp, uint32_t peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer,
				 .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				 .ah_attr = {.is_global = 1, .port_num = 1,
					     .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}}};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 18, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			       IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

/* wait_wc polls the CQ for the completion of wr_id, for at most 10 s; the
 * completions it meets first are kept for the next calls. */
static struct ibv_wc wait_wc(uint64_t wr_id)
{
	static struct ibv_wc kept[8];
	static int nkept;
	for (int i = 0; i < nkept; i++)
		if (kept[i].wr_id == wr_id) {
			struct ibv_wc wc = kept[i];
			kept[i] = kept[--nkept];
			return wc;
		}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			DIE("poll_cq: %d", n);
		if (n == 1 && wc.wr_id == wr_id)
			return wc;
		if (n == 1 && wc.status != IBV_WC_SUCCESS)
			DIE("wr %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		if (n == 1 && nkept < 8)
			kept[nkept++] = wc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			DIE("no completion of wr %llu in 10 s", (unsigned long long)wr_id);
	}
}

static const char *qpn_name(uint32_t n, struct ibv_qp *sender, struct ibv_qp *receiver)
{
	static char b[32];
	if (n == sender->qp_num)
		return "the sender's QPN";
	if (n == receiver->qp_num)
		return "the receiver's QPN";
	snprintf(b, sizeof b, "%u", n);
	return b;
}

/* print_wc prints every field of a receive completion of a SEND of n bytes. */
static void print_wc(const char *what, const struct ibv_wc *wc, struct ibv_qp *sender, struct ibv_qp *receiver,
		     uint32_t n, int ud)
{
	printf("%s: status %s, opcode %d, byte_len %s%u, vendor_err %u\n", what, ibv_wc_status_str(wc->status),
	       wc->opcode, ud ? "40 + " : "", wc->byte_len - (ud ? 40 : 0), wc->vendor_err);
	if (wc->byte_len != n + (ud ? 40 : 0))
		printf("%s: byte_len %u, want %u\n", what, wc->byte_len, n + (ud ? 40 : 0));
	printf("%s: wc_flags 0x%x, imm_data 0x%08x\n", what, wc->wc_flags, ntohl(wc->imm_data));
	printf("%s: qp_num %s, ", what, qpn_name(wc->qp_num, sender, receiver));
	printf("src_qp %s\n", qpn_name(wc->src_qp, sender, receiver));
	printf("%s: sl %u, slid %u, dlid_path_bits %u, pkey_index %u\n", what, wc->sl, wc->slid, wc->dlid_path_bits,
	       wc->pkey_index);
}

static uint16_t ip_checksum(const uint8_t *h)
{
	uint32_t s = 0;
	for (int i = 0; i < 20; i += 2)
		s += h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

/* print_grh prints the 40-byte GRH area of a UD receive of n bytes (with
 * immediate data: imm), with the addresses as what they equal (the port's
 * GID is both ends). */
static void print_grh(const char *what, const uint8_t *g, uint32_t n, int imm, uint8_t hop_limit)
{
	/* UDP, BTH, DETH, ImmDt, payload, pad, ICRC */
	uint32_t udp = 8 + 12 + 8 + (imm ? 4 : 0) + n + ((4 - n % 4) % 4) + 4;
	if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)gid.raw)) {
		int zero = 1;
		for (int i = 0; i < 20; i++)
			zero &= g[i] == 0;
		const uint8_t *h = g + 20;
		printf("%s: GRH area bytes 0-19 zero %d; IPv4 header at 20: version/ihl 0x%02x, tos 0x%02x, "
		       "total length %s, DF %d, fragment offset %d\n",
		       what, zero, h[0], h[1], (h[2] << 8 | h[3]) == 20 + udp ? "the packet's" : "other",
		       (h[6] & 0x40) != 0, (h[6] & 0x1f) << 8 | h[7]);
		printf("%s: ttl %s, protocol %u, checksum %s, source %s, destination %s\n", what,
		       h[8] == hop_limit ? "the AH's hop_limit" : h[8] == 64 ? "64" : "other", h[9],
		       ip_checksum(h) == 0 ? "valid" : "invalid",
		       memcmp(h + 12, gid.raw + 12, 4) ? "other" : "the GID's address",
		       memcmp(h + 16, gid.raw + 12, 4) ? "other" : "the GID's address");
	} else {
		uint32_t vtf = (uint32_t)g[0] << 24 | g[1] << 16 | g[2] << 8 | g[3];
		printf("%s: GRH area: IPv6 header, version %u, traffic class 0x%02x, flow label %s, payload length %s\n",
		       what, vtf >> 28, (vtf >> 20) & 0xff, (vtf & 0xfffff) ? "non-zero" : "0",
		       (g[4] << 8 | g[5]) == udp ? "the packet's" : "other");
		printf("%s: next header %u, hop limit %s, source %s, destination %s\n", what, g[6],
		       g[7] == hop_limit ? "the AH's hop_limit" : g[7] == 64 ? "64" : "other",
		       memcmp(g + 8, gid.raw, 16) ? "other" : "the GID", memcmp(g + 24, gid.raw, 16) ? "other" : "the GID");
	}
}

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, uint8_t *at, uint32_t len)
{
	memset(at, 0xa5, len);
	struct ibv_sge s = {(uintptr_t)at, len, mr->lkey};
	struct ibv_recv_wr w = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad;
	if (ibv_post_recv(qp, &w, &bad))
		DIE("post_recv: %m");
}

static void post_send(struct ibv_qp *qp, uint64_t wr_id, uint8_t *at, uint32_t len, struct ibv_ah *ah,
		      uint32_t remote_qpn, int with_imm)
{
	struct ibv_sge s = {(uintptr_t)at, len, mr->lkey};
	struct ibv_send_wr w = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1,
				.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0x12345678)}, *bad;
	if (ah) {
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = remote_qpn;
		w.wr.ud.remote_qkey = 0x11111111;
	}
	if (ibv_post_send(qp, &w, &bad))
		DIE("post_send: %m");
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
		DIE("query_gid %d: %m", gid_index);
	if (!(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		DIE("alloc_pd/create_cq: %m");
	if (!(mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)))
		DIE("reg_mr: %m");
	printf("GID %s\n", IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)gid.raw) ? "IPv4-mapped" : "IPv6");

	struct ibv_qp *u1 = make_qp(IBV_QPT_UD), *u2 = make_qp(IBV_QPT_UD);
	ud_ready(u1);
	ud_ready(u2);
	const uint8_t hop_limit = 37;
	struct ibv_ah_attr aha = {.is_global = 1, .port_num = 1,
				  .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = hop_limit}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aha);
	if (!ah)
		DIE("create_ah: %m");
	static const uint32_t sizes[] = {6, 16};
	for (int imm = 0; imm < 2; imm++) {
		uint32_t n = sizes[imm];
		char what[32];
		snprintf(what, sizeof what, "UD SEND%s %u B", imm ? " with imm" : "", n);
		post_recv(u2, 1, buf + 4096, 40 + 64);
		memcpy(buf, "datagram-payload", 16);
		post_send(u1, 2, buf, n, ah, u2->qp_num, imm);
		struct ibv_wc wc = wait_wc(1);
		wait_wc(2);
		print_wc(what, &wc, u1, u2, n, 1);
		print_grh(what, buf + 4096, n, imm, hop_limit);
		printf("%s: payload at 40 %s, the byte after it %s\n", what,
		       memcmp(buf + 4096 + 40, buf, n) ? "differs" : "as sent",
		       buf[4096 + 40 + n] == 0xa5 ? "untouched" : "written");
	}

	struct ibv_qp *r1 = make_qp(IBV_QPT_RC), *r2 = make_qp(IBV_QPT_RC);
	rc_connect(r1, r2->qp_num);
	rc_connect(r2, r1->qp_num);
	for (int imm = 0; imm < 2; imm++) {
		char what[32];
		snprintf(what, sizeof what, "RC SEND%s 16 B", imm ? " with imm" : "");
		post_recv(r2, 3, buf + 4096, 64);
		post_send(r1, 4, buf, 16, NULL, 0, imm);
		struct ibv_wc wc = wait_wc(3);
		wait_wc(4);
		print_wc(what, &wc, r1, r2, 16, 0);
		printf("%s: data at 0 %s\n", what, memcmp(buf + 4096, buf, 16) ? "differs" : "as sent");
	}
	return 0;
}
