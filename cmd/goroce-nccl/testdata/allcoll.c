/*
 * allcoll: runs every collective of libgoroce-nccl and checks the results
 * against values computed here in plain C. Exits 0 if every check passed.
 *
 *   allcoll [--rank=R --nranks=N] [--id=env|--id=file:PATH]   every collective
 *   allcoll --dead=R                 rank R exits after init; the others must fail with ncclRemoteError
 *   allcoll --initall=N              one process, N ranks (ncclCommInitAll), grouped calls
 *   allcoll --groupinit=N            the same with N ncclCommInitRank in a group
 *
 * Rank and size come from --rank/--nranks, else from RANK and WORLD_SIZE
 * (goroce run, torchrun). --id=env: every rank calls ncclGetUniqueId
 * (under a launcher they all get the job's ID). --id=file:PATH: rank 0
 * calls it and writes PATH; the others read it, as programs that ship the
 * ID over MPI do.
 *
 * Every value is a small integer (-2..2) or a sum, product, or average of
 * four of them, exact in every type, so the results are compared bit for
 * bit with the expected values computed in the element's own arithmetic.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <math.h>

#include "nccl.h"

static int rank, nranks, checks, failures;

#define CHECK(cond, ...)                                      \
  do {                                                        \
    checks++;                                                 \
    if (!(cond)) {                                            \
      failures++;                                             \
      fprintf(stderr, "rank %d: FAIL: ", rank);               \
      fprintf(stderr, __VA_ARGS__);                           \
      fprintf(stderr, "\n");                                  \
    }                                                         \
  } while (0)

#define NCCLOK(call)                                                               \
  do {                                                                             \
    ncclResult_t r_ = (call);                                                      \
    if (r_ != ncclSuccess) {                                                       \
      fprintf(stderr, "rank %d: %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__,  \
              #call, ncclGetErrorString(r_), ncclGetLastError(NULL));              \
      exit(2);                                                                     \
    }                                                                              \
  } while (0)

/* ---- element types, in plain C ---- */

typedef struct {
  ncclDataType_t dt;
  const char* name;
  int size, isfloat, issigned;
} dtype;

static const dtype dtypes[] = {
    {ncclInt8, "int8", 1, 0, 1},       {ncclUint8, "uint8", 1, 0, 0},
    {ncclInt32, "int32", 4, 0, 1},     {ncclUint32, "uint32", 4, 0, 0},
    {ncclInt64, "int64", 8, 0, 1},     {ncclUint64, "uint64", 8, 0, 0},
    {ncclFloat16, "float16", 2, 1, 1}, {ncclFloat32, "float32", 4, 1, 1},
    {ncclFloat64, "float64", 8, 1, 1}, {ncclBfloat16, "bfloat16", 2, 1, 1},
};
#define NTYPES (sizeof dtypes / sizeof dtypes[0])

static const dtype* dtypeOf(ncclDataType_t dt) {
  for (size_t i = 0; i < NTYPES; i++)
    if (dtypes[i].dt == dt) return &dtypes[i];
  abort();
}

static const char* opName[] = {"sum", "prod", "max", "min", "avg"};

/* binary16 of an exact value (the test's values are all exact). */
static uint16_t half(double v) {
  if (v == 0) return signbit(v) ? 0x8000 : 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  double m = frexp(fabs(v), &e); /* v = m * 2^e, 0.5 <= m < 1 */
  return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024);
}

/* bfloat16 of an exact value: the top half of its float32. */
static uint16_t bf16(double v) {
  float f = (float)v;
  uint32_t b;
  memcpy(&b, &f, 4);
  return (uint16_t)(b >> 16);
}

/* store writes element i of buf: an integer wraps to the type, a float is
 * converted exactly. Little-endian, as the host. */
static void storeInt(const dtype* t, void* buf, size_t i, uint64_t v) {
  memcpy((char*)buf + i * t->size, &v, t->size);
}

