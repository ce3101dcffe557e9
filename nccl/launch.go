package nccl

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
)

// Env is the job a launcher started this process in, as OptionsFromEnv
// reads it into Options.Launch: torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI's
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK)
// or Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), in that order
// of preference.
type Env struct {
	// Rank and Size are this rank and the job's number of ranks.
	Rank, Size int
	// LocalRank is the rank's index among the ranks of its host: the
	// launcher's variable, else the first of LOCAL_RANK,
	// OMPI_COMM_WORLD_LOCAL_RANK and SLURM_LOCALID that is set, else Rank.
	LocalRank int
	// LocalSize is the number of ranks on this host (LOCAL_WORLD_SIZE or
	// OMPI_COMM_WORLD_LOCAL_SIZE, read with or without a launcher); 0 if
	// neither says.
	LocalSize int
	// Root is host:port of the bootstrap root: NCCL_COMM_ID if set, else
	// MASTER_ADDR:MASTER_PORT (defaults 127.0.0.1 and 29500).
	Root string
	// Launcher is "torchrun", "openmpi" or "slurm"; "" when no launcher's
	// rank variable is set (then only LocalSize, Secret and JobIDs may
	// hold anything).
	Launcher string
	// Secret is GOROCE_JOB_SECRET (see JobSecret).
	Secret string
	// JobIDs are the launcher's job identity variables that are set, as
	// NAME=value (see JobSecret).
	JobIDs []string
}

// ErrNoEnv: Options.Launch names no launcher (none of RANK/WORLD_SIZE,
// OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS was set when
// OptionsFromEnv read the environment).
var ErrNoEnv = errors.New("nccl: no launcher environment (RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS, as OptionsFromEnv reads them into Options.Launch)")

// CommInitFromEnv creates this process's communicator in the job
// opts.Launch describes (opts from OptionsFromEnv): every rank derives the
// same unique ID from the root address, the world size and the job's
// secret (see JobSecret), and rank 0 serves the rendezvous there.
func CommInitFromEnv(ctx context.Context, opts Options) (*Comm, error) {
	e := opts.Launch
	if e.Launcher == "" {
		return nil, ErrNoEnv
	}
	id, err := e.UniqueID()
	if err != nil {
		return nil, err
	}
	return CommInitRank(ctx, e.Size, id, e.Rank, opts)
}

// UniqueID returns the launch's unique ID, the one CommInitFromEnv uses:
// every rank derives its magic from the root address and the world size
// and its secret from JobSecret, and rank 0's CommInitRank serves the
// rendezvous at Root. Bindings that hand out an ID under a launcher
// (ncclGetUniqueId in cmd/goroce-nccl) return it, so every rank's ID
// agrees however the program distributes it.
func (e Env) UniqueID() (UniqueID, error) {
	secret, _ := JobSecret(e)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", e.Root, e.Size)
	return makeID(h.Sum64(), secret, e.Root)
}

// JobSecretEnv is the variable that hands the ranks of a job their shared
// secret (Env.Secret): `goroce run` sets it to 32 random bytes in hex for
// each job.
const JobSecretEnv = "GOROCE_JOB_SECRET"

// jobIDVars are the launcher variables that name a job (the same in every
// rank of it, different in the next job): Slurm's job and step, Open MPI's
// job (ess_base_jobid in Open MPI 4, the PMIx namespace in 5), torchrun's
// run ID (--rdzv-id).
var jobIDVars = []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"}

// JobSecret is the secret the ranks of e prove themselves with at the
// rendezvous, and where it came from:
//
//   - e.Secret (GOROCE_JOB_SECRET), when set (as `goroce run` sets it, or
//     as a user of torchrun, mpirun -x or srun --export can): only
//     processes given the variable can join, so a stranger on the network
//     or another user of the machine who knows MASTER_ADDR, MASTER_PORT
//     and WORLD_SIZE can neither take a rank's place nor be counted in. (A
//     process that can read the ranks' environment, the same user or
//     root, can.)
//   - otherwise the launcher's job identity (e.JobIDs) with the root and
//     the size. Those are not secret (squeue, ps and /proc show them), so
//     this guards only against accidental cross-talk: a rank of another
//     job, or a leftover rank of an earlier run, that dials the same
//     MASTER_ADDR:MASTER_PORT is refused instead of joining. It does not
//     stop anyone who wants to join.
//   - with neither (a bare RANK/WORLD_SIZE environment), only the root
//     and the size: no protection beyond the magic's.
func JobSecret(e Env) (secret [idSecretLen]byte, from string) {
	h := sha256.New()
	if e.Secret != "" {
		io.WriteString(h, "goroce job secret\x00"+e.Secret)
		return [idSecretLen]byte(h.Sum(nil)), JobSecretEnv
	}
	fmt.Fprintf(h, "goroce job identity\x00%s/%d", e.Root, e.Size)
	var used []string
	for _, kv := range e.JobIDs {
		fmt.Fprintf(h, "\x00%s", kv)
		k, _, _ := strings.Cut(kv, "=")
		used = append(used, k)
	}
	return [idSecretLen]byte(h.Sum(nil)), strings.Join(used, ",")
}
