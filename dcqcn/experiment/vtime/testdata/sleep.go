//go:build ignore

// sleep is vtime's test program: twice, it sleeps an hour in virtual time
// in a goroutine of the bubble, and prints what it saw.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/goroce/goroce/dcqcn/experiment/vtime"
)

func main() {
	out := os.Stdout
	wall := time.Now()
	var start, end time.Time
	for i := range 2 { // twice: Run may be called again
		err := vtime.Run(context.Background(), func(ctx context.Context) {
			start = time.Now()
			done := make(chan struct{})
			go func() { time.Sleep(time.Hour); close(done) }()
			<-done
			end = time.Now()
		})
		if err != nil {
			fmt.Fprintln(out, "error:", err)
			os.Exit(1)
		}
		fmt.Fprintf(out, "run %d: start %s slept %v\n", i, start.UTC().Format(time.RFC3339), end.Sub(start))
	}
	fmt.Fprintf(out, "real time under a minute: %v\n", time.Since(wall) < time.Minute)
}
