package stat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
)

const statAbout = `Prints the counters and QPs of a running goroce device that serves them
(any goroce command started with --metrics-addr), as rdma statistic show and
rdma res show qp print rxe's:

  goroce pingpong --metrics-addr 127.0.0.1:9464 ... &
  goroce stat 127.0.0.1:9464`

// Run is `goroce stat URL`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce stat [flags] ADDR", statAbout)
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return cli.ExitUsage
	}
	base := fs.Arg(0)
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/stat", "/res"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
		if err == nil {
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				} else {
					_, err = io.Copy(stdout, resp.Body)
				}
				resp.Body.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "goroce stat: %s%s: %v\n", base, path, err)
			return cli.ExitFail
		}
	}
	return cli.ExitOK
}
