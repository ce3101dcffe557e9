/*
 * rdmacm_check: a librdmacm program of our own, run preloaded by
 * TestRDMACMCalls. One process, one device: a listener and a client on
 * goroce0 ($GOROCE_ADDR), the client's REQ crossing the loopback to the
 * device's own CM. It prints one line per check; the test compares them
 * with what librdmacm gives over the kernel's rdma_cm.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

static const char *errname(int e)
{
	switch (e) {
	case 0: return "0";
	case EAGAIN: return "EAGAIN";
	case EINVAL: return "EINVAL";
	case ENOSYS: return "ENOSYS";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case EADDRINUSE: return "EADDRINUSE";
	case ENODEV: return "ENODEV";
	}
	static char b[32];
	snprintf(b, sizeof b, "errno %d", e);
	return b;
}

/* result is a call's outcome: "0", or the errno of a -1. */
static const char *result(int ret) { return ret ? errname(errno) : "0"; }

/* next waits with poll() for the channel's next event and takes it. */
static struct rdma_cm_event *next(struct rdma_event_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	if (poll(&p, 1, 20000) != 1)
		DIE("poll: no event");
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(ch, &e))
		DIE("rdma_get_cm_event: %s", strerror(errno));
	return e;
}

int main(void)
{
	const char *addr = getenv("GOROCE_ADDR");
	struct sockaddr_in sin = {.sin_family = AF_INET};
	if (!addr || inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		DIE("GOROCE_ADDR is not an IPv4 address");

	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	printf("rdma_get_devices: %d, %s\n", n, devs && devs[0] ? ibv_get_device_name(devs[0]->device) : "none");
	rdma_free_devices(devs);

	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		DIE("rdma_create_event_channel: %s", strerror(errno));
	int fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	struct rdma_cm_event *e;
	printf("get_cm_event on an empty non-blocking channel: %s\n", result(rdma_get_cm_event(ch, &e)));
	fcntl(ch->fd, F_SETFL, fl);

	struct rdma_cm_id *lis, *cli;
	if (rdma_create_id(ch, &lis, "listener", RDMA_PS_TCP) || rdma_create_id(ch, &cli, "client", RDMA_PS_TCP))
		DIE("rdma_create_id: %s", strerror(errno));
	struct sockaddr_in foreign = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000201)}; /* 192.0.2.1 */
	printf("bind to another host's address: %s\n", result(rdma_bind_addr(lis, (struct sockaddr *)&foreign)));
	if (rdma_bind_addr(lis, (struct sockaddr *)&sin) || rdma_listen(lis, 4))
		DIE("bind, listen: %s", strerror(errno));
	uint16_t port = ntohs(rdma_get_src_port(lis));
	printf("listener: port picked %d, verbs %d, port_num %d\n", port != 0, lis->verbs != NULL, lis->port_num);
	struct rdma_cm_id *other;
	if (rdma_create_id(ch, &other, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id: %s", strerror(errno));
	printf("bind to the listener's port: %s\n", result(rdma_bind_addr(other, rdma_get_local_addr(lis))));
	rdma_destroy_id(other);

	struct sockaddr_in dst = sin;
	dst.sin_port = htons(port);
	if (rdma_resolve_addr(cli, NULL, (struct sockaddr *)&dst, 2000))
		DIE("rdma_resolve_addr: %s", strerror(errno));
	e = next(ch);
	printf("%s: the client's %d, verbs %d, dst port %d\n", rdma_event_str(e->event), e->id == cli, cli->verbs != NULL,
	       ntohs(rdma_get_dst_port(cli)) == port);
	rdma_ack_cm_event(e);
	if (rdma_resolve_route(cli, 2000))
		DIE("rdma_resolve_route: %s", strerror(errno));
	e = next(ch);
	printf("%s: paths %d\n", rdma_event_str(e->event), cli->route.num_paths);
	rdma_ack_cm_event(e);

	struct ibv_pd *pd = ibv_alloc_pd(cli->verbs);
	struct ibv_cq *cq = ibv_create_cq(cli->verbs, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!pd || !cq || rdma_create_qp(cli, pd, &qa))
		DIE("pd, cq, rdma_create_qp: %s", strerror(errno));
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	ibv_query_qp(cli->qp, &attr, IBV_QP_STATE, &init);
	printf("rdma_create_qp: the QP is in INIT: %d\n", attr.qp_state == IBV_QPS_INIT);

	static const char hello[] = "hello from the client";
	struct rdma_conn_param cp = {.private_data = hello, .private_data_len = sizeof hello,
				     .responder_resources = 1, .initiator_depth = 2, .retry_count = 7, .rnr_retry_count = 6};
	if (rdma_connect(cli, &cp))
		DIE("rdma_connect: %s", strerror(errno));
	e = next(ch);
	struct rdma_conn_param *rp = &e->param.conn;
	printf("%s: listen_id %d, new id %d, context %s, private data %d bytes, starts as sent %d, "
	       "responder_resources %d, initiator_depth %d, rnr_retry_count %d, qp_num %d\n",
	       rdma_event_str(e->event), e->listen_id == lis, e->id != lis && e->id != cli,
	       e->id->context ? (const char *)e->id->context : "NULL", rp->private_data_len,
	       rp->private_data && !memcmp(rp->private_data, hello, sizeof hello), rp->responder_resources,
	       rp->initiator_depth, rp->rnr_retry_count, rp->qp_num == cli->qp->qp_num);
	struct rdma_cm_id *req = e->id;
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(req);
	printf("the request comes from the client's address %d and port %d\n", peer->sin_addr.s_addr == sin.sin_addr.s_addr,
	       peer->sin_port == rdma_get_src_port(cli));
	rdma_ack_cm_event(e);
	static const char no[] = "not today";
	printf("rdma_reject: %s\n", result(rdma_reject(req, no, sizeof no)));
	e = next(ch);
	printf("%s: the client's %d, status %d, private data starts as sent %d\n", rdma_event_str(e->event), e->id == cli,
	       e->status, e->param.conn.private_data && !memcmp(e->param.conn.private_data, no, sizeof no));
	rdma_ack_cm_event(e);

	printf("rdma_set_option REUSEADDR: %s\n",
	       result(rdma_set_option(cli, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &(int){1}, sizeof(int))));
	printf("rdma_set_option TOS: %s\n",
	       result(rdma_set_option(cli, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &(uint8_t){32}, 1)));
	printf("rdma_join_multicast: %s\n", result(rdma_join_multicast(cli, (struct sockaddr *)&dst, NULL)));
	printf("rdma_init_qp_attr: %s\n", result(rdma_init_qp_attr(cli, &attr, &(int){0})));
	printf("rdma_establish: %s\n", result(rdma_establish(cli)));
	printf("rdma_event_str of an unknown event: %s\n", rdma_event_str(99));

	struct rdma_addrinfo hints = {.ai_flags = RAI_NUMERICHOST, .ai_port_space = RDMA_PS_TCP}, *res;
	int ret = rdma_getaddrinfo(addr, "7471", &hints, &res);
	if (ret)
		DIE("rdma_getaddrinfo: %d", ret);
	struct sockaddr_in *d = (struct sockaddr_in *)res->ai_dst_addr;
	printf("rdma_getaddrinfo: dst %d port %d, qp_type RC %d\n", d && d->sin_addr.s_addr == sin.sin_addr.s_addr,
	       d ? ntohs(d->sin_port) : 0, res->ai_qp_type == IBV_QPT_RC);
	rdma_freeaddrinfo(res);

	rdma_destroy_qp(cli);
	printf("rdma_destroy_qp: id->qp %d\n", cli->qp != NULL);
	printf("destroy ids: %s %s %s\n", result(rdma_destroy_id(req)), result(rdma_destroy_id(cli)), result(rdma_destroy_id(lis)));
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(ch);
	return 0;
}
