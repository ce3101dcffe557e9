/*
 * shim.h: what the preload's C files share (verbs.c, verbs_ex.c, live.c,
 * absent.c, rdmacm.c): the core's function table, the shim's own
 * structures around libibverbs' (a context, a CQ, a QP), and the table of
 * live objects. Nothing here is exported from the preload.
 */
#ifndef GOROCE_SHIM_H
#define GOROCE_SHIM_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "../core.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))

#ifndef container_of
#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))
#endif

/* The core's functions (goroce_* in the Go package), loaded by ready(). */
struct core_fns {
	int (*open)(int async_fd, uint32_t *handle);
	int (*close)(uint32_t handle);
	uint64_t (*node_guid)(void);
	int (*query_device)(struct goroce_device_attr *);
	int (*query_port)(int, struct goroce_port_attr *);
	int (*query_gid)(int, int, uint8_t *);
	int (*alloc_pd)(uint32_t *);
	int (*dealloc_pd)(uint32_t);
	int (*reg_mr)(uint32_t, void *, size_t, uint64_t, int, int, uint32_t *, uint32_t *, uint32_t *);
	int (*dereg_mr)(uint32_t);
	int (*alloc_mw)(uint32_t, int, uint32_t *, uint32_t *);
	int (*dealloc_mw)(uint32_t);
	int (*create_ah)(uint32_t, struct goroce_av *, uint32_t *);
	int (*destroy_ah)(uint32_t);
	int (*create_channel)(int, uint32_t *);
	int (*destroy_channel)(uint32_t);
	int (*channel_pop)(uint32_t, uintptr_t *);
	int (*async_pop)(uint32_t, struct goroce_async_event *);
	int (*async_forget)(uintptr_t, uint32_t *);
	int (*create_cq)(int, uint32_t, uintptr_t, struct goroce_cq_ring *, uint32_t *, int *);
	int (*destroy_cq)(uint32_t, uint32_t *);
	void (*cq_event)(uint32_t);
	int (*req_notify_cq)(uint32_t, int);
	int (*poll_cq)(uint32_t);
	int (*create_srq)(uint32_t, uint32_t, uint32_t, uint32_t, uintptr_t, uint32_t *);
	int (*destroy_srq)(uint32_t);
	int (*post_srq_recv_list)(uint32_t, struct goroce_recv_wr *, int, int *);
	int (*create_qp)(uint32_t, int, uint32_t, uint32_t, uint32_t, int, struct goroce_cap *, uintptr_t, uint32_t *,
			 uint32_t *);
	int (*destroy_qp)(uint32_t);
	int (*modify_qp)(uint32_t, struct goroce_qp_attr *, int);
	int (*query_qp)(uint32_t, struct goroce_qp_attr *);
	int (*post_send_list)(uint32_t, struct goroce_send_wr *, int, int *);
	int (*post_recv_list)(uint32_t, struct goroce_recv_wr *, int, int *);
};

HIDDEN extern struct core_fns core;
HIDDEN extern volatile sig_atomic_t core_forked;

/* ready loads the core once; it fails with errno ENODEV if the core cannot
 * be loaded, or in a forked child of a process that had loaded it. */
HIDDEN int ready(void);

/* Called with an object the core made: only the fork check is left. */
#define CHECK_FORK(ret)                 \
	do {                            \
		if (core_forked) {      \
			errno = ENODEV; \
			return ret;     \
		}                       \
	} while (0)

/* goroce_unsupported says on stderr, once per call and only under
 * GOROCE_DEBUG, that call is not supported and fails with errname. */
HIDDEN void goroce_unsupported(const char *call, const char *errname);

/* ---- live objects ----
 *
 * Every object the preload hands a program is recorded with its kind
 * until it is destroyed, and every exported verb that takes one checks it
 * first: a NULL, destroyed or foreign object, or one of another kind (a QP
 * where a CQ belongs), fails with EINVAL, what the kernel answers for a
 * handle that names nothing, instead of reading freed memory. The data
 * path (post_send, poll_cq and the other context ops verbs.h's inline
 * functions call) does not look: the core refuses a handle it does not
 * know. */
enum obj_kind {
	OBJ_CONTEXT = 1,
	OBJ_PD,
	OBJ_MR,
	OBJ_MW,
	OBJ_CQ,
	OBJ_QP,
	OBJ_SRQ,
	OBJ_AH,
	OBJ_COMP_CHANNEL,
	OBJ_CM_CHANNEL,
	OBJ_CM_ID,
	OBJ_CM_EVENT,
	OBJ_DEVICE_LIST,
	OBJ_CM_DEVICE_LIST,
	OBJ_ADDRINFO,
};

