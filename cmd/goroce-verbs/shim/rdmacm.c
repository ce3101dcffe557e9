/*
 * rdmacm.c: the librdmacm half of the preload. With it, programs linked
 * against librdmacm.so.1 (rping, ucmatose, udaddy, rdma_server/rdma_client,
 * perftest's -R) connect through goroce's connection manager (package
 * rnic/cm, in the core) instead of the kernel's rdma_cm.
 *
 * It defines every exported rdma_* function of librdmacm, with the
 * structure layouts of the <rdma/rdma_cma.h> it is compiled against
 * (Debian's librdmacm-dev): struct rdma_cm_id sits at the start of this
 * file's struct cma_id, struct rdma_cm_event at the start of struct
 * cma_event, as in librdmacm's cma.c. The real librdmacm.so.1 stays loaded
 * and unused: no rdma_* call reaches it. The rsocket functions (rsocket,
 * rsend, ...) are not interposed.
 *
 * The IDs use the preload's own goroce0 context (opened once, shared by
 * every ID, as librdmacm opens each device once) for id->verbs, and QPs
 * created with the preload's ibv_create_qp, which the core's CM then
 * moves through INIT, RTR and RTS as the connection forms (librdmacm does
 * the same from user space with the kernel's rdma_init_qp_attr). An event
 * channel's fd is an eventfd in semaphore mode: poll() sees it readable
 * while events wait, and rdma_get_cm_event blocks in read() on it unless
 * the program made it non-blocking (then EAGAIN).
 *
 * As librdmacm does, an ID created without a channel (rdma_create_ep, or
 * rdma_create_id with a NULL channel) is synchronous: it gets a channel of
 * its own, and rdma_resolve_addr, rdma_resolve_route, rdma_connect,
 * rdma_accept and rdma_disconnect wait for their event, which stays in
 * id->event until the next one; rdma_get_request takes a CONNECT_REQUEST.
 *
 * As the verbs half does, every call checks the IDs, channels and events
 * it is given: a NULL, destroyed or foreign one fails with EINVAL (a void
 * call does nothing), instead of reading memory that is not one.
 *
 * Not supported (the call fails with errno ENOSYS, and GOROCE_DEBUG says
 * so once): multicast (rdma_join_multicast, _ex, rdma_leave_multicast),
 * rdma_init_qp_attr, rdma_establish (goroce's CM establishes by itself),
 * rdma_notify, SRQs through rdma_create_srq(_ex), rdma_create_qp_ex,
 * ECE (rdma_set_local_ece, rdma_get_remote_ece, rdma_reject_ece), and the
 * options other than RDMA_OPTION_ID_REUSEADDR and RDMA_OPTION_ID_AFONLY.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "shim.h"

/* In verbs.c. */
HIDDEN void *goroce_core_symbol(const char *name);

/* CM_ID fails the call with ret and errno EINVAL unless id is a live
 * rdma_cm_id of the preload's (shim.h's live objects). */
#define CM_ID(id, ret) LIVE(id, OBJ_CM_ID, ret)

/* The core's rdma_cm functions (goroce_cm_* in rdmacm.go). */
static struct {
	int (*create_channel)(int, uint32_t *);
	int (*destroy_channel)(uint32_t);
	int (*create_id)(uint32_t, int, uintptr_t, uint32_t *);
	int (*set_obj)(uint32_t, uintptr_t);
	int (*destroy_id)(uint32_t);
	int (*bind)(uint32_t, struct goroce_cm_addr *);
	int (*query)(uint32_t, struct goroce_cm_addr *, struct goroce_cm_addr *);
	int (*listen)(uint32_t, int);
	int (*resolve_addr)(uint32_t, struct goroce_cm_addr *, struct goroce_cm_addr *);
	int (*resolve_route)(uint32_t);
	int (*set_qp)(uint32_t, uint32_t);
	int (*connect)(uint32_t, struct goroce_cm_param *);
	int (*accept)(uint32_t, struct goroce_cm_param *);
	int (*reject)(uint32_t, const void *, int);
	int (*disconnect)(uint32_t);
	int (*migrate)(uint32_t, uint32_t);
	int (*get_event)(uint32_t, struct goroce_cm_event *);
} cmcore;

