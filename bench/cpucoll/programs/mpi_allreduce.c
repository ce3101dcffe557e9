// mpi_allreduce: MPI_Allreduce of float32 with MPI_SUM, timed the way
// nccl-tests' all_reduce_perf times ncclAllReduce, and printed in its
// columns, so that bench/cmd/collcompare can put Open MPI beside goroce.
//
//   mpirun -np N mpi_allreduce [-w WARMUP] [-n ITERS] [-c 0|1] BYTES...
//
// For each size (bytes, rounded down to whole floats): WARMUP untimed
// calls, then ITERS timed calls out of place (sendbuf -> recvbuf) and
// ITERS in place (MPI_IN_PLACE). A row's time is the mean time of one
// call, averaged over the ranks; algbw = bytes / time; busbw = algbw *
// 2(n-1)/n. With -c 1 (the default) one more, untimed call per mode runs
// on fresh rank-dependent inputs and every rank counts the elements that
// differ from the exact sum; #wrong is the total over the ranks.
//
// Buffers for the largest size are allocated and written once, before any
// timing, so no timed call pays for a first-touch page fault. Run it with
// MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set high, too: Open
// MPI's own temporary buffers then stay in the heap instead of being
// mapped and unmapped (and faulted in) on every call.
//
// Exit status: 0 when every result was right, 1 when one was wrong, 2 on
// bad arguments.

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// input is what rank puts at element i: a small integer, so that the sum
// over up to a few hundred ranks is exact in float32 whatever the order
// of the additions. It depends on both the rank and the index, so a chunk
// that lands in the wrong place, or a rank left out, shows up as wrong.
static float input(int rank, size_t i)
{
	return (float)((int)((i * 7 + (size_t)rank * 13) % 61) - 30);
}

static void fill(float *buf, size_t count, int rank)
{
	for (size_t i = 0; i < count; i++)
		buf[i] = input(rank, i);
}

// wrong counts the elements of got that are not the sum of every rank's
// input.
static long wrong(const float *got, size_t count, int nranks)
{
	long bad = 0;
	for (size_t i = 0; i < count; i++) {
		float want = 0;
		for (int r = 0; r < nranks; r++)
			want += input(r, i);
		if (got[i] != want)
			bad++;
	}
	return bad;
}

// allreduce runs one call: out of place from send to recv, or in place
// on recv.
static void allreduce(const float *send, float *recv, size_t count, int inplace)
{
	MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT,
		      MPI_SUM, MPI_COMM_WORLD);
}

// timed returns the mean seconds of one call over iters calls, averaged
// over the ranks (nccl-tests averages each rank's time the same way).
static double timed(const float *send, float *recv, size_t count, int inplace,
		    int iters, int nranks)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double start = MPI_Wtime();
	for (int it = 0; it < iters; it++)
		allreduce(send, recv, count, inplace);
	double sec = (MPI_Wtime() - start) / iters, sum;
	MPI_Allreduce(&sec, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	return sum / nranks;
}

// checked runs one call on fresh inputs and returns the number of wrong
// elements over all ranks. The output is first poisoned with NaN, so an
// element nobody wrote cannot pass.
static long checked(float *send, float *recv, size_t count, int inplace,
		    int rank, int nranks)
{
	if (inplace) {
		fill(recv, count, rank);
	} else {
		fill(send, count, rank);
		for (size_t i = 0; i < count; i++)
			recv[i] = 0.0f / 0.0f;
	}
	allreduce(send, recv, count, inplace);
	long mine = wrong(recv, count, nranks), all;
	MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	return all;
}

// usec formats microseconds in 7 columns, as nccl-tests does.
static void usec(char *out, size_t n, double us)
{
	snprintf(out, n, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
}

static int usage(int rank, const char *why)
{
	if (rank == 0)
		fprintf(stderr, "mpi_allreduce: %s\nusage: mpi_allreduce [-w WARMUP] [-n ITERS] [-c 0|1] BYTES...\n", why);
	MPI_Finalize();
	return 2;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, nranks;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);

	int warmup = 5, iters = 20, check = 1, nsizes = 0;
	size_t sizes[64], maxCount = 0;
	for (int a = 1; a < argc; a++) {
		char *end;
		if (a + 1 < argc && (!strcmp(argv[a], "-w") || !strcmp(argv[a], "-n") || !strcmp(argv[a], "-c"))) {
			long v = strtol(argv[a + 1], &end, 10);
			if (*end != '\0' || v < 0 || v > 1000000)
				return usage(rank, "bad number after a flag");
			*(argv[a][1] == 'w' ? &warmup : argv[a][1] == 'n' ? &iters : &check) = (int)v;
			a++;
			continue;
		}
		unsigned long long b = strtoull(argv[a], &end, 10);
		if (*end != '\0' || argv[a][0] == '-' || b > (1ULL << 33) || nsizes == 64)
			return usage(rank, "want at most 64 sizes in bytes");
		sizes[nsizes] = (size_t)b / sizeof(float);
		if (sizes[nsizes] > maxCount)
			maxCount = sizes[nsizes];
		nsizes++;
	}
	if (nsizes == 0 || iters < 1)
		return usage(rank, "no size given, or -n 0");

	// Allocate and touch once: no page fault inside a timed call.
	float *send = malloc((maxCount + 1) * sizeof(float));
	float *recv = malloc((maxCount + 1) * sizeof(float));
	if (send == NULL || recv == NULL) {
		fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	fill(send, maxCount + 1, rank);
	fill(recv, maxCount + 1, rank);

	if (rank == 0) {
		int len;
		char version[MPI_MAX_LIBRARY_VERSION_STRING];
		MPI_Get_library_version(version, &len);
		version[strcspn(version, "\n")] = '\0';
		printf("# mpi_allreduce: %d ranks, %s\n", nranks, version);
		printf("# warmup iters: %d iters: %d validation: %d\n#\n", warmup, iters, check);
		printf("#                                                              out-of-place                       in-place          \n");
		printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
		printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n");
	}
	long wrongTotal = 0;
	for (int s = 0; s < nsizes; s++) {
		size_t count = sizes[s], bytes = count * sizeof(float);
		if (rank == 0)
			printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, "float", "sum", -1);
		for (int inplace = 0; inplace <= 1; inplace++) {
			for (int it = 0; it < warmup; it++)
				allreduce(send, recv, count, inplace);
			double sec = timed(send, recv, count, inplace, iters, nranks);
			double algbw = bytes / sec / 1e9;
			double busbw = algbw * 2.0 * (nranks - 1) / nranks;
			char wrongCol[24] = "N/A", timeCol[16];
			if (check) {
				long bad = checked(send, recv, count, inplace, rank, nranks);
				wrongTotal += bad;
				snprintf(wrongCol, sizeof wrongCol, "%ld", bad);
			}
			usec(timeCol, sizeof timeCol, sec * 1e6);
			if (rank == 0)
				printf("  %7s  %6.2f  %6.2f  %5s", timeCol, algbw, busbw, wrongCol);
		}
		if (rank == 0) {
			printf("\n");
			fflush(stdout);
		}
	}
	if (rank == 0)
		printf("# Out of bounds values : %ld %s\n#\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
	free(send);
	free(recv);
	MPI_Finalize();
	return wrongTotal ? 1 : 0;
}
