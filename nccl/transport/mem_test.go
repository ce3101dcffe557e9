package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func drive(t *testing.T, m *Mem, reqs ...Request) error {
	t.Helper()
	for range 100 {
		if err := m.Progress(); err != nil {
			return err
		}
		all := true
		for _, r := range reqs {
			done, err := r.Test()
			if err != nil {
				return err
			}
			all = all && done
		}
		if all {
			return nil
		}
	}
	return context.DeadlineExceeded
}

// Messages between a pair are matched in posting order; a receive posted
// before the message arrives completes when it does.
func TestMemOrder(t *testing.T) {
	f := NewMemFabric(3)
	a, b := f.Rank(0), f.Rank(1)
	early := make([]byte, 1)
	r0, err := b.Irecv(0, early)
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := r0.Test(); done {
		t.Fatal("receive complete before any send")
	}
	for _, m := range [][]byte{{1}, {2, 2}, {}} {
		if _, err := a.Isend(1, m); err != nil {
			t.Fatal(err)
		}
	}
	second, third := make([]byte, 2), []byte{}
	r1, _ := b.Irecv(0, second)
	r2, _ := b.Irecv(0, third)
	if err := drive(t, b, r0, r1, r2); err != nil {
		t.Fatal(err)
	}
	if early[0] != 1 || !bytes.Equal(second, []byte{2, 2}) {
		t.Errorf("got %v %v", early, second)
	}
}

func TestMemErrors(t *testing.T) {
	f := NewMemFabric(2)
	a, b := f.Rank(0), f.Rank(1)
	if _, err := a.Isend(0, nil); !errors.Is(err, ErrPeer) {
		t.Errorf("send to self: %v", err)
	}
	if _, err := a.Irecv(2, nil); !errors.Is(err, ErrPeer) {
		t.Errorf("recv from rank 2 of 2: %v", err)
	}
	a.Isend(1, []byte{1, 2, 3})
	r, _ := b.Irecv(0, make([]byte, 2))
	var pe *PeerError
	if err := drive(t, b, r); !errors.Is(err, ErrLength) || !errors.As(err, &pe) || pe.Peer != 0 {
		t.Errorf("length mismatch: %v", err)
	}
	a.Close()
	r, _ = b.Irecv(0, make([]byte, 1))
	if err := drive(t, b, r); !errors.Is(err, ErrPeerGone) {
		t.Errorf("receive from a closed peer: %v", err)
	}
	if _, err := b.Isend(0, []byte{1}); !errors.Is(err, ErrPeerGone) {
		t.Errorf("send to a closed peer: %v", err)
	}
}