static void storeFloat(const dtype* t, void* buf, size_t i, double v) {
  char* p = (char*)buf + i * t->size;
  uint16_t h;
  float f;
  switch (t->dt) {
    case ncclFloat16: h = half(v); memcpy(p, &h, 2); break;
    case ncclBfloat16: h = bf16(v); memcpy(p, &h, 2); break;
    case ncclFloat32: f = (float)v; memcpy(p, &f, 4); break;
    default: memcpy(p, &v, 8);
  }
}

/* value is element i of rank r's input: -2..2, with repeats across ranks
 * (offsets 0, 2, 1, 2 for ranks 0-3), so sums, products and extremes of
 * an element take many values and do not cancel by symmetry. */
static int value(int r, size_t i, int salt) { return (int)(((size_t)(r * r + r) + i * 3 + salt) % 5) - 2; }

static void fill(const dtype* t, void* buf, int r, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) {
    if (t->isfloat) storeFloat(t, buf, i, value(r, i, salt));
    else storeInt(t, buf, i, (uint64_t)(int64_t)value(r, i, salt));
  }
}

/* asSigned interprets the low bits of v as the signed type t. */
static int64_t asSigned(const dtype* t, uint64_t v) {
  int s = 64 - 8 * t->size;
  return s ? (int64_t)(v << s) >> s : (int64_t)v;
}

static uint64_t mask(const dtype* t) { return t->size == 8 ? ~0ULL : (1ULL << (8 * t->size)) - 1; }

/* reduced stores at element i of out the reduction with op of element i
 * of the ranks' inputs (salt), as the element type computes it. */
static void reduced(const dtype* t, ncclRedOp_t op, void* out, size_t i, size_t at, int salt) {
  if (t->isfloat) {
    double acc = value(0, i, salt);
    for (int r = 1; r < nranks; r++) {
      double x = value(r, i, salt);
      switch (op) {
        case ncclSum: case ncclAvg: acc += x; break;
        case ncclProd: acc *= x; break;
        case ncclMax: acc = x > acc ? x : acc; break;
        case ncclMin: acc = x < acc ? x : acc; break;
        default: abort();
      }
    }
    if (op == ncclAvg) acc /= nranks;
    storeFloat(t, out, at, acc);
    return;
  }
  uint64_t m = mask(t), acc = (uint64_t)(int64_t)value(0, i, salt) & m;
  for (int r = 1; r < nranks; r++) {
    uint64_t x = (uint64_t)(int64_t)value(r, i, salt) & m;
    int gt = t->issigned ? asSigned(t, x) > asSigned(t, acc) : x > acc;
    switch (op) {
      case ncclSum: case ncclAvg: acc = (acc + x) & m; break;
      case ncclProd: acc = (acc * x) & m; break;
      case ncclMax: if (gt) acc = x; break;
      case ncclMin: if (!gt && x != acc) acc = x; break;
      default: abort();
    }
  }
  if (op == ncclAvg) acc = t->issigned ? (uint64_t)(asSigned(t, acc) / nranks) & m : acc / (uint64_t)nranks;
  storeInt(t, out, at, acc);
}

/* same compares n elements of got and want; on a mismatch it says where. */
static void same(const char* what, const dtype* t, const void* got, const void* want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const unsigned char* g = (const unsigned char*)got + i * t->size;
    const unsigned char* w = (const unsigned char*)want + i * t->size;
    if (memcmp(g, w, t->size) != 0) {
      uint64_t gv = 0, wv = 0;
      memcpy(&gv, g, t->size);
      memcpy(&wv, w, t->size);
      CHECK(0, "%s %s: element %zu of %zu is %#llx, want %#llx", what, t->name, i, n,
            (unsigned long long)gv, (unsigned long long)wv);
      return;
    }
  }
  checks++;
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}

/* ---- the collectives ---- */