/* The process's goroce0 context for every ID, and its device limits. */
static struct ibv_context *cma_verbs;
static struct ibv_pd *cma_pd; /* the default PD (librdmacm's per-device PD) */
static union ibv_gid cma_gid;
static uint8_t max_resp_res, max_init_depth;
static int cma_ok;
static pthread_once_t cma_once = PTHREAD_ONCE_INIT;

static void cma_init(void)
{
#define SYM(n)                                                   \
	do {                                                     \
		*(void **)&cmcore.n = goroce_core_symbol("cm_" #n); \
		if (!cmcore.n)                                   \
			return;                                  \
	} while (0)
	SYM(create_channel); SYM(destroy_channel); SYM(create_id); SYM(set_obj); SYM(destroy_id); SYM(bind);
	SYM(query); SYM(listen); SYM(resolve_addr); SYM(resolve_route); SYM(set_qp); SYM(connect); SYM(accept);
	SYM(reject); SYM(disconnect); SYM(migrate); SYM(get_event);
#undef SYM
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		return;
	cma_verbs = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!cma_verbs)
		return;
	struct ibv_device_attr attr;
	if (ibv_query_device(cma_verbs, &attr) || ibv_query_gid(cma_verbs, 1, 0, &cma_gid))
		return;
	max_resp_res = attr.max_qp_rd_atom > 255 ? 255 : attr.max_qp_rd_atom;
	max_init_depth = attr.max_qp_init_rd_atom > 255 ? 255 : attr.max_qp_init_rd_atom;
	cma_ok = 1;
}

/* cma_fini closes the CM's context of goroce0 as the process ends, as
 * librdmacm's destructor closes its devices (rdma_cma_fini): goroce0 then
 * closes with the program's last ibv_close_device, or here. */
__attribute__((destructor)) static void cma_fini(void)
{
	if (cma_verbs)
		ibv_close_device(cma_verbs);
	cma_verbs = NULL;
	cma_ok = 0;
}

/* cma_ready readies the core's CM and goroce0, or fails with errno. */
static int cma_ready(void)
{
	pthread_once(&cma_once, cma_init);
	if (!cma_ok) {
		if (!errno)
			errno = ENODEV;
		return 0;
	}
	return 1;
}

/* err sets errno to the core's answer and returns librdmacm's -1, or 0. */
static int err(int ret)
{
	if (!ret)
		return 0;
	errno = ret;
	return -1;
}

#define ENOSYS_RET(call, ret)                        \
	do {                                         \
		goroce_unsupported(call, "ENOSYS"); \
		errno = ENOSYS;                      \
		return ret;                          \
	} while (0)

struct cma_channel {
	struct rdma_event_channel ch; /* first: programs see this */
	uint32_t handle;
};

struct cma_id {
	struct rdma_cm_id id; /* first: programs see this */
	uint32_t handle;
	int sync;                                /* has a channel of its own */
	uint8_t responder_resources, initiator_depth; /* what a CONNECT_REQUEST asked */
	struct ibv_qp_init_attr *qp_init_attr;  /* rdma_create_ep on a passive ID: for rdma_get_request */
	struct ibv_sa_path_rec path;
};

struct cma_event {
	struct rdma_cm_event event; /* first: programs see this */
	uint8_t private_data[256];
};

static struct cma_id *cma_id_of(struct rdma_cm_id *id) { return (struct cma_id *)id; }
static struct cma_channel *cma_channel_of(struct rdma_event_channel *ch) { return (struct cma_channel *)ch; }

/* ---- event channels ---- */

EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	if (!cma_ready())
		return NULL;
	struct cma_channel *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->ch.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	int ret = cmcore.create_channel(c->ch.fd, &c->handle);
	if (!ret && (ret = live_add(&c->ch, OBJ_CM_CHANNEL)))
		cmcore.destroy_channel(c->handle);
	if (ret) {
		close(c->ch.fd);
		free(c);
		errno = ret;
		return NULL;
	}
	return &c->ch;
}

EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cma_channel *c = cma_channel_of(channel);
	if (!live_del(channel, OBJ_CM_CHANNEL))
		return;
	cmcore.destroy_channel(c->handle);
	close(c->ch.fd);
	free(c);
}

/* ---- addresses ---- */

static socklen_t sockaddr_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	}
	return 0;
}

