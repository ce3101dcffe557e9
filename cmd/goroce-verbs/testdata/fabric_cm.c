/*
 * fabric_cm: the rdma_cm calls libfabric 1.17's verbs provider makes to
 * find a device's addresses and connect an FI_EP_MSG endpoint, in one
 * process on the device at argv[1] (an IPv4 address): its fi_getinfo
 * binds "localhost" to learn whether the ID lands on a device
 * (verbs_info.c vrb_get_rai_id, vrb_fill_addr), binds each interface's
 * address (vrb_ifa_rdma_info), asks rdma_getaddrinfo with the
 * destination in the hints alone (fi_verbs.c vrb_get_rdmacm_rai), and
 * connects with retry_count 15 (verbs_cm.c). It prints one line per
 * check, values that do not depend on the host, so that TestFabricCM can
 * compare goroce0's with what rxe0 printed in the rxe lab
 * (fabric_cm.rxe.txt).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#define DIE(...)                              \
	do {                                  \
		fprintf(stderr, __VA_ARGS__); \
		fprintf(stderr, "\n");        \
		exit(1);                      \
	} while (0)

static const char *result(int ret)
{
	if (!ret)
		return "0";
	switch (errno) {
	case EINVAL: return "EINVAL";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case EADDRINUSE: return "EADDRINUSE";
	case ENODEV: return "ENODEV";
	}
	static char b[32];
	snprintf(b, sizeof b, "errno %d", errno);
	return b;
}

/* next waits with poll() for the channel's next event, which must be
 * want, and takes it. */
static struct rdma_cm_event *next(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	if (poll(&p, 1, 20000) != 1)
		DIE("poll: no event (waiting for %s)", rdma_event_str(want));
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(ch, &e))
		DIE("rdma_get_cm_event: %s", strerror(errno));
	if (e->event != want)
		DIE("%s (status %d), want %s", rdma_event_str(e->event), e->status, rdma_event_str(want));
	return e;
}

static const struct sockaddr_in *in4(const struct sockaddr *sa)
{
	return sa && sa->sa_family == AF_INET ? (const struct sockaddr_in *)sa : NULL;
}

/* An RC QP on id's device with a 64-byte buffer, one receive posted. */
struct end {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[2][64]; /* [0] receives, [1] sends */
};

