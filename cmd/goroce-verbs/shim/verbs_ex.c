/*
 * verbs_ex.c: the extended verbs goroce0 has, as rdma-core's rxe provider
 * has them (providers/rxe/rxe.c): ibv_create_cq_ex with the ibv_cq_ex poll
 * API, ibv_create_qp_ex with the ibv_wr_* API, ibv_query_device_ex, the
 * GID entry queries and ibv_query_qp_data_in_order.
 *
 * The ibv_cq_ex poll API reads the same completion ring as ibv_poll_cq
 * (core.h, struct goroce_cq_ring): ibv_start_poll and ibv_next_poll take
 * the next entry, and call into the core only when the ring is empty, at
 * most once each.
 *
 * The ibv_wr_* API builds work requests in the QP's memory in the shim
 * (struct qp in shim.h), and ibv_wr_complete hands every WR built since
 * ibv_wr_start to the core in one call, which posts them GOROCE_POST_BATCH
 * at a time, as an ibv_post_send list. The WRs of ibv_wr_* and of
 * ibv_post_send on one QP go to its one send queue in the order they are
 * posted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static void unsupported(const char *verb) { goroce_unsupported(verb, "EOPNOTSUPP"); }

/* ---- ibv_create_cq_ex and the ibv_cq_ex poll API ---- */

/* The work-completion fields rxe's provider reads (RXE_SUP_WC_EX_FLAGS);
 * it refuses the others (completion timestamps, CVLAN, flow tag, tag
 * matching) with EOPNOTSUPP. */
#define SUP_WC_FLAGS                                                                                           \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | \
	 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS)

static struct cq *cq_of_ex(struct ibv_cq_ex *cq) { return (struct cq *)cq; }

/* take makes the ring's next completion current, asking the core to fill
 * an empty ring first, once. The lock is held. It returns 0, ENOENT when
 * there is none, or the errno of a core that failed. */
static int take(struct cq *c)
{
	struct goroce_cq_ring *r = &c->ring;
	uint32_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED); /* ours to write */
	if (head == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) {
		int got = cq_refill(c);
		if (got < 0)
			return -got;
		if (got == 0)
			return ENOENT;
	}
	c->cur = &r->wc[head % GOROCE_CQ_RING];
	c->cq_ex.status = c->cur->status;
	c->cq_ex.wr_id = c->cur->wr_id;
	return 0;
}

/* consume hands the current completion's ring entry back to the core. */
static void consume(struct cq *c)
{
	if (!c->cur)
		return;
	c->cur = NULL;
	uint32_t head = __atomic_load_n(&c->ring.head, __ATOMIC_RELAXED);
	__atomic_store_n(&c->ring.head, head + 1, __ATOMIC_RELEASE);
}

/* start_poll: as rxe's, the CQ's lock is held from a successful call to
 * ibv_end_poll; with none to take it is released and the answer is
 * ENOENT (errno too), and ibv_end_poll must not follow. */
static int start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	struct cq *c = cq_of_ex(cq);
	(void)attr;
	CHECK_FORK(ENODEV);
	pthread_spin_lock(&c->lock);
	int ret = take(c);
	if (ret) {
		c->cur = NULL;
		pthread_spin_unlock(&c->lock);
		cq_idle();
		errno = ret;
		return ret;
	}
	return 0;
}

/* next_poll consumes the current completion and takes the next: ENOENT
 * when there is none, after which ibv_end_poll still follows. */
static int next_poll(struct ibv_cq_ex *cq)
{
	struct cq *c = cq_of_ex(cq);
	consume(c);
	int ret = take(c);
	if (ret) {
		c->cur = NULL;
		errno = ret;
	}
	return ret;
}

static void end_poll(struct ibv_cq_ex *cq)
{
	struct cq *c = cq_of_ex(cq);
	consume(c);
	pthread_spin_unlock(&c->lock);
}