/* to_core reads an AF_INET or AF_INET6 sockaddr, or fails with EAFNOSUPPORT. */
static int to_core(struct goroce_cm_addr *a, const struct sockaddr *sa)
{
	memset(a, 0, sizeof *a);
	a->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		a->ip[10] = a->ip[11] = 0xff;
		memcpy(a->ip + 12, &in->sin_addr, 4);
		a->port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		memcpy(a->ip, &in6->sin6_addr, 16);
		a->port = ntohs(in6->sin6_port);
		return 0;
	}
	return EAFNOSUPPORT;
}

static void from_core(struct sockaddr_storage *ss, const struct goroce_cm_addr *a)
{
	memset(ss, 0, sizeof *ss);
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, a->ip + 12, 4);
		in->sin_port = htons(a->port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, a->ip, 16);
		in6->sin6_port = htons(a->port);
	}
}

static int is_any(const struct goroce_cm_addr *a)
{
	static const uint8_t zero[16];
	if (a->family == AF_INET)
		return !memcmp(a->ip + 12, zero, 4);
	return !memcmp(a->ip, zero, 16);
}

/* on_device: a local address is goroce0's own (its GID holds it, IPv4
 * mapped as the core's addresses are), so an ID bound to it is bound to
 * the device. The unspecified address and the loopback ones but
 * goroce0's bind an ID to no device, as with the kernel's rdma_cm
 * (cma_any_addr): id->verbs stays NULL until it resolves a peer. */
static int on_device(const struct goroce_cm_addr *a)
{
	return !memcmp(a->ip, cma_gid.raw, 16);
}

/* set_addrs fills the ID's route from the core's addresses: the local and
 * peer sockaddrs, the GIDs, one path, and id->verbs once the ID is bound to
 * the device's address, as librdmacm's ucma_query_addr and
 * ucma_query_route do. */
static void set_addrs(struct cma_id *c, const struct goroce_cm_addr *local, const struct goroce_cm_addr *peer,
		      int resolved)
{
	struct rdma_addr *ra = &c->id.route.addr;
	from_core(&ra->src_storage, local);
	if (peer->port || !is_any(peer))
		from_core(&ra->dst_storage, peer);
	if (on_device(local)) {
		c->id.verbs = cma_verbs;
		c->id.port_num = 1;
		ra->addr.ibaddr.sgid = cma_gid;
	}
	ra->addr.ibaddr.pkey = htobe16(0xffff);
	if (!resolved)
		return;
	memcpy(ra->addr.ibaddr.dgid.raw, peer->ip, 16);
	struct ibv_port_attr port;
	memset(&c->path, 0, sizeof c->path);
	c->path.sgid = ra->addr.ibaddr.sgid;
	c->path.dgid = ra->addr.ibaddr.dgid;
	c->path.pkey = htobe16(0xffff);
	c->path.hop_limit = 64;
	c->path.reversible = 1;
	c->path.numb_path = 1;
	c->path.mtu = ibv_query_port(cma_verbs, 1, &port) ? IBV_MTU_1024 : port.active_mtu;
	c->path.mtu_selector = 2; /* exactly */
	c->id.route.path_rec = &c->path;
	c->id.route.num_paths = 1;
}

static void refresh_addrs(struct cma_id *c, int resolved)
{
	struct goroce_cm_addr local, peer;
	if (!cmcore.query(c->handle, &local, &peer))
		set_addrs(c, &local, &peer, resolved);
}

/* ---- IDs ---- */

static enum ibv_qp_type qp_type_of(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

static int create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		     enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	if (!id || (channel && !live(channel, OBJ_CM_CHANNEL)))
		return err(EINVAL);
	if (!cma_ready())
		return -1;
	struct cma_id *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	if (!channel) {
		if (!(channel = rdma_create_event_channel())) {
			free(c);
			return -1;
		}
		c->sync = 1;
	}
	int ret = cmcore.create_id(cma_channel_of(channel)->handle, ps, (uintptr_t)c, &c->handle);
	if (!ret && (ret = live_add(&c->id, OBJ_CM_ID)))
		cmcore.destroy_id(c->handle);
	if (ret) {
		if (c->sync)
			rdma_destroy_event_channel(channel);
		free(c);
		return err(ret);
	}
	c->id.channel = channel;
	c->id.context = context;
	c->id.ps = ps;
	c->id.qp_type = qp_type;
	*id = &c->id;
	return 0;
}

EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
			  enum rdma_port_space ps)
{
	return create_id(channel, id, context, ps, qp_type_of(ps));
}

EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cma_id *c = cma_id_of(id);
	if (!live_del(id, OBJ_CM_ID))
		return err(EINVAL);
	int ret = cmcore.destroy_id(c->handle);
	if (id->event)
		rdma_ack_cm_event(id->event);
	if (c->sync)
		rdma_destroy_event_channel(id->channel);
	free(c->qp_init_attr);
	free(c);
	return err(ret);
}

/* complete waits for the event of a synchronous ID's call (librdmacm's
 * ucma_complete): it stays in id->event; a failure's status becomes errno. */
static int complete(struct rdma_cm_id *id)
{
	struct cma_id *c = cma_id_of(id);
	if (!c->sync)
		return 0;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	if (rdma_get_cm_event(id->channel, &id->event))
		return -1;
	int status = id->event->status;
	if (!status)
		return 0;
	if (id->event->event == RDMA_CM_EVENT_REJECTED)
		errno = ECONNREFUSED;
	else
		errno = status < 0 ? -status : status;
	return -1;
}

EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cma_id *c = cma_id_of(id);
	struct goroce_cm_addr a;
	CM_ID(id, -1);
	if (!addr)
		return err(EINVAL);
	int ret = to_core(&a, addr);
	if (ret || (ret = cmcore.bind(c->handle, &a)))
		return err(ret);
	refresh_addrs(c, 0);
	return 0;
}

EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	CM_ID(id, -1);
	return err(cmcore.listen(cma_id_of(id)->handle, backlog));
}

EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
			     int timeout_ms)
{
	(void)timeout_ms;
	struct cma_id *c = cma_id_of(id);
	struct goroce_cm_addr src, dst;
	CM_ID(id, -1);
	if (!dst_addr)
		return err(EINVAL);
	int ret = to_core(&dst, dst_addr);
	if (!ret && src_addr)
		ret = to_core(&src, src_addr);
	if (ret || (ret = cmcore.resolve_addr(c->handle, src_addr ? &src : NULL, &dst)))
		return err(ret);
	refresh_addrs(c, 1);
	return complete(id);
}

EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)timeout_ms;
	struct cma_id *c = cma_id_of(id);
	CM_ID(id, -1);
	int ret = cmcore.resolve_route(c->handle);
	if (ret)
		return err(ret);
	refresh_addrs(c, 1);
	return complete(id);
}

/* ---- QPs ---- */

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq && id->recv_cq != id->send_cq) {
		ibv_destroy_cq(id->recv_cq);
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel && id->recv_cq_channel != id->send_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
	id->recv_cq = NULL;
	id->recv_cq_channel = NULL;
}

/* create_cqs makes the CQs, each with a completion channel, that attr
 * leaves out (librdmacm's ucma_create_cqs): rdma_verbs.h's
 * rdma_get_send_comp and rdma_get_recv_comp wait on them. */
static int create_cqs(struct rdma_cm_id *id, struct ibv_qp_init_attr *attr)
{
	if (!attr->recv_cq) {
		if (!(id->recv_cq_channel = ibv_create_comp_channel(id->verbs)) ||
		    !(id->recv_cq = ibv_create_cq(id->verbs, attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1, id,
						  id->recv_cq_channel, 0)))
			goto fail;
		attr->recv_cq = id->recv_cq;
	}
	if (!attr->send_cq) {
		if (!(id->send_cq_channel = ibv_create_comp_channel(id->verbs)) ||
		    !(id->send_cq = ibv_create_cq(id->verbs, attr->cap.max_send_wr ? attr->cap.max_send_wr : 1, id,
						  id->send_cq_channel, 0)))
			goto fail;
		attr->send_cq = id->send_cq;
	}
	return 0;
fail: {
	int e = errno;
	destroy_cqs(id);
	errno = e;
	return -1;
}
}

EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct cma_id *c = cma_id_of(id);
	CM_ID(id, -1);
	if (!id->verbs || !qp_init_attr || (pd && !live(pd, OBJ_PD))) {
		errno = EINVAL;
		return -1;
	}
	if (!pd)
		pd = id->pd ? id->pd : cma_pd;
	if (!pd) {
		static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
		pthread_mutex_lock(&mu);
		if (!cma_pd)
			cma_pd = ibv_alloc_pd(cma_verbs);
		pd = cma_pd;
		pthread_mutex_unlock(&mu);
		if (!pd)
			return -1;
	}
	struct ibv_qp_init_attr attr = *qp_init_attr;
	if (create_cqs(id, &attr))
		return -1;
	struct ibv_qp *qp = ibv_create_qp(pd, &attr);
	if (!qp) {
		int e = errno;
		destroy_cqs(id);
		errno = e;
		return -1;
	}
	int ret = cmcore.set_qp(c->handle, qp->handle);
	if (ret) {
		ibv_destroy_qp(qp);
		destroy_cqs(id);
		return err(ret);
	}
	qp_init_attr->cap = attr.cap;
	qp_init_attr->send_cq = attr.send_cq;
	qp_init_attr->recv_cq = attr.recv_cq;
	id->qp = qp;
	id->pd = pd;
	return 0;
}

EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!live(id, OBJ_CM_ID) || !id->qp)
		return;
	cmcore.set_qp(cma_id_of(id)->handle, 0);
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr)
{
	(void)qp_init_attr;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_create_qp_ex", -1);
}

/* ---- connections ---- */

static uint8_t clamp(uint8_t v, uint8_t max) { return v > max ? max : v; }

/* to_param copies a connection's parameters for the core. */
static int to_param(struct goroce_cm_param *p, const struct rdma_conn_param *cp, uint8_t resp_res, uint8_t init_depth)
{
	memset(p, 0, sizeof *p);
	p->responder_resources = resp_res;
	p->initiator_depth = init_depth;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
	if (!cp)
		return 0;
	if (cp->private_data_len) {
		if (!cp->private_data)
			return EINVAL;
		memcpy(p->private_data, cp->private_data, cp->private_data_len);
		p->private_data_len = cp->private_data_len;
	}
	if (cp->responder_resources != RDMA_MAX_RESP_RES)
		p->responder_resources = clamp(cp->responder_resources, max_resp_res);
	if (cp->initiator_depth != RDMA_MAX_INIT_DEPTH)
		p->initiator_depth = clamp(cp->initiator_depth, max_init_depth);
	p->flow_control = cp->flow_control;
	p->retry_count = cp->retry_count;
	p->rnr_retry_count = cp->rnr_retry_count;
	p->srq = cp->srq;
	p->qp_num = cp->qp_num;
	return 0;
}

EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cma_id *c = cma_id_of(id);
	struct goroce_cm_param p;
	CM_ID(id, -1);
	int ret = to_param(&p, conn_param, max_resp_res, max_init_depth);
	if (ret || (ret = cmcore.connect(c->handle, &p)))
		return err(ret);
	return complete(id);
}

EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cma_id *c = cma_id_of(id);
	struct goroce_cm_param p;
	CM_ID(id, -1);
	int ret = to_param(&p, conn_param, clamp(c->responder_resources, max_resp_res),
			   clamp(c->initiator_depth, max_init_depth));
	if (ret || (ret = cmcore.accept(c->handle, &p)))
		return err(ret);
	if (id->qp_type == IBV_QPT_UD)
		return 0;
	return complete(id);
}

EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	CM_ID(id, -1);
	if (private_data_len && !private_data)
		return err(EINVAL);
	return err(cmcore.reject(cma_id_of(id)->handle, private_data, private_data_len));
}

EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	CM_ID(id, -1);
	int ret = cmcore.disconnect(cma_id_of(id)->handle);
	if (ret)
		return err(ret);
	return complete(id);
}

EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cma_id *c = cma_id_of(id);
	int sync = 0;
	CM_ID(id, -1);
	if (channel && !live(channel, OBJ_CM_CHANNEL))
		return err(EINVAL);
	if (!channel) {
		if (!(channel = rdma_create_event_channel()))
			return -1;
		sync = 1;
	}
	int ret = cmcore.migrate(c->handle, cma_channel_of(channel)->handle);
	if (ret) {
		if (sync)
			rdma_destroy_event_channel(channel);
		return err(ret);
	}
	if (c->sync)
		rdma_destroy_event_channel(id->channel);
	c->sync = sync;
	id->channel = channel;
	return 0;
}

/* ---- events ---- */

/*
 * channel_gone is where a thread waiting for an event goes when another
 * thread destroyed the channel under it. With librdmacm that thread sits
 * in read() on the ucma fd, and the kernel keeps a read in progress going
 * after close(): it never returns. rping's CM thread relies on it, as its
 * main thread destroys the channel and exits while the CM thread waits.
 */