static void setup(struct rdma_cm_id *id, struct end *e)
{
	e->pd = ibv_alloc_pd(id->verbs);
	e->cq = e->pd ? ibv_create_cq(id->verbs, 4, NULL, NULL, 0) : NULL;
	e->mr = e->cq ? ibv_reg_mr(e->pd, e->buf, sizeof e->buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr qa = {.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!e->mr || rdma_create_qp(id, e->pd, &qa))
		DIE("pd, cq, mr, rdma_create_qp: %s", strerror(errno));
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf[0], .length = sizeof e->buf[0], .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(id->qp, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

/* await polls e's CQ, in a bounded loop, for the completion of wr_id. */
static void await(struct end *e, uint64_t wr_id)
{
	for (long i = 0; i < 2000000000L; i++) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(e->cq, 1, &wc);
		if (n < 0)
			DIE("ibv_poll_cq: %d", n);
		if (n == 0)
			continue;
		if (wc.status != IBV_WC_SUCCESS)
			DIE("wr %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		if (wc.wr_id == wr_id)
			return;
	}
	DIE("no completion of wr %llu", (unsigned long long)wr_id);
}

static void send_msg(struct rdma_cm_id *id, struct end *e, const char *msg)
{
	snprintf(e->buf[1], sizeof e->buf[1], "%s", msg);
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf[1], .length = strlen(msg) + 1, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	if (ibv_post_send(id->qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
	await(e, 2);
}

static void teardown(struct rdma_cm_id *id, struct end *e)
{
	rdma_destroy_qp(id);
	ibv_dereg_mr(e->mr);
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in dev = {.sin_family = AF_INET};
	if (argc != 2 || inet_pton(AF_INET, argv[1], &dev.sin_addr) != 1)
		DIE("usage: fabric_cm DEVICE-IPV4-ADDRESS");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		DIE("rdma_create_event_channel: %s", strerror(errno));

	/* fi_getinfo with no node: "localhost", passive, IPv4. */
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE | RAI_FAMILY, .ai_family = AF_INET,
				      .ai_qp_type = IBV_QPT_RC, .ai_port_space = RDMA_PS_TCP}, *res;
	if (rdma_getaddrinfo("localhost", NULL, &hints, &res))
		DIE("rdma_getaddrinfo localhost: %s", strerror(errno));
	const struct sockaddr_in *src = in4(res->ai_src_addr);
	printf("rdma_getaddrinfo localhost, passive: src loopback %d port %d, dst %d\n",
	       src && (ntohl(src->sin_addr.s_addr) >> 24) == 127, src ? ntohs(src->sin_port) : -1, res->ai_dst_addr != NULL);
	struct rdma_cm_id *lis;
	if (rdma_create_id(ch, &lis, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id: %s", strerror(errno));
	const char *r = result(rdma_bind_addr(lis, res->ai_src_addr));
	printf("bind to it: %s, verbs %d", r, lis->verbs != NULL);
	const struct sockaddr_in *local = in4(rdma_get_local_addr(lis));
	printf(", local address is it %d, port picked %d\n", local && local->sin_addr.s_addr == src->sin_addr.s_addr,
	       local && local->sin_port != 0);
	rdma_freeaddrinfo(res);

	/* The interface walk: the device's address binds to the device, one
	 * no interface has does not. */
	struct rdma_cm_id *probe;
	struct rdma_addrinfo numeric = {.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST};
	if (rdma_getaddrinfo(argv[1], NULL, &numeric, &res) || rdma_create_id(NULL, &probe, NULL, RDMA_PS_TCP))
		DIE("rdma_getaddrinfo %s, rdma_create_id: %s", argv[1], strerror(errno));
	r = result(rdma_bind_addr(probe, res->ai_src_addr));
	printf("bind to the device's address: %s, verbs %d\n", r, probe->verbs != NULL);
	rdma_freeaddrinfo(res);
	rdma_destroy_id(probe);
	struct sockaddr_in foreign = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000201)}; /* 192.0.2.1 */
	if (rdma_create_id(NULL, &probe, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id: %s", strerror(errno));
	printf("bind to an address of no interface: %s\n", result(rdma_bind_addr(probe, (struct sockaddr *)&foreign)));
	rdma_destroy_id(probe);

	r = result(rdma_listen(lis, 4));
	printf("listen on the loopback address: %s, verbs %d\n", r, lis->verbs != NULL);

	/* The client: the destination in the hints alone. */
	struct sockaddr_in dst = dev;
	dst.sin_port = rdma_get_src_port(lis);
	struct rdma_addrinfo dhints = {.ai_flags = RAI_FAMILY, .ai_family = AF_INET, .ai_qp_type = IBV_QPT_RC,
				       .ai_port_space = RDMA_PS_TCP, .ai_dst_addr = (struct sockaddr *)&dst,
				       .ai_dst_len = sizeof dst};
	if (rdma_getaddrinfo(NULL, NULL, &dhints, &res))
		DIE("rdma_getaddrinfo with hints alone: %s", strerror(errno));
	const struct sockaddr_in *d = in4(res->ai_dst_addr);
	printf("rdma_getaddrinfo with hints alone: dst as given %d, src %d, flags %d, family %d, qp_type %d, port space %d\n",
	       d && res->ai_dst_len == sizeof dst && !memcmp(d, &dst, sizeof dst), res->ai_src_addr != NULL,
	       res->ai_flags == dhints.ai_flags, res->ai_family == AF_INET, res->ai_qp_type == IBV_QPT_RC,
	       res->ai_port_space == RDMA_PS_TCP);
	struct rdma_cm_id *cli;
	if (rdma_create_id(ch, &cli, NULL, RDMA_PS_TCP) || rdma_resolve_addr(cli, res->ai_src_addr, res->ai_dst_addr, 2000))
		DIE("rdma_create_id, rdma_resolve_addr: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	local = in4(rdma_get_local_addr(cli));
	printf("resolved: verbs %d, local address is the device's %d\n", cli->verbs != NULL,
	       local && local->sin_addr.s_addr == dev.sin_addr.s_addr);
	if (rdma_resolve_route(cli, 2000))
		DIE("rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	struct end ce, se;
	setup(cli, &ce);
	struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 15,
				     .rnr_retry_count = 7};
	printf("rdma_connect with retry_count 15: %s\n", result(rdma_connect(cli, &cp)));

	struct rdma_cm_event *e = next(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *req = e->id;
	local = in4(rdma_get_local_addr(req));
	printf("CONNECT_REQUEST: to the listener %d, verbs %d, local address is the device's %d and port the "
	       "listener's %d, retry_count %d, rnr_retry_count %d\n",
	       e->listen_id == lis, req->verbs != NULL, local && local->sin_addr.s_addr == dev.sin_addr.s_addr,
	       local && local->sin_port == dst.sin_port, e->param.conn.retry_count, e->param.conn.rnr_retry_count);
	rdma_ack_cm_event(e);
	setup(req, &se);
	struct rdma_conn_param ap = {.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
	if (rdma_accept(req, &ap))
		DIE("rdma_accept: %s", strerror(errno));
	/* The two ESTABLISHED, in either order. */
	int established[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		e = next(ch, RDMA_CM_EVENT_ESTABLISHED);
		established[e->id == cli] = 1;
		rdma_ack_cm_event(e);
	}
	printf("ESTABLISHED: the request's %d, the client's %d\n", established[0], established[1]);

	send_msg(cli, &ce, "ping from the client");
	await(&se, 1);
	send_msg(req, &se, "pong from the listener");
	await(&ce, 1);
	printf("SEND both ways: the listener got %d, the client got %d\n", !strcmp(se.buf[0], "ping from the client"),
	       !strcmp(ce.buf[0], "pong from the listener"));

	/* The request's DISCONNECTED comes with the DREQ, and its
	 * rdma_disconnect sends the DREP that brings the client's (a
	 * TIMEWAIT_EXIT may come between). */
	if (rdma_disconnect(cli))
		DIE("rdma_disconnect: %s", strerror(errno));
	for (int n = 0; n < 2;) {
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		if (poll(&p, 1, 20000) != 1 || rdma_get_cm_event(ch, &e))
			DIE("no DISCONNECTED");
		if (e->event == RDMA_CM_EVENT_DISCONNECTED) {
			n++;
			if (e->id == req && rdma_disconnect(req))
				DIE("rdma_disconnect: %s", strerror(errno));
		} else if (e->event != RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			DIE("%s, want DISCONNECTED", rdma_event_str(e->event));
		}
		rdma_ack_cm_event(e);
	}
	printf("DISCONNECTED: both\n");
	teardown(cli, &ce);
	teardown(req, &se);
	printf("destroy ids: %s %s %s\n", result(rdma_destroy_id(req)), result(rdma_destroy_id(cli)),
	       result(rdma_destroy_id(lis)));
	rdma_destroy_event_channel(ch);
	return 0;
}
