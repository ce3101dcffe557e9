// gloo_allreduce: one rank of a Gloo allreduce (float32, sum) over Gloo's
// TCP transport on loopback, timed the way nccl-tests' all_reduce_perf
// times ncclAllReduce and printed (by rank 0) in its columns, so that
// bench/cmd/collcompare can put Gloo beside goroce.
//
//   gloo_allreduce --rank R --size N --store DIR --algo ALGO
//                  [--host 127.0.0.1] [--timeout SEC]
//                  [-w WARMUP] [-n ITERS] [-c 0|1] BYTES...
//
// ALGO is ring (gloo::AllreduceRing: the whole buffer goes round the
// ring), ring_chunked (gloo::AllreduceRingChunked: reduce-scatter then
// all-gather in 2N chunks) or halving_doubling
// (gloo::AllreduceHalvingDoubling: recursive halving then doubling). The
// N processes are started by the caller; they meet through a
// gloo::rendezvous::FileStore in DIR, which must be empty and the same for
// all of them, and connect a full mesh of TCP pairs bound to --host.
//
// Gloo's allreduce works in place only (the result overwrites the input
// buffer), so the out-of-place columns say N/A. For each size: the
// algorithm object is built once (it registers the buffer with every
// pair), WARMUP untimed runs, then ITERS timed runs; a row's time is the
// mean time of one run averaged over the ranks; algbw = bytes / time;
// busbw = algbw * 2(n-1)/n, nccl-tests' factor whatever the algorithm
// actually sends. With -c 1 one more, untimed run on fresh rank-dependent
// inputs is checked element by element against the exact sum; #wrong is
// the total over the ranks. The buffer for the largest size is allocated
// and written once, before any timing.
//
// Exit status: 0 when every result was right, 1 when one was wrong or
// Gloo failed, 2 on bad arguments.

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

// input is what rank puts at element i: a small integer, so that the sum
// over up to a few hundred ranks is exact in float32 whatever the order of
// the additions. It depends on both the rank and the index, so a chunk
// that lands in the wrong place, or a rank left out, shows up as wrong.
float input(int rank, size_t i) {
  return float(int((i * 7 + size_t(rank) * 13) % 61) - 30);
}

void fill(float* buf, size_t count, int rank) {
  for (size_t i = 0; i < count; i++) {
    buf[i] = input(rank, i);
  }
}

// wrong counts the elements of got that are not the sum of every rank's
// input.
long wrong(const float* got, size_t count, int nranks) {
  long bad = 0;
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int r = 0; r < nranks; r++) {
      want += input(r, i);
    }
    if (got[i] != want) {
      bad++;
    }
  }
  return bad;
}

// makeAllreduce builds the named algorithm over buf[0:count], or returns
// null for an unknown name.
std::unique_ptr<gloo::Algorithm> makeAllreduce(
    const std::string& algo,
    const std::shared_ptr<gloo::Context>& ctx,
    float* buf,
    int count) {
  std::vector<float*> ptrs{buf};
  if (algo == "ring") {
    return std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, count);
  }
  if (algo == "ring_chunked") {
    return std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count);
  }
  if (algo == "halving_doubling") {
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
  }
  return nullptr;
}

// sumOverRanks adds v up over the ranks (a ring allreduce of doubles).
std::vector<double> sumOverRanks(
    const std::shared_ptr<gloo::Context>& ctx,
    std::vector<double> v) {
  gloo::AllreduceRing<double>(ctx, {v.data()}, int(v.size())).run();
  return v;
}

// usec formats microseconds in 7 columns, as nccl-tests does.
std::string usec(double us) {
  char out[32];
  snprintf(out, sizeof out, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  return out;
}

struct Args {
  int rank = -1, size = 0, warmup = 5, iters = 20, check = 1, timeoutSec = 60;
  std::string store, algo, host = "127.0.0.1";
  std::vector<size_t> counts; // elements per size
};

// parse reads argv into a; it returns an error message, or null.
const char* parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; i++) {
    std::string f = argv[i];
    bool hasValue = i + 1 < argc;
    if (hasValue && (f == "--store" || f == "--algo" || f == "--host")) {
      (f == "--store" ? a.store : f == "--algo" ? a.algo : a.host) = argv[++i];
      continue;
    }
    int* num = f == "--rank" ? &a.rank : f == "--size" ? &a.size : f == "-w" ? &a.warmup
             : f == "-n" ? &a.iters : f == "-c" ? &a.check : f == "--timeout" ? &a.timeoutSec
             : nullptr;
    char* end;
    if (num != nullptr) {
      if (!hasValue) {
        return "a flag without its value";
      }
      long v = strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0 || v > 1000000) {
        return "bad number after a flag";
      }
      *num = int(v);
      continue;
    }
    unsigned long long b = strtoull(argv[i], &end, 10);
    if (*end != '\0' || argv[i][0] == '-' || b > (1ULL << 33)) {
      return "unknown flag, or a size that is not a number of bytes";
    }
    a.counts.push_back(size_t(b) / sizeof(float));
  }
  if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
    return "want --size N and --rank R with 0 <= R < N";
  }
  if (a.store.empty() || a.counts.empty() || a.iters < 1) {
    return "want --store DIR, at least one size and -n >= 1";
  }
  if (a.algo != "ring" && a.algo != "ring_chunked" && a.algo != "halving_doubling") {
    return "--algo must be ring, ring_chunked or halving_doubling";
  }
  return nullptr;
}

