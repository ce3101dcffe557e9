/*
 * absent.c: the rest of what libibverbs.so.1 exports, stood in for so
 * that no call reaches the real library with an object of goroce0's (it
 * would look for the provider's private structures a goroce0 context does
 * not have, and crash): the provider interface (ibv_cmd_*, the verbs_*
 * helpers, execute_ioctl), shared-object import, ECE, L2 address
 * resolution, and the kernel-ABI converters, which are checked for NULL
 * and then left to libibverbs. Each answers as rdma-core does for a
 * device without the feature: EOPNOTSUPP (the error), or NULL with errno
 * EOPNOTSUPP; with GOROCE_DEBUG it says so once per call. The pure helpers
 * (ibv_wc_status_str, ibv_rate_to_mbps, ...) stay libibverbs' own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "shim.h"

static void unsupported(const char *call) { goroce_unsupported(call, "EOPNOTSUPP"); }

/* ---- the provider interface: goroce0 has no kernel command channel
 * (its context's cmd_fd is -1), so every command is EOPNOTSUPP, as for a
 * kernel without it. ---- */

#define NO_CMD(name)                          \
	EXPORT int name(void)                 \
	{                                     \
		unsupported(#name);           \
		return EOPNOTSUPP;            \
	}
NO_CMD(ibv_cmd_advise_mr)
NO_CMD(ibv_cmd_alloc_dm)
NO_CMD(ibv_cmd_alloc_mw)
NO_CMD(ibv_cmd_alloc_pd)
NO_CMD(ibv_cmd_attach_mcast)
NO_CMD(ibv_cmd_close_xrcd)
NO_CMD(ibv_cmd_create_ah)
NO_CMD(ibv_cmd_create_counters)
NO_CMD(ibv_cmd_create_cq)
NO_CMD(ibv_cmd_create_cq_ex)
NO_CMD(ibv_cmd_create_flow)
NO_CMD(ibv_cmd_create_flow_action_esp)
NO_CMD(ibv_cmd_create_qp)
NO_CMD(ibv_cmd_create_qp_ex)
NO_CMD(ibv_cmd_create_qp_ex2)
NO_CMD(ibv_cmd_create_rwq_ind_table)
NO_CMD(ibv_cmd_create_srq)
NO_CMD(ibv_cmd_create_srq_ex)
NO_CMD(ibv_cmd_create_wq)
NO_CMD(ibv_cmd_dealloc_mw)
NO_CMD(ibv_cmd_dealloc_pd)
NO_CMD(ibv_cmd_dereg_mr)
NO_CMD(ibv_cmd_destroy_ah)
NO_CMD(ibv_cmd_destroy_counters)
NO_CMD(ibv_cmd_destroy_cq)
NO_CMD(ibv_cmd_destroy_flow)
NO_CMD(ibv_cmd_destroy_flow_action)
NO_CMD(ibv_cmd_destroy_qp)
NO_CMD(ibv_cmd_destroy_rwq_ind_table)
NO_CMD(ibv_cmd_destroy_srq)
NO_CMD(ibv_cmd_destroy_wq)
NO_CMD(ibv_cmd_detach_mcast)
NO_CMD(ibv_cmd_free_dm)
NO_CMD(ibv_cmd_get_context)
NO_CMD(ibv_cmd_modify_cq)
NO_CMD(ibv_cmd_modify_flow_action_esp)
NO_CMD(ibv_cmd_modify_qp)
NO_CMD(ibv_cmd_modify_qp_ex)
NO_CMD(ibv_cmd_modify_srq)
NO_CMD(ibv_cmd_modify_wq)
NO_CMD(ibv_cmd_open_qp)
NO_CMD(ibv_cmd_open_xrcd)
NO_CMD(ibv_cmd_poll_cq)
NO_CMD(ibv_cmd_post_recv)
NO_CMD(ibv_cmd_post_send)
NO_CMD(ibv_cmd_post_srq_recv)
NO_CMD(ibv_cmd_query_context)
NO_CMD(ibv_cmd_query_device_any)
NO_CMD(ibv_cmd_query_mr)
NO_CMD(ibv_cmd_query_port)
NO_CMD(ibv_cmd_query_qp)
NO_CMD(ibv_cmd_query_srq)
NO_CMD(ibv_cmd_read_counters)
NO_CMD(ibv_cmd_reg_dm_mr)
NO_CMD(ibv_cmd_reg_dmabuf_mr)
NO_CMD(ibv_cmd_reg_mr)
NO_CMD(ibv_cmd_req_notify_cq)
NO_CMD(ibv_cmd_rereg_mr)
NO_CMD(ibv_cmd_resize_cq)
/* execute_ioctl(context, command buffer): the same. */
NO_CMD(execute_ioctl)
#undef NO_CMD

/* _verbs_init_and_alloc_context makes a provider's context on its device:
 * there is no provider device here. */
EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
					   void *context_offset, uint32_t driver_id)
{
	(void)device, (void)cmd_fd, (void)alloc_size, (void)context_offset, (void)driver_id;
	unsupported("_verbs_init_and_alloc_context");
	errno = EOPNOTSUPP;
	return NULL;
}

/* verbs_uninit_context and verbs_set_ops act on a provider's context:
 * goroce0's has no provider part to undo or to give ops to. */
EXPORT void verbs_uninit_context(struct verbs_context *vctx)
{
	(void)vctx;
	unsupported("verbs_uninit_context");
}

EXPORT void verbs_set_ops(struct verbs_context *vctx, const void *ops)
{
	(void)vctx, (void)ops;
	unsupported("verbs_set_ops");
}