/* live_add records p as a live object of kind k; it fails with ENOMEM. */
HIDDEN int live_add(const void *p, enum obj_kind k);
/* live_del forgets p if it is a live object of kind k, and reports whether
 * it was. */
HIDDEN int live_del(const void *p, enum obj_kind k);
/* live reports whether p is a live object of kind k. */
HIDDEN int live(const void *p, enum obj_kind k);

/* LIVE fails the verb with ret and errno EINVAL unless p is a live object
 * of kind k. */
#define LIVE(p, k, ret)                 \
	do {                            \
		if (!live((p), (k))) {  \
			errno = EINVAL; \
			return ret;     \
		}                       \
	} while (0)

/* ---- the shim's objects ---- */

/* A context: the core's handle for it, then rdma-core's extended context,
 * whose last member is the struct ibv_context programs see. */
struct context {
	uint32_t handle;
	struct verbs_context vctx;
};

static inline struct context *context_of(struct ibv_context *ctx)
{
	return container_of(container_of(ctx, struct verbs_context, context), struct context, vctx);
}

/* A CQ: the ibv_cq the program sees (an ibv_cq_ex for ibv_create_cq_ex,
 * whose first members are an ibv_cq's), and the ring of completions the
 * core has taken from the device's CQ for ibv_poll_cq and the ibv_cq_ex
 * poll API (core.h), which lock guards: the poller that finds it empty
 * asks the core to fill it. */
struct cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
	pthread_spinlock_t lock;
	/* The ibv_cq_ex poll API: the completion ibv_start_poll or
	 * ibv_next_poll made current (an entry of the ring, consumed by the
	 * next ibv_next_poll or ibv_end_poll), or NULL. Held from a
	 * successful ibv_start_poll to ibv_end_poll, as is the lock. */
	const struct goroce_wc *cur;
	struct goroce_cq_ring ring;
};

/* A QP: the ibv_qp the program sees (an ibv_qp_ex for ibv_create_qp_ex,
 * whose first member is the ibv_qp), and, for the ibv_wr_* API, the work
 * requests built since ibv_wr_start, in the shim's memory until
 * ibv_wr_complete hands them all to the core at once (verbs_ex.c). */
struct qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	int ex; /* made by ibv_create_qp_ex: ibv_qp_to_qp_ex gives qp_ex */
	uint32_t max_send_wr, max_send_sge, max_inline;

	/* The ibv_wr_* batch, under lock from ibv_wr_start to
	 * ibv_wr_complete or ibv_wr_abort. Slot i has wrs[i], the SGEs at
	 * sges[i*sge_slot] and the inline bytes at inl[i*max_inline];
	 * wrs[i].sg_list is pointed at them by ibv_wr_complete. */
	pthread_spinlock_t lock;
	int err;  /* the first error since ibv_wr_start: ibv_wr_complete's answer */
	int n;    /* WRs built */
	int cap;  /* slots allocated */
	int sge_slot;
	struct goroce_send_wr *wrs;
	struct goroce_sge *sges;
	uint8_t *inl;
};

static inline struct qp *qp_of(struct ibv_qp *qp) { return (struct qp *)qp; }

/* cq_create makes a CQ (ibv_create_cq), or gives NULL with errno. */
HIDDEN struct cq *cq_create(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
			    int comp_vector);

/* qp_create makes a QP of the program's attributes on pd (ibv_create_qp),
 * or gives NULL with errno. */
HIDDEN struct qp *qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);

/* In verbs_ex.c: the extended context ops ibv_open_device installs. */
HIDDEN struct ibv_cq_ex *goroce_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);
HIDDEN struct ibv_qp *goroce_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
HIDDEN int goroce_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
				  struct ibv_device_attr_ex *attr, size_t attr_size);
/* qp_ex_free frees what the ibv_wr_* API allocated for qp. */
HIDDEN void qp_ex_free(struct qp *qp);

/* In verbs.c: the CQ ring's one way into the core, for poll_cq and the
 * ibv_cq_ex poll API, with the lock held: how many completions it moved
 * into the empty ring, or a negative errno. */
HIDDEN int cq_refill(struct cq *c);
/* cq_idle offers the CPU every few empty polls of the thread. */
HIDDEN void cq_idle(void);

#endif