/* The ibv_wc_read_* accessors read the current completion. */
static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *cq) { return cq_of_ex(cq)->cur->opcode; }
static uint32_t read_vendor_err(struct ibv_cq_ex *cq) { return cq_of_ex(cq)->cur->vendor_err; }
static uint32_t read_byte_len(struct ibv_cq_ex *cq) { return cq_of_ex(cq)->cur->byte_len; }
static uint32_t read_qp_num(struct ibv_cq_ex *cq) { return cq_of_ex(cq)->cur->qp_num; }
static uint32_t read_src_qp(struct ibv_cq_ex *cq) { return cq_of_ex(cq)->cur->src_qp; }
static uint8_t read_sl(struct ibv_cq_ex *cq) { return cq_of_ex(cq)->cur->sl; }

/* RoCE has no LIDs: rxe's SLID and DLID path bits are 0. */
static uint32_t read_slid(struct ibv_cq_ex *cq)
{
	(void)cq;
	return 0;
}

static uint8_t read_dlid_path_bits(struct ibv_cq_ex *cq)
{
	(void)cq;
	return 0;
}

/* goroce numbers its flags as enum ibv_wc_flags. */
static unsigned int read_wc_flags(struct ibv_cq_ex *cq)
{
	return cq_of_ex(cq)->cur->wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM | IBV_WC_WITH_INV);
}

/* read_imm_data is ibv_wc_read_imm_data (network order, as ibv_wc's
 * imm_data) and ibv_wc_read_invalidated_rkey (the rkey as it is). */
static __be32 read_imm_data(struct ibv_cq_ex *cq)
{
	const struct goroce_wc *w = cq_of_ex(cq)->cur;
	if (w->wc_flags & IBV_WC_WITH_IMM)
		return htonl(w->imm);
	if (w->wc_flags & IBV_WC_WITH_INV)
		return w->imm;
	return 0;
}

/* goroce_create_cq_ex is the context's create_cq_ex: as rxe's, a CQ whose
 * ibv_wc_read_* accessors are those wc_flags asks for (the others stay
 * NULL, as with rxe), refusing fields rxe does not read, the comp_mask
 * bits libibverbs does not know and the flags the kernel's rxe refuses
 * (IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) with EOPNOTSUPP. The CQ is also an
 * ibv_cq (ibv_cq_ex_to_cq): ibv_poll_cq reads the same completions. */
struct ibv_cq_ex *goroce_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	CHECK_FORK(NULL);
	LIVE(ctx, OBJ_CONTEXT, NULL);
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->wc_flags & ~(uint64_t)SUP_WC_FLAGS) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))) {
		unsupported("ibv_create_cq_ex with these wc_flags, comp_mask or flags");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct cq *c = cq_create(ctx, (int)attr->cqe, attr->cq_context, attr->channel, (int)attr->comp_vector);
	if (!c)
		return NULL;
	struct ibv_cq_ex *cq = &c->cq_ex;
	cq->start_poll = start_poll;
	cq->next_poll = next_poll;
	cq->end_poll = end_poll;
	cq->read_opcode = read_opcode;
	cq->read_vendor_err = read_vendor_err;
	cq->read_wc_flags = read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cq->read_byte_len = read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		cq->read_imm_data = read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cq->read_qp_num = read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cq->read_src_qp = read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		cq->read_slid = read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		cq->read_sl = read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cq->read_dlid_path_bits = read_dlid_path_bits;
	return cq;
}

/* ---- ibv_create_qp_ex and the ibv_wr_* API ---- */

/* The send_ops_flags rxe's provider takes per QP type
 * (RXE_SUP_*_QP_SEND_OPS_FLAGS), less IBV_QP_EX_WITH_ATOMIC_WRITE:
 * goroce's transport has no ATOMIC WRITE (IBTA 1.5), so it is refused
 * with EOPNOTSUPP as the other flags rxe lacks. */
#define SUP_RC_SEND_OPS                                                                                           \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |                  \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |            \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |                \
	 IBV_QP_EX_WITH_SEND_WITH_INV)
#define SUP_UC_SEND_OPS                                                                                           \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |                  \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)
#define SUP_UD_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static struct qp *qp_of_ex(struct ibv_qp_ex *qp) { return (struct qp *)qp; }

/* grow makes room for one more WR in q's batch: 0, or ENOMEM. The slots
 * move, so ibv_wr_complete points each WR at its SGEs only once the batch
 * is built. */
