/*
 * rsocket.c: librdmacm's rsocket functions, which goroce does not stand in
 * for: rsocket fails with ENOSYS (as rdmacm.c's calls goroce's CM lacks),
 * so no rsocket ever exists, and every call on one fails as librdmacm
 * fails for a descriptor that is not an rsocket: -1 with errno EBADF.
 * rpoll and rselect, which librdmacm lets take ordinary descriptors too,
 * are poll and select. Without these, the real librdmacm would run its
 * rsockets on the preload's rdma_* calls and goroce0's objects, which it
 * was not written for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <rdma/rsocket.h>

#include "shim.h"

EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain, (void)type, (void)protocol;
	goroce_unsupported("rsocket", "ENOSYS");
	errno = ENOSYS;
	return -1;
}

/* ebadf is an rsocket call on a descriptor that is none. */
static int ebadf(void)
{
	errno = EBADF;
	return -1;
}

EXPORT int rbind(int s, const struct sockaddr *a, socklen_t n) { return (void)s, (void)a, (void)n, ebadf(); }
EXPORT int rlisten(int s, int backlog) { return (void)s, (void)backlog, ebadf(); }
EXPORT int raccept(int s, struct sockaddr *a, socklen_t *n) { return (void)s, (void)a, (void)n, ebadf(); }
EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t n) { return (void)s, (void)a, (void)n, ebadf(); }
EXPORT int rshutdown(int s, int how) { return (void)s, (void)how, ebadf(); }
EXPORT int rclose(int s) { return (void)s, ebadf(); }
EXPORT ssize_t rrecv(int s, void *b, size_t n, int f) { return (void)s, (void)b, (void)n, (void)f, ebadf(); }
EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *an)
{
	return (void)s, (void)b, (void)n, (void)f, (void)a, (void)an, ebadf();
}
EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f) { return (void)s, (void)m, (void)f, ebadf(); }
EXPORT ssize_t rsend(int s, const void *b, size_t n, int f) { return (void)s, (void)b, (void)n, (void)f, ebadf(); }
EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t an)
{
	return (void)s, (void)b, (void)n, (void)f, (void)a, (void)an, ebadf();
}
EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f) { return (void)s, (void)m, (void)f, ebadf(); }
EXPORT ssize_t rread(int s, void *b, size_t n) { return (void)s, (void)b, (void)n, ebadf(); }
EXPORT ssize_t rreadv(int s, const struct iovec *v, int n) { return (void)s, (void)v, (void)n, ebadf(); }
EXPORT ssize_t rwrite(int s, const void *b, size_t n) { return (void)s, (void)b, (void)n, ebadf(); }
EXPORT ssize_t rwritev(int s, const struct iovec *v, int n) { return (void)s, (void)v, (void)n, ebadf(); }
EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *n) { return (void)s, (void)a, (void)n, ebadf(); }
EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *n) { return (void)s, (void)a, (void)n, ebadf(); }
EXPORT int rsetsockopt(int s, int level, int name, const void *v, socklen_t n)
{
	return (void)s, (void)level, (void)name, (void)v, (void)n, ebadf();
}
EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *n)
{
	return (void)s, (void)level, (void)name, (void)v, (void)n, ebadf();
}
EXPORT int rfcntl(int s, int cmd, ...) { return (void)s, (void)cmd, ebadf(); }
EXPORT off_t riomap(int s, void *b, size_t n, int prot, int f, off_t off)
{
	return (void)s, (void)b, (void)n, (void)prot, (void)f, (void)off, ebadf();
}
EXPORT int riounmap(int s, void *b, size_t n) { return (void)s, (void)b, (void)n, ebadf(); }

/* riowrite returns a size_t: librdmacm's failure is (size_t)-1. */
EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off, int f)
{
	(void)s, (void)b, (void)n, (void)off, (void)f;
	errno = EBADF;
	return (size_t)-1;
}

/* rpoll and rselect on descriptors none of which is an rsocket. */
EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout) { return poll(fds, nfds, timeout); }

EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
	return select(nfds, r, w, e, timeout);
}