static void allReduce(ncclComm_t comm, const dtype* t, ncclRedOp_t op, size_t n, int inplace) {
  char what[64];
  snprintf(what, sizeof what, "AllReduce %s n=%zu %s", opName[op], n, inplace ? "in place" : "out of place");
  void* send = xmalloc(n * t->size);
  void* recv = inplace ? send : xmalloc(n * t->size);
  void* want = xmalloc(n * t->size);
  int salt = (int)op + (int)t->dt;
  fill(t, send, rank, n, salt);
  for (size_t i = 0; i < n; i++) reduced(t, op, want, i, i, salt);
  NCCLOK(ncclAllReduce(send, recv, n, t->dt, op, comm, NULL));
  same(what, t, recv, want, n);
  if (!inplace) free(recv);
  free(send);
  free(want);
}

static void broadcast(ncclComm_t comm, const dtype* t, int root, size_t n, int inplace) {
  char what[64];
  snprintf(what, sizeof what, "Broadcast root %d %s", root, inplace ? "in place" : "out of place");
  void* send = xmalloc(n * t->size);
  void* recv = inplace ? send : xmalloc(n * t->size);
  void* want = xmalloc(n * t->size);
  fill(t, send, rank, n, 1);
  if (!inplace) memset(recv, 0x5a, n * t->size);
  fill(t, want, root, n, 1);
  NCCLOK(ncclBroadcast(send, recv, n, t->dt, root, comm, (cudaStream_t)0x1234));
  same(what, t, recv, want, n);
  if (!inplace) free(recv);
  free(send);
  free(want);
}

static void reduce(ncclComm_t comm, const dtype* t, ncclRedOp_t op, int root, size_t n, int inplace) {
  char what[64];
  snprintf(what, sizeof what, "Reduce %s root %d %s", opName[op], root, inplace ? "in place" : "out of place");
  void* send = xmalloc(n * t->size);
  /* Out of place, non-root ranks pass NULL: recvbuff is used on the root only. */
  void* recv = inplace ? send : rank == root ? xmalloc(n * t->size) : NULL;
  void* want = xmalloc(n * t->size);
  int salt = 3 + (int)op;
  fill(t, send, rank, n, salt);
  void* before = xmalloc(n * t->size);
  memcpy(before, send, n * t->size);
  for (size_t i = 0; i < n; i++) reduced(t, op, want, i, i, salt);
  NCCLOK(ncclReduce(send, recv, n, t->dt, op, root, comm, NULL));
  if (rank == root) same(what, t, recv, want, n);
  else if (!inplace) same("Reduce leaves a non-root's sendbuff", t, send, before, n);
  if (!inplace && recv) free(recv);
  free(send);
  free(want);
  free(before);
}

static void allGather(ncclComm_t comm, const dtype* t, size_t n, int inplace) {
  char what[64];
  snprintf(what, sizeof what, "AllGather n=%zu %s", n, inplace ? "in place" : "out of place");
  char* recv = xmalloc(nranks * n * t->size);
  char* send = inplace ? recv + rank * n * t->size : xmalloc(n * t->size);
  char* want = xmalloc(nranks * n * t->size);
  memset(recv, 0x5a, nranks * n * t->size);
  fill(t, send, rank, n, 2);
  for (int r = 0; r < nranks; r++) fill(t, want + r * n * t->size, r, n, 2);
  NCCLOK(ncclAllGather(send, recv, n, t->dt, comm, NULL));
  same(what, t, recv, want, nranks * n);
  if (!inplace) free(send);
  free(recv);
  free(want);
}

static void reduceScatter(ncclComm_t comm, const dtype* t, ncclRedOp_t op, size_t n, int inplace) {
  char what[64];
  snprintf(what, sizeof what, "ReduceScatter %s n=%zu %s", opName[op], n, inplace ? "in place" : "out of place");
  char* send = xmalloc(nranks * n * t->size);
  char* recv = inplace ? send + rank * n * t->size : xmalloc(n * t->size);
  char* want = xmalloc(n * t->size);
  int salt = 4 + (int)op;
  fill(t, send, rank, nranks * n, salt);
  for (size_t i = 0; i < n; i++) reduced(t, op, want, rank * n + i, i, salt);
  NCCLOK(ncclReduceScatter(send, recv, n, t->dt, op, comm, NULL));
  same(what, t, recv, want, n);
  if (!inplace) free(recv);
  free(send);
  free(want);
}