// run measures every size and returns the total of wrong elements.
long run(const Args& a, const std::shared_ptr<gloo::Context>& ctx) {
  size_t maxCount = 0;
  for (size_t c : a.counts) {
    maxCount = std::max(maxCount, c);
  }
  // Allocate and touch once: no page fault inside a timed run.
  std::vector<float> buf(maxCount + 1);
  fill(buf.data(), buf.size(), a.rank);

  gloo::BarrierAllToAll barrier(ctx);
  if (a.rank == 0) {
    printf("# gloo_allreduce: %d ranks, algorithm %s, TCP transport on %s\n", a.size, a.algo.c_str(), a.host.c_str());
    printf("# warmup iters: %d iters: %d validation: %d\n#\n", a.warmup, a.iters, a.check);
    printf("#                                                              out-of-place                       in-place          \n");
    printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
    printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n");
  }
  long wrongTotal = 0;
  for (size_t count : a.counts) {
    size_t bytes = count * sizeof(float);
    auto algo = makeAllreduce(a.algo, ctx, buf.data(), int(count));
    for (int i = 0; i < a.warmup; i++) {
      algo->run();
    }
    barrier.run();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; i++) {
      algo->run();
    }
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    double mine = elapsed.count() / a.iters, bad = 0;
    if (a.check) {
      fill(buf.data(), count, a.rank);
      algo->run();
      bad = double(wrong(buf.data(), count, a.size));
    }
    auto sums = sumOverRanks(ctx, {mine, bad});
    double sec = sums[0] / a.size;
    double algbw = bytes / sec / 1e9;
    double busbw = algbw * 2.0 * (a.size - 1) / a.size;
    std::string wrongCol = "N/A";
    if (a.check) {
      wrongTotal += long(sums[1]);
      wrongCol = std::to_string(long(sums[1]));
    }
    if (a.rank == 0) {
      printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, "float", "sum", -1);
      printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
      printf("  %7s  %6.2f  %6.2f  %5s\n", usec(sec * 1e6).c_str(), algbw, busbw, wrongCol.c_str());
      fflush(stdout);
    }
  }
  if (a.rank == 0) {
    printf("# Out of bounds values : %ld %s\n#\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  }
  barrier.run(); // nobody closes its pairs while a peer still reads
  return wrongTotal;
}

} // namespace

// leaveTogether returns once every rank has finished its last operation.
// A rank that closed its pairs while a peer's last operation still ran
// would fail that peer ("Connection closed by peer"): so each rank says it
// is done in the store and waits for all the others to say so too, then
// tears its pairs down.
void leaveTogether(gloo::rendezvous::Store& store, const Args& a) {
  store.set("done/" + std::to_string(a.rank), std::vector<char>{1});
  std::vector<std::string> keys;
  for (int r = 0; r < a.size; r++) {
    keys.push_back("done/" + std::to_string(r));
  }
  store.wait(keys, std::chrono::seconds(a.timeoutSec));
}

int main(int argc, char** argv) {
  Args a;
  if (const char* why = parse(argc, argv, a)) {
    fprintf(stderr,
            "gloo_allreduce: %s\nusage: gloo_allreduce --rank R --size N --store DIR --algo ring|ring_chunked|halving_doubling "
            "[--host ADDR] [--timeout SEC] [-w WARMUP] [-n ITERS] [-c 0|1] BYTES...\n",
            why);
    return 2;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = a.host;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(a.store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(a.rank, a.size);
    ctx->setTimeout(std::chrono::seconds(a.timeoutSec));
    ctx->connectFullMesh(store, dev);
    int code = run(a, ctx) ? 1 : 0;
    leaveTogether(store, a);
    return code;
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo_allreduce: rank %d: %s\n", a.rank, e.what());
    return 1;
  }
}
