// Command allreduce is the starter program for `goroce run`: each rank
// makes its communicator from the launcher's environment, sums a vector
// across the ranks with AllReduce, checks the sum, and when something goes
// wrong says which operation failed and which rank is to blame.
//
//	go build -o allreduce ./nccl/examples/allreduce
//	goroce run -n 4 -- ./allreduce -count 1048576
//
// It runs under torchrun, mpirun and srun as well: nccl.OptionsFromEnv
// reads RANK/WORLD_SIZE/MASTER_ADDR (or Open MPI's and Slurm's variables)
// and GOROCE_ADDR, the rank's RNIC address, and nccl.CommInitFromEnv joins
// that job.
//
// -fail-rank R shows the error path: rank R aborts its communicator
// (ncclCommAbort) before the first AllReduce and waits to be stopped; the
// other ranks' AllReduce fails within the communicator's timeout with an
// error that names rank R, they print it and exit 1, and goroce run stops
// the job.
//
// Copy it to start your own program: the parts are the context, the
// communicator, a Request per collective and Wait on it.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"

	"github.com/goroce/goroce/nccl"
)

func main() {
	count := flag.Int("count", 1<<20, "float32 elements to sum")
	iters := flag.Int("iters", 5, "AllReduce calls")
	failRank := flag.Int("fail-rank", -1, "this rank aborts its communicator before the first AllReduce (to show the error path)")
	flag.Parse()
	if *count < 1 || *iters < 1 {
		fmt.Fprintln(os.Stderr, "allreduce: -count and -iters must be at least 1")
		os.Exit(2)
	}
	// goroce run (like torchrun) stops the other ranks with SIGTERM when
	// one fails: end cleanly then.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *count, *iters, *failRank); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, count, iters, failRank int) error {
	opts, err := nccl.OptionsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	comm, err := nccl.CommInitFromEnv(ctx, opts)
	if err != nil {
		return fmt.Errorf("creating the communicator: %w", err)
	}
	defer comm.Destroy()
	rank, size := comm.Rank(), comm.Size()

	if rank == failRank {
		comm.Abort()
		fmt.Printf("rank %d: aborted my communicator, as -fail-rank asked; waiting to be stopped\n", rank)
		<-ctx.Done()
		return nil
	}

	// Rank r contributes r+1 in every element, so the sum is size*(size+1)/2.
	buf := make([]byte, 4*count)
	want := float32(size * (size + 1) / 2)
	for it := range iters {
		for i := range count {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(rank+1)))
		}
		// In place: send and receive buffers are the same slice.
		if err := comm.AllReduce(buf, buf, count, nccl.Float32, nccl.Sum).Wait(ctx); err != nil {
			// Abort, not just Destroy: the operation may still be
			// running (Wait gave up because ctx ended), and Destroy
			// waits for it.
			comm.Abort()
			return explain(rank, it, err)
		}
		for i := range count {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])); got != want {
				return fmt.Errorf("rank %d: AllReduce %d: element %d is %v, want %v", rank, it, i, got, want)
			}
		}
	}
	fmt.Printf("rank %d of %d: %d AllReduce calls of %d float32: every element is %v\n", rank, size, iters, count, want)
	return nil
}

// explain turns a collective's error into what a user needs: the
// operation, and the rank to look at first.
func explain(rank, it int, err error) error {
	var re *nccl.RankError
	var oe *nccl.OpError
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("rank %d: stopped (interrupt or SIGTERM) during AllReduce %d", rank, it)
	case errors.As(err, &re):
		return fmt.Errorf("rank %d: AllReduce %d failed: look at rank %d first: %w", rank, it, re.Rank, err)
	case errors.As(err, &oe) && oe.Peer >= 0:
		return fmt.Errorf("rank %d: AllReduce %d failed: look at rank %d first: %w", rank, it, oe.Peer, err)
	}
	return fmt.Errorf("rank %d: AllReduce %d failed: %w", rank, it, err)
}
