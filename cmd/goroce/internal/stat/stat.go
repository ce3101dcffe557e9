package stat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/goroce/goroce/cmd/goroce/internal/cli"
	"github.com/goroce/goroce/rnic"
)

const statAbout = `Prints the counters and QPs of a running goroce device that serves them
(any goroce command started with --metrics-addr), as rdma statistic show and
rdma res show qp print rxe's: one line per link and per QP, "name value"
pairs wrapped, QPNs and PSNs in hex.

  goroce pingpong --metrics-addr 127.0.0.1:9464 ... &
  goroce stat 127.0.0.1:9464
  goroce stat -j 127.0.0.1:9464 | jq .counters.sent_pkts
  goroce stat -w 1s 127.0.0.1:9464      # every second, what changed

With -w, each interval prints the time, the counters that changed with
their increase, and the QPs.`

// Run is `goroce stat ADDR`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("goroce stat [flags] ADDR", statAbout)
	var jsonOut, pretty bool
	var watch time.Duration
	var count int
	fs.BoolVar(&jsonOut, "j", false, "print JSON (as rdma -j): {link, counters: {name: value}, qps: [...]}")
	fs.BoolVar(&jsonOut, "json", false, "same as -j")
	fs.BoolVar(&pretty, "p", false, "with -j, indent the JSON (as rdma -p)")
	fs.BoolVar(&pretty, "pretty", false, "same as -p")
	fs.DurationVar(&watch, "w", 0, "print again every `interval` (1s, 500ms), the counters as increases")
	fs.DurationVar(&watch, "watch", 0, "same as -w")
	cli.IntFlag(fs, &count, "c", "count", 0, "with -w, stop after this many prints (0: until interrupted)")
	if code, ok := cli.ParseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return cli.ExitUsage
	}
	if watch < 0 || count < 0 || (watch == 0 && count != 0) {
		fmt.Fprintf(stderr, "goroce stat: -w wants a positive interval, -c a count of prints with -w\n")
		return cli.ExitUsage
	}
	base := fs.Arg(0)
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimSuffix(base, "/") + "/stat.json"
	client := &http.Client{Timeout: 5 * time.Second}
	var prev *cli.DeviceStat
	for n := 1; ; n++ {
		s, err := fetch(ctx, client, url)
		if err != nil {
			if ctx.Err() != nil && prev != nil {
				return cli.ExitOK // interrupted while watching
			}
			fmt.Fprintf(stderr, "goroce stat: %s: %v\n", url, err)
			return cli.ExitFail
		}
		show(stdout, s, prev, jsonOut, pretty)
		if watch == 0 || n == count {
			return cli.ExitOK
		}
		prev = s
		t := time.NewTimer(watch)
		select {
		case <-ctx.Done():
			t.Stop()
			return cli.ExitOK
		case <-t.C:
		}
	}
}

// fetch reads one DeviceStat.
func fetch(ctx context.Context, client *http.Client, url string) (*cli.DeviceStat, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status + " (is it a goroce --metrics-addr?)")
	}
	var s cli.DeviceStat
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&s); err != nil {
		return nil, fmt.Errorf("not a goroce device's statistics: %w", err)
	}
	return &s, nil
}

// show writes s; after a first print (prev set) the counters are the
// increases since prev: in JSON all of them, in text those that changed.
func show(w io.Writer, s, prev *cli.DeviceStat, jsonOut, pretty bool) {
	if prev != nil {
		delta := cli.Counters{}
		for _, c := range s.Counters {
			old, _ := prev.Counters.Get(c.Name)
			if c.Value != old || jsonOut {
				delta = append(delta, rnic.Counter{Name: c.Name, Value: c.Value - old})
			}
		}
		d := *s
		d.Counters = delta
		s = &d
	}
	if jsonOut {
		enc := json.NewEncoder(w)
		if pretty {
			enc.SetIndent("", "  ")
		}
		enc.Encode(s)
		return
	}
	if prev != nil {
		fmt.Fprintf(w, "%s  increases since the last print:\n", time.Now().Format("15:04:05.000"))
	}
	cli.WriteStatText(w, s)
}
