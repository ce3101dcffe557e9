/*
 * rc_write_send: the classic first verbs program, as a tutorial has you
 * write it. Two processes, a server and a client, each open the first
 * RDMA device, register a buffer, create an RC queue pair, swap what the
 * other needs (QPN, PSN, rkey, buffer address, GID) over a TCP socket,
 * bring the QP through RESET -> INIT -> RTR -> RTS, and then:
 *
 *   client: RDMA WRITE "write from the client" into the server's buffer,
 *           then SEND "send from the client" to the server's receive;
 *   server: once that SEND has arrived, the same the other way round.
 *
 * Each side checks the bytes the other put into its memory, the WRITE
 * (which its CPU never saw arrive) and the SEND, and prints them.
 *
 *   gcc -O2 -o rc_write_send rc_write_send.c -libverbs
 *   ./rc_write_send [-p PORT]            # server
 *   ./rc_write_send [-p PORT] SERVER_IP  # client
 *
 * Chapter 15 of the course (docs/course/15-c-verbs.md) runs it on goroce
 * with `goroce exec --trace` and walks through what it puts on the wire.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG_SIZE 32 /* every message, NUL padded */
#define PORT_NUM 1  /* the device's port */
#define GID_INDEX 0 /* RoCE v2 GID of the port's address */

/* The buffer each side registers: where the peer's WRITE and SEND land,
 * and what this side writes and sends from. */
struct buffer {
	char write_in[MSG_SIZE]; /* the peer RDMA WRITEs here */
	char recv_in[MSG_SIZE];  /* the peer's SEND is received here */
	char write_out[MSG_SIZE];
	char send_out[MSG_SIZE];
};

/* What each side tells the other, over TCP, to connect the QPs. */
struct peer {
	uint32_t qpn, psn, rkey;
	uint64_t addr; /* of the peer's struct buffer */
	union ibv_gid gid;
};

static void die(const char *what)
{
	fprintf(stderr, "rc_write_send: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* tcp_connect returns a socket connected to the other side: the client
 * connects to host (retrying while the server starts), the server
 * (host NULL) accepts one connection. */
static int tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int fd, one = 1;

	if (!host)
		hints.ai_flags = AI_PASSIVE;
	if (getaddrinfo(host, port, &hints, &ai) != 0) {
		fprintf(stderr, "rc_write_send: cannot resolve %s:%s\n", host ? host : "*", port);
		exit(1);
	}
	fd = socket(ai->ai_family, ai->ai_socktype, 0);
	if (fd < 0)
		die("socket");
	if (host) {
		struct timespec wait = {0, 50 * 1000 * 1000};
		int tries;

		for (tries = 0; connect(fd, ai->ai_addr, ai->ai_addrlen) != 0; tries++) {
			if (errno != ECONNREFUSED || tries == 200)
				die("connect");
			nanosleep(&wait, NULL); /* the server is not listening yet */
		}
	} else {
		int lfd = fd;

		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lfd, 1) != 0)
			die("bind");
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		close(lfd);
	}
	freeaddrinfo(ai);
	return fd;
}

/* exchange sends what the peer needs about this side as one line of text
 * and reads the peer's line. */
static void exchange(int fd, const struct peer *me, struct peer *them)
{
	char line[128], gid[33];
	int i, n = 0;

	for (i = 0; i < 16; i++)
		sprintf(gid + 2 * i, "%02x", me->gid.raw[i]);
	snprintf(line, sizeof(line), "%06x %06x %08x %016llx %s\n", me->qpn, me->psn, me->rkey,
		 (unsigned long long)me->addr, gid);
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		die("write to the peer");
	while (n < (int)sizeof(line) - 1) {
		ssize_t r = read(fd, line + n, 1);

		if (r != 1)
			die("read from the peer");
		if (line[n++] == '\n')
			break;
	}
	line[n] = 0;
	unsigned long long addr;
	if (sscanf(line, "%x %x %x %llx %32s", &them->qpn, &them->psn, &them->rkey, &addr, gid) != 5) {
		fprintf(stderr, "rc_write_send: bad line from the peer: %s", line);
		exit(1);
	}
	them->addr = addr;
	for (i = 0; i < 16; i++)
		sscanf(gid + 2 * i, "%2hhx", &them->gid.raw[i]);
}

/* sync_peer waits until the peer has reached the same point. */
static void sync_peer(int fd)
{
	char c = 's';

	if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
		die("sync with the peer");
}

/* connect_qp takes the QP from INIT to RTS, aimed at the peer. */
static void connect_qp(struct ibv_qp *qp, enum ibv_mtu mtu, const struct peer *me, const struct peer *them)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = them->qpn,
		.rq_psn = them->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = {.dgid = them->gid, .sgid_index = GID_INDEX, .hop_limit = 64},
			.port_num = PORT_NUM,
		},
	};
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR");

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = me->psn;
	attr.timeout = 14;  /* 4.096 us * 2^14: 67 ms */
	attr.retry_cnt = 7;
	attr.rnr_retry = 7; /* retry for ever */
	attr.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS");
}

/* write_and_send posts an RDMA WRITE of write_out into the peer's
 * write_in, then a SEND of send_out. Both are signaled. */