/* sendRecvRing passes a block to the next rank without a group: even ranks
 * send first, odd ranks receive first, so no rank waits on itself. */
static void sendRecvRing(ncclComm_t comm, const dtype* t, size_t n) {
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  void* send = xmalloc(n * t->size);
  void* recv = xmalloc(n * t->size);
  void* want = xmalloc(n * t->size);
  fill(t, send, rank, n, 5);
  fill(t, want, prev, n, 5);
  if (rank % 2 == 0) {
    NCCLOK(ncclSend(send, n, t->dt, next, comm, NULL));
    NCCLOK(ncclRecv(recv, n, t->dt, prev, comm, NULL));
  } else {
    NCCLOK(ncclRecv(recv, n, t->dt, prev, comm, NULL));
    NCCLOK(ncclSend(send, n, t->dt, next, comm, NULL));
  }
  same("Send/Recv ring", t, recv, want, n);
  free(send);
  free(recv);
  free(want);
}

/* groupSendRecv exchanges with both neighbours in one group, in two types,
 * and runs an AllReduce in the same group. */
static void groupSendRecv(ncclComm_t comm) {
  const dtype* f = dtypeOf(ncclFloat64);
  const dtype* b = dtypeOf(ncclInt8);
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  size_t n = 3000;
  double *toNext = xmalloc(n * 8), *fromPrev = xmalloc(n * 8), *wantPrev = xmalloc(n * 8);
  int8_t *toPrev = xmalloc(n), *fromNext = xmalloc(n), *wantNext = xmalloc(n);
  int32_t *ar = xmalloc(n * 4), *arWant = xmalloc(n * 4);
  fill(f, toNext, rank, n, 6);
  fill(f, wantPrev, prev, n, 6);
  fill(b, toPrev, rank, n, 7);
  fill(b, wantNext, next, n, 7);
  fill(dtypeOf(ncclInt32), ar, rank, n, 8);
  for (size_t i = 0; i < n; i++) reduced(dtypeOf(ncclInt32), ncclMax, arWant, i, i, 8);
  NCCLOK(ncclGroupStart());
  NCCLOK(ncclRecv(fromPrev, n, ncclFloat64, prev, comm, NULL));
  NCCLOK(ncclSend(toNext, n, ncclFloat64, next, comm, NULL));
  NCCLOK(ncclGroupStart()); /* nested */
  NCCLOK(ncclSend(toPrev, n, ncclInt8, prev, comm, NULL));
  NCCLOK(ncclRecv(fromNext, n, ncclInt8, next, comm, NULL));
  NCCLOK(ncclAllReduce(ar, ar, n, ncclInt32, ncclMax, comm, NULL));
  NCCLOK(ncclGroupEnd());
  NCCLOK(ncclGroupEnd());
  same("group Send/Recv from prev", f, fromPrev, wantPrev, n);
  same("group Send/Recv from next", b, fromNext, wantNext, n);
  same("group AllReduce max", dtypeOf(ncclInt32), ar, arWant, n);
  free(toNext), free(fromPrev), free(wantPrev), free(toPrev), free(fromNext), free(wantNext);
  free(ar), free(arWant);
}

/* misuse checks the codes and messages of bad calls; none of them breaks
 * the communicator. */