static int grow(struct qp *q)
{
	if (q->n < q->cap)
		return 0;
	int cap = q->cap ? 2 * q->cap : 16;
	if ((uint32_t)cap > q->max_send_wr)
		cap = (int)q->max_send_wr;
	struct goroce_send_wr *wrs = realloc(q->wrs, (size_t)cap * sizeof *wrs);
	if (!wrs)
		return ENOMEM;
	q->wrs = wrs;
	struct goroce_sge *sges = realloc(q->sges, (size_t)cap * q->sge_slot * sizeof *sges);
	if (!sges)
		return ENOMEM;
	q->sges = sges;
	if (q->max_inline) {
		uint8_t *inl = realloc(q->inl, (size_t)cap * q->max_inline);
		if (!inl)
			return ENOMEM;
		q->inl = inl;
	}
	q->cap = cap;
	return 0;
}

/* build starts the next WR of the batch, with the QP's wr_id and
 * wr_flags, or gives NULL after recording the error: ENOSPC once the batch
 * holds max_send_wr WRs (rxe's answer for a full send queue). */
static struct goroce_send_wr *build(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode)
{
	struct qp *q = qp_of_ex(qpx);
	int err;
	if (q->err)
		return NULL;
	if ((uint32_t)q->n >= q->max_send_wr) {
		q->err = ENOSPC;
		return NULL;
	}
	if ((err = grow(q))) {
		q->err = err;
		return NULL;
	}
	struct goroce_send_wr *w = &q->wrs[q->n++];
	*w = (struct goroce_send_wr){.wr_id = qpx->wr_id, .opcode = opcode, .flags = qpx->wr_flags};
	return w;
}

/* last is the WR the setters change: the last one built, or NULL (and
 * EINVAL recorded) before any. */
static struct goroce_send_wr *last(struct qp *q)
{
	if (q->err)
		return NULL;
	if (q->n == 0) {
		q->err = EINVAL;
		return NULL;
	}
	return &q->wrs[q->n - 1];
}

static void wr_send(struct ibv_qp_ex *qpx) { build(qpx, IBV_WR_SEND); }

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm = ntohl(imm);
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_SEND_WITH_INV);
	if (w)
		w->imm = invalidate_rkey;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_RDMA_WRITE);
	if (w)
		w->rkey = rkey, w->remote_addr = remote_addr;
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr, __be32 imm)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (w)
		w->rkey = rkey, w->remote_addr = remote_addr, w->imm = ntohl(imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_RDMA_READ);
	if (w)
		w->rkey = rkey, w->remote_addr = remote_addr;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w)
		w->rkey = rkey, w->remote_addr = remote_addr, w->compare_add = compare, w->swap = swap;
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr, uint64_t add)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w)
		w->rkey = rkey, w->remote_addr = remote_addr, w->compare_add = add;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct goroce_send_wr *w = build(qpx, IBV_WR_LOCAL_INV);
	if (w)
		w->imm = invalidate_rkey;
}

/* wr_bind_mw binds mw (either type: rxe's kernel binds a type-1 window by
 * this WR too) with the new rkey, whose low byte counts; a NULL or
 * destroyed window or MR is EINVAL at ibv_wr_complete. The program sets
 * mw->rkey itself, as with IBV_WR_BIND_MW. */
static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct qp *q = qp_of_ex(qpx);
	struct goroce_send_wr *w = build(qpx, IBV_WR_BIND_MW);
	if (!w)
		return;
	if (!live(mw, OBJ_MW) || !info || (info->mr && !live(info->mr, OBJ_MR))) {
		q->err = EINVAL;
		return;
	}
	w->mw = mw->handle;
	w->mr = info->mr ? info->mr->handle : 0;
	w->remote_addr = info->addr;
	w->bind_length = info->length;
	w->bind_access = info->mw_access_flags;
	w->rkey = rkey;
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct qp *q = qp_of_ex(qpx);
	struct goroce_send_wr *w = last(q);
	if (!w)
		return;
	if (!live(ah, OBJ_AH)) {
		q->err = EINVAL;
		return;
	}
	w->ah = ah->handle;
	w->remote_qpn = remote_qpn;
	w->remote_qkey = remote_qkey;
}