static void write_and_send(struct ibv_qp *qp, struct ibv_mr *mr, struct buffer *buf, const struct peer *them)
{
	struct ibv_sge write_sge = {
		.addr = (uintptr_t)buf->write_out, .length = MSG_SIZE, .lkey = mr->lkey};
	struct ibv_sge send_sge = {
		.addr = (uintptr_t)buf->send_out, .length = MSG_SIZE, .lkey = mr->lkey};
	struct ibv_send_wr send_wr = {
		.wr_id = 2, .sg_list = &send_sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr write_wr = {
		.wr_id = 1, .next = &send_wr, .sg_list = &write_sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = them->addr + offsetof(struct buffer, write_in), .rkey = them->rkey}};
	struct ibv_send_wr *bad;

	if (ibv_post_send(qp, &write_wr, &bad))
		die("post the RDMA WRITE and the SEND");
}

/* wait_for polls the CQ until n completions have come, in whatever order,
 * and checks that each succeeded. */
static void wait_for(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc;

	while (n > 0) {
		int got = ibv_poll_cq(cq, 1, &wc);

		if (got < 0) {
			errno = -got;
			die("poll the CQ");
		}
		if (got == 0)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "rc_write_send: completion of wr_id %llu: %s\n",
				(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			exit(1);
		}
		printf("completion: wr_id %llu %s\n", (unsigned long long)wc.wr_id,
		       wc.opcode == IBV_WC_RDMA_WRITE ? "RDMA WRITE" : wc.opcode == IBV_WC_SEND ? "SEND" : "RECV");
		n--;
	}
}

/* check says what the peer put into field, and exits if it is not want. */
static void check(const char *what, const char *field, const char *want)
{
	printf("%s: \"%s\"\n", what, field);
	if (strncmp(field, want, MSG_SIZE) != 0) {
		fprintf(stderr, "rc_write_send: %s: want \"%s\"\n", what, want);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *port = "18515", *server_ip = NULL;
	const char *me_name, *peer_name;
	int opt;

	while ((opt = getopt(argc, argv, "p:")) != -1) {
		if (opt != 'p') {
			fprintf(stderr, "usage: %s [-p PORT] [SERVER_IP]\n", argv[0]);
			return 2;
		}
		port = optarg;
	}
	if (optind < argc)
		server_ip = argv[optind];
	me_name = server_ip ? "client" : "server";
	peer_name = server_ip ? "server" : "client";

	/* The device, its port and its GID. */
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		fprintf(stderr, "rc_write_send: no RDMA device\n");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("open the device");
	printf("%s: device %s\n", me_name, ibv_get_device_name(list[0]));
	ibv_free_device_list(list);
	struct ibv_port_attr port_attr;
	if (ibv_query_port(ctx, PORT_NUM, &port_attr))
		die("query the port");
	struct peer me = {0}, them;
	if (ibv_query_gid(ctx, PORT_NUM, GID_INDEX, &me.gid))
		die("query the GID");

	/* Protection domain, memory region, completion queue, queue pair. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("allocate a PD");
	struct buffer *buf = calloc(1, sizeof(*buf));
	if (!buf)
		die("calloc");
	snprintf(buf->write_out, MSG_SIZE, "write from the %s", me_name);
	snprintf(buf->send_out, MSG_SIZE, "send from the %s", me_name);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(*buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("register the MR");
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	if (!cq)
		die("create the CQ");
	struct ibv_qp_init_attr init_attr = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &init_attr);
	if (!qp)
		die("create the QP");

	/* RESET -> INIT: the port, and what the peer may do to our memory. */
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = PORT_NUM,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT");

	/* The receive for the peer's SEND, posted before the peer can send. */
	struct ibv_sge recv_sge = {.addr = (uintptr_t)buf->recv_in, .length = MSG_SIZE, .lkey = mr->lkey};
	struct ibv_recv_wr recv_wr = {.wr_id = 3, .sg_list = &recv_sge, .num_sge = 1}, *bad_recv;
	if (ibv_post_recv(qp, &recv_wr, &bad_recv))
		die("post the receive");

	/* Swap QPN, PSN, rkey and address with the peer. */
	srand48(getpid() * time(NULL));
	me.qpn = qp->qp_num;
	me.psn = lrand48() & 0xffffff;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	int fd = tcp_connect(server_ip, port);
	exchange(fd, &me, &them);
	printf("%s: local  QPN 0x%06x PSN 0x%06x rkey 0x%08x va=0x%llx\n", me_name, me.qpn, me.psn, me.rkey,
	       (unsigned long long)me.addr);
	printf("%s: remote QPN 0x%06x PSN 0x%06x rkey 0x%08x va=0x%llx\n", me_name, them.qpn, them.psn, them.rkey,
	       (unsigned long long)them.addr);

	/* INIT -> RTR -> RTS, then wait until the peer is there too. */
	connect_qp(qp, port_attr.active_mtu, &me, &them);
	sync_peer(fd);

	/* The client writes and sends first; the server answers once the
	 * client's SEND has arrived. RC delivers in order, so when the SEND's
	 * receive completes, the WRITE before it is in our memory too. */
	char want_write[MSG_SIZE], want_send[MSG_SIZE];
	snprintf(want_write, MSG_SIZE, "write from the %s", peer_name);
	snprintf(want_send, MSG_SIZE, "send from the %s", peer_name);
	if (server_ip) {
		write_and_send(qp, mr, buf, &them);
		wait_for(cq, 3); /* our WRITE and SEND, and the server's SEND */
	} else {
		wait_for(cq, 1); /* the client's SEND */
		write_and_send(qp, mr, buf, &them);
		wait_for(cq, 2); /* our WRITE and SEND */
	}
	check("received", buf->recv_in, want_send);
	check("written", buf->write_in, want_write);

	/* Tear down once the peer is done too: its last ACKs come from our QP. */
	sync_peer(fd);
	close(fd);
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("tear down");
	free(buf);
	printf("%s: done\n", me_name);
	return 0;
}