/* verbs_register_driver_34 and ibv_register_driver (the pre-2017 form)
 * add a provider to the list libibverbs opens devices with: goroce0's list
 * holds goroce0 alone. */
EXPORT void verbs_register_driver_34(const void *ops)
{
	(void)ops;
	unsupported("verbs_register_driver_34");
}

EXPORT void ibv_register_driver(const char *name, void *init)
{
	(void)name, (void)init;
	unsupported("ibv_register_driver");
}

/* verbs_open_device opens a device with a provider's private data:
 * goroce0 takes none, and opens as ibv_open_device does. */
EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data)
{
	(void)private_data;
	return ibv_open_device(device);
}

/* verbs_init_cq fills the generic part of a CQ a provider made, as
 * libibverbs does, for a live context and channel. */
EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
			  void *cq_context)
{
	if (!cq || !live(ctx, OBJ_CONTEXT) || (channel && !live(channel, OBJ_COMP_CHANNEL)))
		return;
	cq->context = ctx;
	cq->channel = channel;
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&ctx->mutex);
	}
}

/* __verbs_log is providers' debug log: on stderr under GOROCE_DEBUG. */
EXPORT void __verbs_log(struct verbs_context *vctx, uint32_t level, const char *fmt, ...)
{
	va_list ap;
	(void)vctx, (void)level;
	if (!fmt || !getenv("GOROCE_DEBUG"))
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* ibv_read_ibdev_sysfs_file reads a file of a provider device's sysfs
 * directory (struct verbs_sysfs_dev): goroce0 is not such a device. */
EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const void *sysfs_dev, const char *fmt, ...)
{
	(void)buf, (void)size, (void)sysfs_dev, (void)fmt;
	unsupported("ibv_read_ibdev_sysfs_file");
	errno = EOPNOTSUPP;
	return -1;
}

/* ---- objects shared between processes (ibv_import_*): goroce0's
 * objects live in one process's device. ---- */

EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	unsupported("ibv_import_device");
	errno = EOPNOTSUPP;
	return NULL;
}

/* NO_IMPORT defines ibv_import_NAME, which imports into a live parent
 * of kind kind. */
#define NO_IMPORT(type, name, ptype, kind)                             \
	EXPORT struct type *ibv_import_##name(struct ptype *parent, uint32_t handle) \
	{                                                              \
		(void)handle;                                          \
		LIVE(parent, kind, NULL);                              \
		unsupported("ibv_import_" #name);                      \
		errno = EOPNOTSUPP;                                    \
		return NULL;                                           \
	}
NO_IMPORT(ibv_pd, pd, ibv_context, OBJ_CONTEXT)
NO_IMPORT(ibv_mr, mr, ibv_pd, OBJ_PD)
NO_IMPORT(ibv_dm, dm, ibv_context, OBJ_CONTEXT)
#undef NO_IMPORT

/* ibv_unimport_*: nothing was imported; nothing happens. */
#define NO_UNIMPORT(type, name)                        \
	EXPORT void ibv_unimport_##name(struct type *obj) \
	{                                              \
		(void)obj;                             \
		unsupported("ibv_unimport_" #name);    \
	}
NO_UNIMPORT(ibv_pd, pd)
NO_UNIMPORT(ibv_mr, mr)
NO_UNIMPORT(ibv_dm, dm)
#undef NO_UNIMPORT

/* ---- ECE, which rxe lacks too ---- */

EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)ece;
	LIVE(qp, OBJ_QP, EINVAL);
	unsupported("ibv_query_ece");
	return EOPNOTSUPP;
}

EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)ece;
	LIVE(qp, OBJ_QP, EINVAL);
	unsupported("ibv_set_ece");
	return EOPNOTSUPP;
}

/* ibv_resolve_eth_l2_from_gid gives the Ethernet address behind a GID,
 * which old rxe providers put in their address vectors: goroce0 sends
 * through UDP sockets and never builds an Ethernet header. */
EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *ctx, struct ibv_ah_attr *attr, uint8_t eth_mac[6],
				       uint16_t *vid)
{
	(void)eth_mac, (void)vid;
	LIVE(ctx, OBJ_CONTEXT, EINVAL);
	if (!attr)
		return EINVAL;
	unsupported("ibv_resolve_eth_l2_from_gid");
	return EOPNOTSUPP;
}

/* ---- the kernel-ABI converters: pure, libibverbs' own once the
 * pointers are checked (it would dereference NULL). ---- */

/* REAL sets real_NAME to libibverbs' NAME, or returns. */
#define REAL(name)                                                 \
	static __typeof__(name) *real_##name;                      \
	if (!real_##name)                                          \
		*(void **)&real_##name = dlsym(RTLD_NEXT, #name); \
	if (!real_##name)                                          \
		return

struct ib_uverbs_ah_attr;
struct ib_uverbs_qp_attr;
struct ibv_sa_path_rec;
struct ib_user_path_rec;

EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	if (!dst || !src)
		return;
	REAL(ibv_copy_ah_attr_from_kern);
	real_ibv_copy_ah_attr_from_kern(dst, src);
}

EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	if (!dst || !src)
		return;
	REAL(ibv_copy_qp_attr_from_kern);
	real_ibv_copy_qp_attr_from_kern(dst, src);
}

EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	if (!dst || !src)
		return;
	REAL(ibv_copy_path_rec_from_kern);
	real_ibv_copy_path_rec_from_kern(dst, src);
}

EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	if (!dst || !src)
		return;
	REAL(ibv_copy_path_rec_to_kern);
	real_ibv_copy_path_rec_to_kern(dst, src);
}
#undef REAL