/* The SGEs of slot i: sge_slot of them (at least one, for inline data). */
static struct goroce_sge *slot_sges(struct qp *q, int i) { return &q->sges[(size_t)i * q->sge_slot]; }

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct qp *q = qp_of_ex(qpx);
	struct goroce_send_wr *w = last(q);
	if (!w)
		return;
	w->flags &= ~(uint32_t)IBV_SEND_INLINE;
	w->num_sge = 0;
	if (length) { /* as rxe: a zero length is no SGE */
		*slot_sges(q, q->n - 1) = (struct goroce_sge){.addr = addr, .length = length, .lkey = lkey};
		w->num_sge = 1;
	}
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct qp *q = qp_of_ex(qpx);
	struct goroce_send_wr *w = last(q);
	if (!w)
		return;
	if (num_sge > q->max_send_sge) {
		q->err = ENOSPC;
		return;
	}
	if (num_sge && !sg_list) {
		q->err = EINVAL;
		return;
	}
	w->flags &= ~(uint32_t)IBV_SEND_INLINE;
	memcpy(slot_sges(q, q->n - 1), sg_list, num_sge * sizeof *sg_list);
	w->num_sge = (int)num_sge;
}

/* inline_data copies the n buffers into the last WR's inline slot, now:
 * the program may reuse them once the call returns. The WR becomes an
 * inline one (IBV_SEND_INLINE), whether wr_flags said so or not. */
static void inline_data(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *bufs)
{
	struct qp *q = qp_of_ex(qpx);
	struct goroce_send_wr *w = last(q);
	size_t total = 0;
	if (!w)
		return;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > q->max_inline - total) {
			q->err = ENOSPC;
			return;
		}
		if (bufs[i].length && !bufs[i].addr) {
			q->err = EINVAL;
			return;
		}
		total += bufs[i].length;
	}
	uint8_t *dst = q->inl ? &q->inl[(size_t)(q->n - 1) * q->max_inline] : NULL;
	for (size_t i = 0, off = 0; i < n; off += bufs[i].length, i++)
		if (bufs[i].length)
			memcpy(dst + off, bufs[i].addr, bufs[i].length);
	/* Its address is set by ibv_wr_complete, once the slots stay put. */
	*slot_sges(q, q->n - 1) = (struct goroce_sge){.length = (uint32_t)total};
	w->num_sge = total ? 1 : 0;
	w->flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	inline_data(qpx, 1, &b);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf, const struct ibv_data_buf *buf_list)
{
	if (num_buf && !buf_list) {
		qp_of_ex(qpx)->err = EINVAL;
		return;
	}
	inline_data(qpx, num_buf, buf_list);
}

/* wr_start begins a batch: the QP's batch lock is held until
 * ibv_wr_complete or ibv_wr_abort, as rxe holds its send queue's. */
static void wr_start(struct ibv_qp_ex *qpx)
{
	struct qp *q = qp_of_ex(qpx);
	pthread_spin_lock(&q->lock);
	q->err = 0;
	q->n = 0;
}

/* wr_complete posts the batch with one call into the core, or none if a
 * builder or setter failed: then its error (ENOSPC for a full batch, too
 * many SGEs or too much inline data, as rxe; EINVAL for a NULL or
 * destroyed object) and nothing is posted. An error the core finds (the
 * QP's state, an opcode of another QP type) stops the batch at that WR,
 * those before it posted, as ibv_post_send does a list; a full send queue
 * is ENOSPC, as with rxe. */
static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct qp *q = qp_of_ex(qpx);
	int ret = q->err, posted = 0;
	if (!ret && core_forked)
		ret = ENODEV;
	if (!ret && q->n) {
		for (int i = 0; i < q->n; i++) {
			struct goroce_send_wr *w = &q->wrs[i];
			struct goroce_sge *s = slot_sges(q, i);
			w->sg_list = w->num_sge ? s : NULL;
			if ((w->flags & IBV_SEND_INLINE) && w->num_sge)
				s->addr = (uintptr_t)&q->inl[(size_t)i * q->max_inline];
		}
		ret = core.post_send_list(q->qp.handle, q->wrs, q->n, &posted);
		if (ret == ENOMEM)
			ret = ENOSPC;
	}
	q->n = 0;
	pthread_spin_unlock(&q->lock);
	return ret;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct qp *q = qp_of_ex(qpx);
	q->n = 0;
	pthread_spin_unlock(&q->lock);
}