static void misuse(ncclComm_t comm) {
  float x[4] = {0};
  ncclResult_t r = ncclAllReduce(x, x, 4, (ncclDataType_t)10, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "AllReduce of data type 10: %d, want ncclInvalidArgument", r);
  CHECK(strstr(ncclGetLastError(NULL), "AllReduce") && strstr(ncclGetLastError(NULL), "data type 10"),
        "last error %s does not name AllReduce and data type 10", ncclGetLastError(NULL));
  r = ncclAllReduce(x, x, 4, (ncclDataType_t)-1, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "AllReduce of data type -1: %d, want ncclInvalidArgument", r);
  r = ncclAllReduce(x, x, 4, ncclFloat32, (ncclRedOp_t)5, comm, NULL);
  CHECK(r == ncclInvalidArgument, "AllReduce with op 5: %d, want ncclInvalidArgument", r);
  r = ncclBroadcast(x, x, 4, ncclFloat32, nranks, comm, NULL);
  CHECK(r == ncclInvalidArgument, "Broadcast from root %d: %d, want ncclInvalidArgument", nranks, r);
  r = ncclSend(x, 4, ncclFloat32, rank, comm, NULL);
  CHECK(r == ncclInvalidArgument, "Send to self: %d, want ncclInvalidArgument", r);
  r = ncclAllReduce(NULL, x, 4, ncclFloat32, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "AllReduce from NULL: %d, want ncclInvalidArgument", r);
  r = ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, NULL, NULL);
  CHECK(r == ncclInvalidArgument, "AllReduce on a NULL comm: %d, want ncclInvalidArgument", r);
  r = ncclGroupEnd();
  CHECK(r == ncclInvalidUsage, "GroupEnd without GroupStart: %d, want ncclInvalidUsage", r);
  CHECK(strstr(ncclGetLastError(comm), "ncclGroupStart") != NULL, "last error %s", ncclGetLastError(comm));
  ncclResult_t async = ncclInternalError;
  NCCLOK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error after bad calls: %d, want ncclSuccess", async);

  int v = 0;
  NCCLOK(ncclGetVersion(&v));
  CHECK(v == NCCL_VERSION_CODE && v == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), "version %d", v);
  CHECK(NCCL_VERSION(2, 8, 4) == 2804 && NCCL_VERSION(2, 18, 3) == 21803, "NCCL_VERSION macro");
  CHECK(sizeof(ncclUniqueId) == 128, "sizeof ncclUniqueId %zu", sizeof(ncclUniqueId));
  const char* s[ncclNumResults + 1];
  for (int c = 0; c <= ncclNumResults; c++) {
    s[c] = ncclGetErrorString((ncclResult_t)c);
    CHECK(s[c] && *s[c], "no string for result %d", c);
    for (int d = 0; d < c && c < ncclNumResults; d++) CHECK(strcmp(s[c], s[d]) != 0, "results %d and %d share %s", c, d, s[c]);
  }
  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0, "%s", s[0]);
  CHECK(strstr(ncclGetErrorString(ncclInvalidArgument), "invalid argument") != NULL, "%s", s[4]);
  CHECK(strstr(ncclGetErrorString(ncclInvalidUsage), "invalid usage") != NULL, "%s", s[5]);
  CHECK(strstr(ncclGetErrorString(ncclRemoteError), "remote") != NULL, "%s", s[6]);
  CHECK(strstr(ncclGetErrorString(ncclSystemError), "system") != NULL, "%s", s[2]);
  CHECK(strstr(ncclGetErrorString(ncclInternalError), "internal") != NULL, "%s", s[3]);
  CHECK(strcmp(ncclGetErrorString((ncclResult_t)99), "unknown result code") == 0, "result 99: %s",
        ncclGetErrorString((ncclResult_t)99));
}

