package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestAllGatherAndBarrier(t *testing.T) {
	const n = 5
	ln := listen(t)
	root := StartRoot(ln, n, Job{Magic: 42}, RootOptions{Timeout: 10 * time.Second})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for rank := n - 1; rank >= 0; rank-- { // arrival order does not matter
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[rank] = func() error {
				c, err := Connect(t.Context(), ln.Addr().String(), rank, n, Job{Magic: 42}, 10*time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				blobs, err := c.AllGather(t.Context(), []byte(fmt.Sprint("rank", rank)))
				if err != nil {
					return err
				}
				for r, b := range blobs {
					if want := fmt.Sprint("rank", r); !bytes.Equal(b, []byte(want)) {
						return fmt.Errorf("blob %d = %q", r, b)
					}
				}
				return c.Barrier(t.Context())
			}()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := root.Wait(t.Context()); err != nil {
		t.Fatalf("root: %v", err)
	}
}

// Ranks 1 and 3 of 4 never come: the root and every rank that did come
// fail after the timeout, naming them.
func TestMissingRanksNamed(t *testing.T) {
	const n = 4
	ln := listen(t)
	root := StartRoot(ln, n, Job{Magic: 7}, RootOptions{Timeout: 300 * time.Millisecond})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for _, rank := range []int{0, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Connect(t.Context(), ln.Addr().String(), rank, n, Job{Magic: 7}, 300*time.Millisecond)
			if err == nil {
				c.Close()
			}
			errs[rank] = err
		}()
	}
	wg.Wait()
	for _, rank := range []int{0, 2} {
		if !errors.Is(errs[rank], ErrMissing) || !strings.Contains(errs[rank].Error(), "[1 3]") {
			t.Errorf("rank %d: %v, want the missing ranks [1 3] named", rank, errs[rank])
		}
	}
	if err := root.Wait(t.Context()); !errors.Is(err, ErrMissing) {
		t.Errorf("root: %v", err)
	}
}

// Nobody listens: Connect gives up after its timeout saying so.
func TestRootUnreachable(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := Connect(ctx, addr, 1, 2, Job{Magic: 1}, 200*time.Millisecond)
	if !errors.Is(err, ErrRoot) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("%v, want ErrRoot naming rank 1", err)
	}
}

// A hello with the wrong magic is turned away; the real ranks proceed.
func TestWrongMagicRejected(t *testing.T) {
	ln := listen(t)
	root := StartRoot(ln, 1, Job{Magic: 9}, RootOptions{Timeout: 5 * time.Second})
	if _, err := Connect(t.Context(), ln.Addr().String(), 0, 1, Job{Magic: 8}, time.Second); err == nil {
		t.Fatal("wrong magic accepted")
	}
	c, err := Connect(t.Context(), ln.Addr().String(), 0, 1, Job{Magic: 9}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := root.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}
