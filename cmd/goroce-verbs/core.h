/*
 * core.h: the narrow C interface between the preload shim (shim/verbs.c,
 * compiled against <infiniband/verbs.h>) and the Go core (this package,
 * built with -buildmode=c-shared). Only plain C types cross it: the shim
 * owns every libibverbs structure, the core owns the device. Objects are
 * named by 32-bit handles the core hands out. Functions returning int
 * return 0 or a positive errno value.
 */
#ifndef GOROCE_CORE_H
#define GOROCE_CORE_H

#include <stddef.h>
#include <stdint.h>

/* The device's attributes, and (goroce_query_port) port 1's: what
 * ibv_query_device and ibv_query_port report and shim/sysfs.c shows. The
 * core answers them before the device is opened too. */
struct goroce_device_attr {
	uint64_t node_guid; /* host order */
	uint64_t max_mr_size;
	uint64_t max_msg_size;
	uint32_t vendor_id;
	int max_qp, max_qp_wr, max_sge, max_cq, max_cqe, max_mr, max_pd;
	int max_qp_rd_atom, max_qp_init_rd_atom, max_srq_wr, max_inline, max_mw;
	uint64_t sys_image_guid; /* host order */
	char fw_ver[64], node_desc[64];
};

struct goroce_port_attr {
	int state;      /* enum ibv_port_state */
	int max_mtu;    /* enum ibv_mtu */
	int active_mtu; /* enum ibv_mtu */
	int gid_tbl_len;
	uint32_t max_msg_sz;
	int pkey_tbl_len;
	uint32_t port_cap_flags; /* enum ibv_port_cap_flags */
	uint16_t lid, sm_lid;
	uint8_t sm_sl, lmc, phys_state, active_width, active_speed, link_layer;
};

struct goroce_cap {
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

struct goroce_av {
	uint8_t dgid[16];
	uint8_t sgid_index, hop_limit, traffic_class, sl;
};

struct goroce_qp_attr {
	int state, cur_state, path_mtu;
	uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
	int access_flags;
	struct goroce_cap cap;
	struct goroce_av av;
	uint16_t pkey_index;
	uint8_t port_num, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, timeout, retry_cnt, rnr_retry;
	uint8_t sq_draining;
	uint32_t rate_limit;
};

/* One SGE, laid out as struct ibv_sge. */
struct goroce_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct goroce_send_wr {
	uint64_t wr_id;
	const struct goroce_sge *sg_list;
	int num_sge;
	int opcode;        /* enum ibv_wr_opcode */
	uint32_t flags;    /* enum ibv_send_flags */
	uint32_t imm;      /* host order: the value the peer's ntohl(wc.imm_data) gives; or the rkey to invalidate */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t ah;       /* UD: address handle */
	uint32_t remote_qpn, remote_qkey;
	/* BIND_MW: the window and the MR (0: none, unbinding a type-1 window),
	 * [remote_addr, remote_addr+bind_length) of the MR with the rights
	 * bind_access; rkey is the window's new rkey. */
	uint32_t mw, mr;
	uint64_t bind_length;
	uint32_t bind_access;
};

/* The most work requests of an ibv_post_send or ibv_post_recv list the
 * shim hands the core in one call; a longer list takes several. The core
 * posts a send list this many WRs at a time (the device told once per
 * batch); ibv_wr_complete hands it all the WRs built since ibv_wr_start
 * in one call. */
#define GOROCE_POST_BATCH 16

/* One receive work request (ibv_recv_wr without its link). */
struct goroce_recv_wr {
	uint64_t wr_id;
	const struct goroce_sge *sg_list;
	int num_sge;
};

struct goroce_wc {
	uint64_t wr_id;
	int status, opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp;
	uint32_t wc_flags;
	uint8_t sl;
};

/* A CQ's completion ring, in the shim's memory: completions the core has
 * taken from the CQ that the shim's ibv_poll_cq has not yet handed to the
 * program, so that a poll finds them without calling into the core. One
 * producer, one consumer, at different times: the shim calls
 * goroce_poll_cq, which writes entries and then tail (a release store),
 * only with the CQ's lock held and the ring empty; ibv_poll_cq reads tail
 * (acquire), the entries, and then advances head (release), under the same
 * lock. The device reads head and tail at any time (acquire) to count the
 * entries toward the CQ's depth, so that it overruns as a CQ of that depth
 * does. head and tail run free; entry i is wc[i % GOROCE_CQ_RING]. */
#define GOROCE_CQ_RING 16

struct goroce_cq_ring {
	uint32_t head, tail;
	struct goroce_wc wc[GOROCE_CQ_RING];
};

struct goroce_async_event {
	int event_type;    /* enum ibv_event_type */
	uintptr_t object;  /* the ibv_qp, ibv_cq or ibv_srq the shim gave at creation, or the port number */
};

/* rdma_cm: an IP address (16 bytes, IPv4-mapped for AF_INET) and port. */
struct goroce_cm_addr {
	uint8_t ip[16];
	int family; /* AF_INET or AF_INET6 */
	uint16_t port; /* host order */
};

/* struct rdma_conn_param, with its private data in place. */
struct goroce_cm_param {
	uint8_t private_data[256];
	int private_data_len;
	uint8_t responder_resources, initiator_depth, flow_control, retry_count, rnr_retry_count, srq;
	uint32_t qp_num;
};

/* struct rdma_cm_event, as the core gives it. */
struct goroce_cm_event {
	int event, status;           /* enum rdma_cm_event_type; the status */
	uint32_t id;                 /* the ID's handle */
	uintptr_t id_obj;            /* its rdma_cm_id, 0 for the new ID of a CONNECT_REQUEST */
	uintptr_t listen_obj;        /* the listener's rdma_cm_id (CONNECT_REQUEST) */
	struct goroce_cm_param param;
	int ud;                      /* param.ud: ah, param.qp_num and qkey hold the peer's UD QP */
	struct goroce_av ah;
	uint32_t qkey;
	struct goroce_cm_addr local, peer; /* the ID's addresses */
};

#endif