static void everything(ncclComm_t comm) {
  int n = 0, r = -1;
  NCCLOK(ncclCommCount(comm, &n));
  NCCLOK(ncclCommUserRank(comm, &r));
  CHECK(n == nranks && r == rank, "comm says rank %d of %d, want %d of %d", r, n, rank, nranks);
  misuse(comm);
  for (size_t t = 0; t < NTYPES; t++)
    for (int op = ncclSum; op < ncclNumOps; op++)
      for (int in = 0; in < 2; in++) allReduce(comm, &dtypes[t], (ncclRedOp_t)op, 1001, in);
  for (int in = 0; in < 2; in++) allReduce(comm, dtypeOf(ncclFloat32), ncclSum, 300000, in); /* the ring */
  for (int in = 0; in < 2; in++) {
    broadcast(comm, dtypeOf(ncclInt32), 1, 5000, in);
    broadcast(comm, dtypeOf(ncclFloat16), nranks - 1, 100003, in);
    reduce(comm, dtypeOf(ncclFloat32), ncclSum, 2 % nranks, 4000, in);
    reduce(comm, dtypeOf(ncclInt64), ncclMax, 0, 4000, in);
    reduce(comm, dtypeOf(ncclBfloat16), ncclAvg, nranks - 1, 70001, in);
    allGather(comm, dtypeOf(ncclInt8), 777, in);
    allGather(comm, dtypeOf(ncclFloat64), 20000, in);
    reduceScatter(comm, dtypeOf(ncclUint32), ncclSum, 555, in);
    reduceScatter(comm, dtypeOf(ncclFloat16), ncclMin, 555, in);
    reduceScatter(comm, dtypeOf(ncclInt32), ncclAvg, 30000, in);
  }
  sendRecvRing(comm, dtypeOf(ncclUint64), 2500);
  sendRecvRing(comm, dtypeOf(ncclBfloat16), 100000);
  groupSendRecv(comm);
}

/* ---- unique IDs ---- */

static void sleepMs(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void getID(const char* how, ncclUniqueId* id) {
  if (strcmp(how, "env") == 0) {
    NCCLOK(ncclGetUniqueId(id));
    return;
  }
  if (strncmp(how, "file:", 5) != 0) {
    fprintf(stderr, "--id=%s: want env or file:PATH\n", how);
    exit(2);
  }
  const char* path = how + 5;
  if (rank == 0) {
    NCCLOK(ncclGetUniqueId(id));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      perror(path);
      exit(2);
    }
    return;
  }
  for (int i = 0; i < 3000; i++) { /* up to 30 s */
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) return;
    }
    sleepMs(10);
  }
  fprintf(stderr, "rank %d: no unique ID in %s\n", rank, path);
  exit(2);
}

/* ---- modes ---- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* deadRank: rank dead exits without a word after init; every other rank's
 * AllReduce must fail with ncclRemoteError naming it, within the bound. */
static int deadRank(ncclComm_t comm, int dead) {
  float x[1024] = {0};
  NCCLOK(ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, comm, NULL)); /* everyone is up */
  if (rank == dead) _exit(0);
  double t0 = now();
  ncclResult_t r = ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, comm, NULL);
  double took = now() - t0;
  const char* msg = ncclGetLastError(NULL);
  /* The error names the dead rank: as the peer this rank lost, or as
   * the rank another one reported dead. */
  char peer[32], name[32];
  snprintf(peer, sizeof peer, "peer %d:", dead);
  snprintf(name, sizeof name, "rank %d dead", dead);
  printf("rank %d: AllReduce after rank %d died: %s after %.1f s: %s\n", rank, dead, ncclGetErrorString(r), took, msg);
  CHECK(r == ncclRemoteError, "AllReduce with a dead rank: %d, want ncclRemoteError", r);
  CHECK((strstr(msg, peer) || strstr(msg, name)) && strstr(msg, "AllReduce #2"),
        "last error %s does not say AllReduce #2 and %s or %s", msg, peer, name);
  CHECK(took < 11, "failing took %.1f s, beyond 2 x the 5 s timeout", took);
  ncclResult_t async = ncclSuccess;
  NCCLOK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclRemoteError, "async error %d, want ncclRemoteError", async);
  r = ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, comm, NULL);
  CHECK(r == ncclRemoteError, "AllReduce on the broken comm: %d, want ncclRemoteError", r);
  NCCLOK(ncclCommAbort(comm));
  return 0;
}