void qp_ex_free(struct qp *q)
{
	free(q->wrs);
	free(q->sges);
	free(q->inl);
	q->wrs = NULL, q->sges = NULL, q->inl = NULL;
	q->cap = q->n = 0;
}

/* goroce_create_qp_ex is the context's create_qp_ex (verbs.h's inline
 * ibv_create_qp_ex calls ibv_create_qp for a comp_mask of
 * IBV_QP_INIT_ATTR_PD alone). As rxe's (check_qp_init_attr): comp_mask
 * bits other than PD, CREATE_FLAGS and SEND_OPS_FLAGS, any create flag,
 * and send_ops_flags the QP type does not take are EOPNOTSUPP; the QP's
 * ibv_qp_ex has the builders send_ops_flags asks for, and every setter. */
struct ibv_qp *goroce_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	CHECK_FORK(NULL);
	LIVE(ctx, OBJ_CONTEXT, NULL);
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	uint64_t ops = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS ? attr->send_ops_flags : 0, sup = 0;
	switch (attr->qp_type) {
	case IBV_QPT_RC:
		sup = SUP_RC_SEND_OPS;
		break;
	case IBV_QPT_UC:
		sup = SUP_UC_SEND_OPS;
		break;
	case IBV_QPT_UD:
		sup = SUP_UD_SEND_OPS;
		break;
	default:
		break;
	}
	if ((attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
					    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (!sup || (ops & ~sup)))) {
		unsupported("ibv_create_qp_ex with this comp_mask, create_flags or send_ops_flags");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	if (!sup) { /* XRC, raw packet, driver QPs */
		unsupported("ibv_create_qp_ex of this QP type");
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_qp_init_attr ia = {.qp_context = attr->qp_context, .send_cq = attr->send_cq,
				      .recv_cq = attr->recv_cq, .srq = attr->srq, .cap = attr->cap,
				      .qp_type = attr->qp_type, .sq_sig_all = attr->sq_sig_all};
	struct qp *q = qp_create(attr->pd, &ia);
	if (!q)
		return NULL;
	attr->cap = ia.cap;
	q->ex = 1;
	q->sge_slot = q->max_send_sge ? (int)q->max_send_sge : 1;
	struct ibv_qp_ex *x = &q->qp_ex;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE)
		x->wr_rdma_write = wr_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		x->wr_rdma_write_imm = wr_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_SEND)
		x->wr_send = wr_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		x->wr_send_imm = wr_send_imm;
	if (ops & IBV_QP_EX_WITH_RDMA_READ)
		x->wr_rdma_read = wr_rdma_read;
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV)
		x->wr_local_inv = wr_local_inv;
	if (ops & IBV_QP_EX_WITH_BIND_MW)
		x->wr_bind_mw = wr_bind_mw;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		x->wr_send_inv = wr_send_inv;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	return &q->qp;
}

/* ibv_qp_to_qp_ex gives a QP made by ibv_create_qp_ex its ibv_qp_ex, and
 * NULL for one made by ibv_create_qp, as rdma-core does (VERBS_QP_EX). */
EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	if (!live(qp, OBJ_QP) || !qp_of(qp)->ex)
		return NULL;
	return &qp_of(qp)->qp_ex;
}

/* ---- ibv_query_device_ex ---- */

/* goroce_query_device_ex is the context's query_device_ex: ibv_query_device's
 * attributes, and of the extended ones what rxe reports (ibv_devinfo -v on
 * the lab's rxe0: no ODP, timestamps, TSO, RSS, WQs, packet pacing, tag
 * matching or device memory; the capability flags again in
 * device_cap_flags_ex; phys_port_cnt_ex as phys_port_cnt). attr_size is
 * the caller's struct ibv_device_attr_ex, which older binaries have
 * shorter. */
int goroce_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;
	CHECK_FORK(ENODEV);
	LIVE(ctx, OBJ_CONTEXT, EINVAL);
	if ((input && input->comp_mask) || !attr || attr_size < sizeof attr->orig_attr)
		return EINVAL;
	memset(&a, 0, sizeof a);
	int ret = ibv_query_device(ctx, &a.orig_attr);
	if (ret)
		return ret;
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
	memset(attr, 0, attr_size);
	memcpy(attr, &a, attr_size < sizeof a ? attr_size : sizeof a);
	return 0;
}

