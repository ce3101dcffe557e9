package nccl

import (
	"errors"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/nccl/bootstrap"
)

// torchrunEnv is what torchrun (or goroce run) gives rank 1 of 2, plus extra.
func torchrunEnv(extra map[string]string) map[string]string {
	env := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29411"}
	maps.Copy(env, extra)
	return env
}

// envIDOf is the unique ID a rank with environment env derives.
func envIDOf(t *testing.T, env map[string]string) (UniqueID, string) {
	t.Helper()
	o, err := OptionsFromEnv(lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	e := o.Launch
	_, from := JobSecret(e)
	id, err := e.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	return id, from
}

// TestJobSecretNotFromRendezvous: with GOROCE_JOB_SECRET the ID's secret
// depends on it, not only on MASTER_ADDR, MASTER_PORT and WORLD_SIZE: a
// stranger who knows those derives another, and so does a job with
// another secret. The magic, which says which rendezvous, stays the same.
func TestJobSecretNotFromRendezvous(t *testing.T) {
	stranger, from := envIDOf(t, torchrunEnv(nil))
	if from != "" {
		t.Errorf("a bare torchrun environment: secret from %q, want nothing", from)
	}
	a, fromA := envIDOf(t, torchrunEnv(map[string]string{JobSecretEnv: "f00d"}))
	b, _ := envIDOf(t, torchrunEnv(map[string]string{JobSecretEnv: "beef"}))
	if fromA != JobSecretEnv {
		t.Errorf("secret from %q, want %s", fromA, JobSecretEnv)
	}
	ja, _, _ := a.parts()
	jb, _, _ := b.parts()
	js, _, _ := stranger.parts()
	if string(ja.Secret) == string(js.Secret) || string(ja.Secret) == string(jb.Secret) {
		t.Errorf("secrets: %x with f00d, %x with beef, %x with none: want all different", ja.Secret, jb.Secret, js.Secret)
	}
	if ja.Magic != js.Magic || ja.Magic != jb.Magic {
		t.Errorf("magics %x %x %x: want the rendezvous's, the same", ja.Magic, jb.Magic, js.Magic)
	}
}

// TestJobSecretFromLauncher: without GOROCE_JOB_SECRET the secret comes
// from the launcher's job identity, so two Slurm jobs (or steps) that
// share a MASTER_PORT do not mix.
func TestJobSecretFromLauncher(t *testing.T) {
	slurm := func(job, step string) map[string]string {
		return map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MASTER_PORT": "29411",
			"SLURM_JOB_ID": job, "SLURM_STEP_ID": step}
	}
	a, from := envIDOf(t, slurm("100", "0"))
	b, _ := envIDOf(t, slurm("101", "0"))
	c, _ := envIDOf(t, slurm("100", "1"))
	if from != "SLURM_JOB_ID,SLURM_STEP_ID" {
		t.Errorf("secret from %q, want SLURM_JOB_ID,SLURM_STEP_ID", from)
	}
	if a == b || a == c || b == c {
		t.Errorf("two Slurm jobs or steps on one MASTER_PORT derive the same unique ID")
	}
}

// TestStrangerCannotJoin runs the rendezvous of a job with
// GOROCE_JOB_SECRET over loopback: a stranger's rank 1, with the ID that
// MASTER_ADDR, MASTER_PORT and WORLD_SIZE give, is refused; the job's own
// rank 1 joins.
func TestStrangerCannotJoin(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	at := map[string]string{"MASTER_ADDR": host, "MASTER_PORT": port}
	job, _ := envIDOf(t, torchrunEnv(map[string]string{JobSecretEnv: "5ecret", "MASTER_ADDR": host, "MASTER_PORT": port}))
	stranger, _ := envIDOf(t, torchrunEnv(at))
	jj, addr, _ := job.parts()
	js, _, _ := stranger.parts()
	root := bootstrap.StartRoot(ln, 2, jj, bootstrap.RootOptions{Timeout: 10 * time.Second})
	defer root.Close()
	_, err = bootstrap.Connect(t.Context(), addr, 1, 2, js, 10*time.Second)
	if re, ok := errors.AsType[*bootstrap.RootError](err); !ok || !strings.Contains(re.Msg, "failed authentication") {
		t.Errorf("the stranger's rank 1: %v, want it refused", err)
	}
	joined := make(chan error, 2)
	for rank := range 2 {
		go func() {
			c, err := bootstrap.Connect(t.Context(), addr, rank, 2, jj, 10*time.Second)
			if err == nil {
				err = c.Barrier(t.Context())
				c.Close()
			}
			joined <- err
		}()
	}
	for range 2 {
		if err := <-joined; err != nil {
			t.Errorf("the job's rank: %v", err)
		}
	}
	if root.Refused() != 1 {
		t.Errorf("the root refused %d connections, want 1", root.Refused())
	}
}