/* initAll: n ranks in this thread, their calls grouped; made by
 * ncclCommInitAll, or (ingroup) by ncclCommInitRank in a group, as
 * NCCL programs that drive several devices from one thread do. */
static void initAll(int n, int ingroup) {
  ncclComm_t comms[16];
  if (n > 16) n = 16;
  if (ingroup) {
    ncclUniqueId id;
    NCCLOK(ncclGetUniqueId(&id));
    NCCLOK(ncclGroupStart());
    for (int r = 0; r < n; r++) NCCLOK(ncclCommInitRank(&comms[r], n, id, r));
    ncclResult_t async = ncclSuccess;
    NCCLOK(ncclCommGetAsyncError(comms[0], &async));
    CHECK(async == ncclInProgress, "async error of a comm being made in a group: %d, want ncclInProgress", async);
    int got = -1;
    ncclResult_t r = ncclCommCount(comms[0], &got);
    CHECK(r == ncclInvalidUsage, "ncclCommCount on a comm being made in this group: %d, want ncclInvalidUsage", r);
    NCCLOK(ncclGroupEnd());
    NCCLOK(ncclCommGetAsyncError(comms[0], &async));
    CHECK(async == ncclSuccess, "async error after the group: %d, want ncclSuccess", async);
  } else {
    NCCLOK(ncclCommInitAll(comms, n, NULL));
  }
  nranks = n;
  size_t cnt = 10000;
  const dtype* t = dtypeOf(ncclFloat32);
  float* bufs[16];
  float* want = xmalloc(cnt * 4);
  for (size_t i = 0; i < cnt; i++) reduced(t, ncclAvg, want, i, i, 9);
  NCCLOK(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    int got = -1;
    NCCLOK(ncclCommUserRank(comms[r], &got));
    CHECK(got == r, "comm %d says rank %d", r, got);
    bufs[r] = xmalloc(cnt * 4);
    fill(t, bufs[r], r, cnt, 9);
    NCCLOK(ncclAllReduce(bufs[r], bufs[r], cnt, ncclFloat32, ncclAvg, comms[r], NULL));
  }
  NCCLOK(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    rank = r;
    same("InitAll grouped AllReduce avg", t, bufs[r], want, cnt);
  }
  rank = 0;
  for (int r = 0; r < n; r++) NCCLOK(ncclCommDestroy(comms[r]));
}

static int intArg(const char* a, const char* name, int* v) {
  size_t l = strlen(name);
  if (strncmp(a, name, l) != 0) return 0;
  *v = atoi(a + l);
  return 1;
}

int main(int argc, char** argv) {
  const char* id = "env";
  int dead = -1, all = 0, group = 0;
  rank = getenv("RANK") ? atoi(getenv("RANK")) : 0;
  nranks = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
  for (int i = 1; i < argc; i++) {
    if (intArg(argv[i], "--rank=", &rank) || intArg(argv[i], "--nranks=", &nranks) ||
        intArg(argv[i], "--dead=", &dead) || intArg(argv[i], "--initall=", &all) ||
        intArg(argv[i], "--groupinit=", &group))
      continue;
    if (strncmp(argv[i], "--id=", 5) == 0) {
      id = argv[i] + 5;
      continue;
    }
    fprintf(stderr, "allcoll: unknown argument %s\n", argv[i]);
    return 2;
  }
  if (all > 0 || group > 0) {
    initAll(all > 0 ? all : group, group > 0);
  } else {
    ncclUniqueId uid;
    ncclComm_t comm;
    getID(id, &uid);
    NCCLOK(ncclCommInitRank(&comm, nranks, uid, rank));
    if (dead >= 0) {
      deadRank(comm, dead);
    } else {
      everything(comm);
      NCCLOK(ncclCommDestroy(comm));
    }
  }
  printf("rank %d: %d checks, %d failed\n", rank, checks, failures);
  return failures ? 1 : 0;
}