/* ---- GID entries ---- */

/* ndev_ifindex is the index of the interface goroce0's address is on: the
 * one whose subnet holds it (lo for 127.0.0.0/8), as rxe reports its
 * netdev's; 0 if none does. */
static uint32_t ndev_ifindex(const uint8_t gid[16])
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	int v4 = !memcmp(gid, v4mapped, sizeof v4mapped);
	struct ifaddrs *ifs, *i;
	uint32_t idx = 0;
	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i && !idx; i = i->ifa_next) {
		if (!i->ifa_addr || !i->ifa_netmask)
			continue;
		const uint8_t *a, *m;
		size_t n;
		if (v4 && i->ifa_addr->sa_family == AF_INET) {
			a = (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			m = (const uint8_t *)&((struct sockaddr_in *)i->ifa_netmask)->sin_addr;
			n = 4;
		} else if (!v4 && i->ifa_addr->sa_family == AF_INET6) {
			a = ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr.s6_addr;
			m = ((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr.s6_addr;
			n = 16;
		} else {
			continue;
		}
		const uint8_t *g = v4 ? gid + 12 : gid;
		size_t k = 0;
		while (k < n && (g[k] & m[k]) == (a[k] & m[k]))
			k++;
		if (k == n)
			idx = if_nametoindex(i->ifa_name);
	}
	freeifaddrs(ifs);
	return idx;
}

/* gid_entry fills e with the GID at index of port: 0; ENODATA for an index
 * of the table that holds none; EINVAL beyond it or on another port, as
 * the kernel's query_gid_entry. */
static int gid_entry(uint32_t port_num, uint32_t index, struct ibv_gid_entry *e)
{
	if (port_num > 255 || index > INT_MAX)
		return EINVAL;
	memset(e, 0, sizeof *e);
	int ret = core.query_gid((int)port_num, (int)index, e->gid.raw);
	if (ret)
		return ret;
	e->gid_index = index;
	e->port_num = port_num;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = ndev_ifindex(e->gid.raw);
	return 0;
}

/* _ibv_query_gid_ex is ibv_query_gid_ex (verbs.h's inline passes the
 * entry's size): as the kernel answers it, flags other than 0 and an entry
 * smaller than struct ibv_gid_entry are EINVAL. */
EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port_num, uint32_t gid_index,
			     struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	CHECK_FORK(ENODEV);
	LIVE(ctx, OBJ_CONTEXT, EINVAL);
	if (!entry || flags || entry_size < sizeof *entry)
		return EINVAL;
	return gid_entry(port_num, gid_index, entry);
}

/* _ibv_query_gid_table is ibv_query_gid_table: the entries that hold a
 * GID, entry_size bytes apart, and how many; as the kernel answers it,
 * flags other than 0, a smaller entry, or room for fewer entries than
 * there are, are -EINVAL. */
EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max_entries,
				    uint32_t flags, size_t entry_size)
{
	struct goroce_port_attr port;
	CHECK_FORK(-ENODEV);
	if (!live(ctx, OBJ_CONTEXT) || !entries || flags || entry_size < sizeof *entries)
		return -EINVAL;
	int ret = core.query_port(1, &port);
	if (ret)
		return -ret;
	size_t n = 0;
	for (int i = 0; i < port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		ret = gid_entry(1, (uint32_t)i, &e);
		if (ret == ENODATA)
			continue;
		if (ret)
			return -ret;
		if (n == max_entries)
			return -EINVAL;
		memcpy((char *)entries + n * entry_size, &e, sizeof e);
		memset((char *)entries + n * entry_size + sizeof e, 0, entry_size - sizeof e);
		n++;
	}
	return (ssize_t)n;
}

/* ---- ibv_query_qp_data_in_order ---- */

/* ibv_query_qp_data_in_order: 0, no in-order guarantee, as rxe's provider
 * gives (it has no query_qp_data_in_order: libibverbs' dummy answers 0),
 * for every QP, op and flags. */
EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}
