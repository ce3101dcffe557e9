/*
 * mpi_check: an MPI job whose every result is checked, for Open MPI over
 * UCX on goroce. Each rank computes what it must receive from a formula of
 * the sender's rank and the element's index, so no rank trusts another:
 *
 *   - ping-pong: rank 2k and 2k+1 swap messages of 8 B, 64 KiB and 1 MiB
 *     (rounds of each), each side checking every byte it receives;
 *   - MPI_Allreduce of int32 (sum), int64 (max), float (min) and double
 *     (sum, on integers a double holds exactly) over 1, 1000 and 1048576
 *     elements, every element checked against the reference the rank
 *     computes itself;
 *   - one-sided: each rank MPI_Puts 64 KiB into its right neighbour's
 *     window and MPI_Gets 64 KiB from its left neighbour's (fences around
 *     each), and checks both what arrived in its window and what it got.
 *
 * It prints one line per check from rank 0 (with how many ranks agreed),
 * and on every rank "moved: N" with the payload bytes that rank's
 * operations must send to other ranks at the least (ping-pong and put: what
 * it sends; get: what the target sends, counted at the origin; allreduce:
 * the result's size, since every rank's result depends on S bytes of the
 * others', p*S in all), for the test to hold against what goroce0 sent.
 * Exit status 1 if any check failed.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failed;
static long long moved;

static uint8_t pattern(int from, int round, size_t i) { return (uint8_t)(from * 37 + round * 11 + i * 7 + (i >> 9)); }

/* agree reports on rank 0 how many ranks passed a check. */
static void agree(const char *what, int ok)
{
	int oks = 0;
	MPI_Reduce(&ok, &oks, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: %d of %d ranks ok\n", what, oks, size);
	failed |= !ok;
}

static void pingpong(void)
{
	static const size_t sizes[] = {8, 65536, 1 << 20};
	int peer = rank ^ 1, rounds = 10;
	for (int s = 0; s < 3; s++) {
		size_t n = sizes[s];
		uint8_t *out = malloc(n), *in = malloc(n);
		int ok = 1;
		if (peer < size) {
			for (int r = 0; r < rounds; r++) {
				for (size_t i = 0; i < n; i++)
					out[i] = pattern(rank, r, i);
				memset(in, 0, n);
				if (rank % 2 == 0) {
					MPI_Send(out, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD);
					MPI_Recv(in, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					MPI_Recv(in, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					MPI_Send(out, (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD);
				}
				for (size_t i = 0; i < n; i++)
					ok &= in[i] == pattern(peer, r, i);
				moved += (long long)n;
			}
		}
		char what[64];
		snprintf(what, sizeof what, "ping-pong %zu B x %d", n, rounds);
		agree(what, ok);
		free(out);
		free(in);
	}
}

/* Each rank's input element i; the values stay small enough that every
 * sum is exact. */
static int32_t in32(int r, size_t i) { return (int32_t)((i % 1000) * (r + 1) - r); }
static int64_t in64(int r, size_t i) { return (int64_t)((i * 2654435761u + (uint64_t)r * 40503u) % 1000003) - 500000; }
static float inf32(int r, size_t i) { return (float)((int)((i + (size_t)r * 7919) % 4099) - 2049) * 0.5f; }
static double in64f(int r, size_t i) { return (double)(int64_t)((i % 65536) * (size_t)(r + 3)) - 70000.0 * r; }

static void allreduce(void)
{
	static const size_t counts[] = {1, 1000, 1 << 20};
	for (int c = 0; c < 3; c++) {
		size_t n = counts[c];
		int32_t *a = malloc(n * 4), *ar = malloc(n * 4);
		int64_t *b = malloc(n * 8), *br = malloc(n * 8);
		float *f = malloc(n * 4), *fr = malloc(n * 4);
		double *d = malloc(n * 8), *dr = malloc(n * 8);
		for (size_t i = 0; i < n; i++) {
			a[i] = in32(rank, i);
			b[i] = in64(rank, i);
			f[i] = inf32(rank, i);
			d[i] = in64f(rank, i);
		}
		MPI_Allreduce(a, ar, (int)n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
		MPI_Allreduce(b, br, (int)n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
		MPI_Allreduce(f, fr, (int)n, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
		MPI_Allreduce(d, dr, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		int ok32 = 1, ok64 = 1, okf = 1, okd = 1;
		for (size_t i = 0; i < n; i++) {
			int32_t s32 = 0;
			int64_t m64 = INT64_MIN;
			float mf = 1e30f;
			double sd = 0;
			for (int r = 0; r < size; r++) {
				s32 += in32(r, i);
				if (in64(r, i) > m64)
					m64 = in64(r, i);
				if (inf32(r, i) < mf)
					mf = inf32(r, i);
				sd += in64f(r, i);
			}
			ok32 &= ar[i] == s32;
			ok64 &= br[i] == m64;
			okf &= fr[i] == mf;
			okd &= dr[i] == sd;
		}
		moved += (long long)n * (4 + 8 + 4 + 8);
		char what[64];
		snprintf(what, sizeof what, "allreduce int32 sum x %zu", n);
		agree(what, ok32);
		snprintf(what, sizeof what, "allreduce int64 max x %zu", n);
		agree(what, ok64);
		snprintf(what, sizeof what, "allreduce float min x %zu", n);
		agree(what, okf);
		snprintf(what, sizeof what, "allreduce double sum x %zu", n);
		agree(what, okd);
		free(a), free(ar), free(b), free(br), free(f), free(fr), free(d), free(dr);
	}
}

static void onesided(void)
{
	const size_t n = 65536;
	uint8_t *win_mem, *src = malloc(n), *got = malloc(n);
	MPI_Win win;
	MPI_Win_allocate((MPI_Aint)(2 * n), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win_mem, &win);
	memset(win_mem, 0, n);
	for (size_t i = 0; i < n; i++)
		win_mem[n + i] = pattern(rank, 99, i); /* what the left neighbour's MPI_Get reads */
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	for (size_t i = 0; i < n; i++)
		src[i] = pattern(rank, 42, i);
	MPI_Win_fence(0, win);
	MPI_Put(src, (int)n, MPI_BYTE, right, 0, (int)n, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	int okput = 1;
	for (size_t i = 0; i < n; i++)
		okput &= win_mem[i] == pattern(left, 42, i);
	MPI_Get(got, (int)n, MPI_BYTE, left, (MPI_Aint)n, (int)n, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	int okget = 1;
	for (size_t i = 0; i < n; i++)
		okget &= got[i] == pattern(left, 99, i);
	if (size > 1)
		moved += 2 * (long long)n;
	agree("MPI_Put 65536 B to the right neighbour, checked in its window", okput);
	agree("MPI_Get 65536 B from the left neighbour, checked", okget);
	MPI_Win_free(&win);
	free(src);
	free(got);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0)
		printf("ranks: %d\n", size);
	pingpong();
	allreduce();
	onesided();
	int anyfail = 0;
	MPI_Allreduce(&failed, &anyfail, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
	printf("rank %d moved: %lld\n", rank, moved);
	fflush(stdout);
	MPI_Finalize();
	return anyfail;
}