static void channel_gone(void)
{
	for (;;)
		pause();
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cma_channel *ch = cma_channel_of(channel);
	struct goroce_cm_event g;
	uint64_t n;
	if (!event || !live(channel, OBJ_CM_CHANNEL))
		return err(EINVAL);
	/* Read once: ch is freed if another thread destroys the channel. */
	int fd = ch->ch.fd;
	uint32_t handle = ch->handle;
	for (;;) {
		ssize_t r = read(fd, &n, sizeof n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EBADF)
			channel_gone();
		if (r < 0)
			return -1;
		int ret = cmcore.get_event(handle, &g);
		if (ret == EAGAIN)
			continue; /* a count left by an event of a destroyed ID */
		if (ret == EINVAL)
			channel_gone(); /* the only EINVAL: no channel of that handle */
		if (ret)
			return err(ret);
		break;
	}
	struct cma_event *e = calloc(1, sizeof *e);
	if (!e)
		return err(ENOMEM);
	struct cma_id *c = (struct cma_id *)g.id_obj;
	struct cma_id *lis = (struct cma_id *)g.listen_obj;
	if (!c) {
		/* The new ID of a CONNECT_REQUEST (librdmacm's ucma_process_conn_req). */
		if (!(c = calloc(1, sizeof *c))) {
			free(e);
			return err(ENOMEM);
		}
		c->handle = g.id;
		c->id.channel = lis ? lis->id.channel : channel;
		c->id.context = lis ? lis->id.context : NULL;
		c->id.ps = lis ? lis->id.ps : RDMA_PS_TCP;
		c->id.qp_type = lis ? lis->id.qp_type : IBV_QPT_RC;
		c->id.pd = lis ? lis->id.pd : NULL;
		c->responder_resources = g.param.responder_resources;
		c->initiator_depth = g.param.initiator_depth;
		if (live_add(&c->id, OBJ_CM_ID)) {
			free(c);
			free(e);
			return err(ENOMEM);
		}
		cmcore.set_obj(g.id, (uintptr_t)c);
		if (lis && lis->sync)
			rdma_migrate_id(&c->id, NULL);
	}
	set_addrs(c, &g.local, &g.peer, 1);
	e->event.id = &c->id;
	e->event.listen_id = lis ? &lis->id : NULL;
	e->event.event = g.event;
	e->event.status = g.status;
	memcpy(e->private_data, g.param.private_data, sizeof e->private_data);
	if (g.ud || (c->id.qp_type == IBV_QPT_UD && g.event != RDMA_CM_EVENT_CONNECT_REQUEST)) {
		struct rdma_ud_param *ud = &e->event.param.ud;
		ud->private_data = g.param.private_data_len ? e->private_data : NULL;
		ud->private_data_len = g.param.private_data_len;
		ud->qp_num = g.param.qp_num;
		ud->qkey = g.qkey;
		if (g.ud) {
			struct ibv_ah_attr *ah = &ud->ah_attr;
			ah->is_global = 1;
			memcpy(ah->grh.dgid.raw, g.ah.dgid, 16);
			ah->grh.hop_limit = g.ah.hop_limit;
			ah->grh.traffic_class = g.ah.traffic_class;
			ah->grh.sgid_index = 0;
			ah->sl = g.ah.sl;
			ah->port_num = 1;
		}
	} else {
		struct rdma_conn_param *p = &e->event.param.conn;
		p->private_data = g.param.private_data_len ? e->private_data : NULL;
		p->private_data_len = g.param.private_data_len;
		p->responder_resources = g.param.responder_resources;
		p->initiator_depth = g.param.initiator_depth;
		p->flow_control = g.param.flow_control;
		p->retry_count = g.param.retry_count;
		p->rnr_retry_count = g.param.rnr_retry_count;
		p->srq = g.param.srq;
		p->qp_num = g.param.qp_num;
	}
	if (live_add(&e->event, OBJ_CM_EVENT)) {
		free(e);
		return err(ENOMEM);
	}
	*event = &e->event;
	return 0;
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!live_del(event, OBJ_CM_EVENT))
		return err(EINVAL);
	free(event);
	return 0;
}

EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	}
	return "UNKNOWN EVENT";
}

/* ---- synchronous endpoints (rdma_server, rdma_client) ---- */

EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cma_id *lis = cma_id_of(listen);
	struct rdma_cm_event *event;
	CM_ID(listen, -1);
	if (!id || !lis->sync)
		return err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &event))
		return -1;
	int ret = 0;
	if (event->status)
		ret = event->status < 0 ? -event->status : event->status;
	else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		ret = EINVAL;
	if (!ret && lis->qp_init_attr) {
		struct ibv_qp_init_attr attr = *lis->qp_init_attr;
		if (rdma_create_qp(event->id, listen->pd, &attr))
			ret = errno;
	}
	if (ret) {
		rdma_ack_cm_event(event);
		return err(ret);
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
}

EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			  struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	if (!id || !res || (!(res->ai_flags & RAI_PASSIVE) && !res->ai_dst_addr) || (pd && !live(pd, OBJ_PD)))
		return err(EINVAL);
	if (create_id(NULL, &cm_id, NULL, res->ai_port_space, res->ai_qp_type))
		return -1;
	int ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = res->ai_src_addr ? rdma_bind_addr(cm_id, res->ai_src_addr) : 0;
	} else {
		ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!ret)
			ret = rdma_resolve_route(cm_id, 2000);
	}
	if (ret)
		goto fail;
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		if (res->ai_flags & RAI_PASSIVE) {
			struct cma_id *c = cma_id_of(cm_id);
			if (!(c->qp_init_attr = malloc(sizeof *qp_init_attr))) {
				errno = ENOMEM;
				goto fail;
			}
			*c->qp_init_attr = *qp_init_attr;
			cm_id->pd = pd;
		} else if (rdma_create_qp(cm_id, pd, qp_init_attr)) {
			goto fail;
		}
	}
	*id = cm_id;
	return 0;
fail: {
	int e = errno;
	rdma_destroy_id(cm_id);
	errno = e;
	return -1;
}
}

EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!live(id, OBJ_CM_ID))
		return;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* ---- devices, ports, options ---- */

EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (!cma_ready())
		return NULL;
	struct ibv_context **list = calloc(2, sizeof *list);
	if (!list || live_add(list, OBJ_CM_DEVICE_LIST)) {
		free(list);
		errno = ENOMEM;
		return NULL;
	}
	list[0] = cma_verbs;
	if (num_devices)
		*num_devices = 1;
	return list;
}

EXPORT void rdma_free_devices(struct ibv_context **list)
{
	if (live_del(list, OBJ_CM_DEVICE_LIST))
		free(list);
}

static __be16 port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

/* rdma_get_src_port and rdma_get_dst_port: 0 for what is not a live ID. */
EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	CM_ID(id, 0);
	return port_of(&id->route.addr.src_addr);
}

EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	CM_ID(id, 0);
	return port_of(&id->route.addr.dst_addr);
}

EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	CM_ID(id, -1);
	if (!optval)
		return err(EINVAL);
	/* The port of a destroyed ID is free at once, so SO_REUSEADDR's
	 * behaviour is goroce's anyway. AF_ONLY changes nothing: requests
	 * come in goroce0's one family, and a listener bound to the wildcard
	 * or a loopback address of either family takes them. */
	if (level == RDMA_OPTION_ID && (optname == RDMA_OPTION_ID_REUSEADDR || optname == RDMA_OPTION_ID_AFONLY))
		return optlen == sizeof(int) ? 0 : err(EINVAL);
	ENOSYS_RET("rdma_set_option", -1);
}

/* ---- rdma_getaddrinfo ---- */

static struct sockaddr *copy_sockaddr(const struct sockaddr *sa, socklen_t *len)
{
	*len = sockaddr_len(sa);
	struct sockaddr *c = malloc(sizeof(struct sockaddr_storage));
	if (c) {
		memset(c, 0, sizeof(struct sockaddr_storage));
		memcpy(c, sa, *len);
	}
	return c;
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	if (!live_del(res, OBJ_ADDRINFO))
		return;
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* copy_hint copies one of the hints' addresses, of their length (at most
 * a sockaddr_storage); 0 or an errno. */
