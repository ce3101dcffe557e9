/*
 * mpi_hello: the smallest MPI job that still shows what MPI puts on the
 * wire. Two ranks:
 *
 *   rank 0: MPI_Send "hello from rank 0" (a 32-byte buffer) to rank 1,
 *           then MPI_Recv rank 1's answer;
 *   rank 1: MPI_Recv it, then MPI_Send "hello from rank 1" back;
 *   both:   MPI_Allreduce (MPI_SUM) of four ints, {r+1, 10(r+1), 100, 1000r}
 *           on rank r, which must give {3, 30, 200, 1000}.
 *
 * Each rank prints what it received and the sum, and exits with an error if
 * either is not what the other rank sent.
 *
 *   mpicc -O2 -o mpi_hello mpi_hello.c
 *   mpirun -np 2 ./mpi_hello
 *
 * Chapter 17 of the course (docs/course/17-mpi.md) runs it with Open MPI
 * over UCX, each rank on its own goroce device (`mpirun ... goroce exec
 * --trace -- ./mpi_hello`), and walks through what it puts on the wire.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_hello: run it on 2 ranks (mpirun -np 2), not %d\n", size);
		MPI_Finalize();
		return 1;
	}
	int bad = 0;

	/* A ping-pong of one 32-byte message each way. */
	char msg[32], want[32];
	int peer = 1 - rank;
	memset(want, 0, sizeof want);
	snprintf(want, sizeof want, "hello from rank %d", peer);
	if (rank == 0) {
		memset(msg, 0, sizeof msg);
		snprintf(msg, sizeof msg, "hello from rank 0");
		MPI_Send(msg, sizeof msg, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
		MPI_Recv(msg, sizeof msg, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(msg, sizeof msg, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		char answer[32] = {0};
		snprintf(answer, sizeof answer, "hello from rank 1");
		MPI_Send(answer, sizeof answer, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
	}
	printf("rank %d received: \"%s\"\n", rank, msg);
	bad |= memcmp(msg, want, sizeof msg) != 0;

	/* A sum of four ints over both ranks. */
	int mine[4] = {rank + 1, 10 * (rank + 1), 100, 1000 * rank}, sum[4];
	MPI_Allreduce(mine, sum, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d allreduce: %d %d %d %d\n", rank, sum[0], sum[1], sum[2], sum[3]);
	bad |= sum[0] != 3 || sum[1] != 30 || sum[2] != 200 || sum[3] != 1000;

	fflush(stdout);
	MPI_Finalize();
	return bad;
}