static int copy_hint(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src, socklen_t len)
{
	if (!src || !len)
		return 0;
	if (len > sizeof(struct sockaddr_storage))
		return EINVAL;
	if (!(*dst = calloc(1, sizeof(struct sockaddr_storage))))
		return ENOMEM;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

/* addrinfo_from_hints is rdma_getaddrinfo with neither node nor service,
 * as librdmacm's: the hints' flags, family, QP type and port space, and
 * their addresses. */
static int addrinfo_from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r = calloc(1, sizeof *r);
	if (!r)
		return err(ENOMEM);
	r->ai_flags = hints->ai_flags;
	r->ai_family = hints->ai_family;
	r->ai_qp_type = hints->ai_qp_type;
	r->ai_port_space = hints->ai_port_space;
	int ret = copy_hint(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
	if (!ret)
		ret = copy_hint(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
	if (!ret && live_add(r, OBJ_ADDRINFO))
		ret = ENOMEM;
	if (ret) {
		free(r->ai_src_addr);
		free(r->ai_dst_addr);
		free(r);
		return err(ret);
	}
	*res = r;
	return 0;
}

/* rdma_getaddrinfo resolves node and service with getaddrinfo, as
 * librdmacm does for IP addresses: the address goes to ai_src_addr for
 * RAI_PASSIVE, else to ai_dst_addr (with hints' ai_src_addr as the
 * source). With no node, a passive address is the wildcard of goroce0's
 * family. With neither node nor service, the hints are the answer
 * (libfabric's verbs provider asks so with the address it connects to). */
EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			    struct rdma_addrinfo **res)
{
	struct addrinfo ai_hints = {0}, *ai;
	int passive = hints && (hints->ai_flags & RAI_PASSIVE);
	if ((!node && !service && !hints) || !res)
		return err(EINVAL);
	if (!node && !service)
		return addrinfo_from_hints(hints, res);
	ai_hints.ai_family = hints ? hints->ai_family : 0;
	if (!ai_hints.ai_family && !node && cma_ready())
		ai_hints.ai_family = IN6_IS_ADDR_V4MAPPED((struct in6_addr *)cma_gid.raw) ? AF_INET : AF_INET6;
	if (hints && (hints->ai_flags & RAI_NUMERICHOST))
		ai_hints.ai_flags |= AI_NUMERICHOST;
	if (passive)
		ai_hints.ai_flags |= AI_PASSIVE;
	ai_hints.ai_socktype = SOCK_STREAM;
	int ret = getaddrinfo(node, service, &ai_hints, &ai);
	if (ret) {
		errno = ret == EAI_SYSTEM ? errno : ENOENT;
		return ret;
	}
	struct rdma_addrinfo *r = calloc(1, sizeof *r);
	if (!r) {
		freeaddrinfo(ai);
		return err(ENOMEM);
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : qp_type_of(r->ai_port_space);
	if (passive) {
		r->ai_src_addr = copy_sockaddr(ai->ai_addr, &r->ai_src_len);
	} else {
		r->ai_dst_addr = copy_sockaddr(ai->ai_addr, &r->ai_dst_len);
		if (hints && hints->ai_src_addr)
			r->ai_src_addr = copy_sockaddr(hints->ai_src_addr, &r->ai_src_len);
	}
	freeaddrinfo(ai);
	if ((passive && !r->ai_src_addr) || (!passive && !r->ai_dst_addr) || live_add(r, OBJ_ADDRINFO)) {
		free(r->ai_src_addr);
		free(r->ai_dst_addr);
		free(r);
		return err(ENOMEM);
	}
	*res = r;
	return 0;
}

/* ---- what goroce's CM does not do ---- */

EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	(void)qp_attr, (void)qp_attr_mask;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_init_qp_attr", -1);
}

EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	CM_ID(id, -1);
	ENOSYS_RET("rdma_establish", -1);
}

EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)event;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_notify", -1);
}

EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)addr, (void)context;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_join_multicast", -1);
}

EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	(void)mc_join_attr, (void)context;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_join_multicast_ex", -1);
}

EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)addr;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_leave_multicast", -1);
}

EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	(void)pd, (void)attr;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_create_srq", -1);
}

EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	(void)attr;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_create_srq_ex", -1);
}

EXPORT void rdma_destroy_srq(struct rdma_cm_id *id) { (void)id; } /* there is no SRQ to destroy */

EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	(void)private_data, (void)private_data_len;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_reject_ece", -1);
}

EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)ece;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_set_local_ece", -1);
}

EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)ece;
	CM_ID(id, -1);
	ENOSYS_RET("rdma_get_remote_ece", -1);
}
