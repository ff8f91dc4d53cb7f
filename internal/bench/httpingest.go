package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/store"
)

// HTTPIngestOptions configure RunHTTPIngest.
type HTTPIngestOptions struct {
	Dir      string        // the store's directory (fresh)
	Clients  int           // concurrent clients (default 4)
	Rows     int           // rows per request (default 10000)
	Tags     int           // distinct tags (default 100)
	Duration time.Duration // how long the clients post
	Log      *slog.Logger
}

// HTTPIngestResult is what RunHTTPIngest measured.
type HTTPIngestResult struct {
	Clients      int     `json:"clients"`
	Requests     uint64  `json:"requests"`
	Points       uint64  `json:"points"`
	Seconds      float64 `json:"seconds"`
	PointsPerSec float64 `json:"points_per_s"`
	RequestsPerS float64 `json:"requests_per_s"`
	Errors       uint64  `json:"errors"`
	Format       string  `json:"format"`
}

// RunHTTPIngest serves the API over loopback from a real store and has
// concurrent keep-alive clients post CSV imports (tag,ms,value rows, each
// request durable before its answer) for the duration. Line protocol is
// not served yet; when it is, it belongs here beside CSV.
func RunHTTPIngest(ctx context.Context, o HTTPIngestOptions) (*HTTPIngestResult, error) {
	if o.Clients <= 0 {
		o.Clients = 4
	}
	if o.Rows <= 0 {
		o.Rows = 10000
	}
	if o.Tags <= 0 {
		o.Tags = 100
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	sopts := store.DefaultOptions()
	sopts.Logger = o.Log
	db, err := store.Open(o.Dir, sopts)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	srv := api.NewServer(api.WrapDB(db), api.DefaultOptions(), o.Log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for http ingest: %w", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- api.Serve(sctx, ln, srv.Handler(), o.Log) }()
	defer func() { stop(); <-served }()
	url := "http://" + ln.Addr().String() + "/api/v1/import"

	res := &HTTPIngestResult{Clients: o.Clients, Format: "csv"}
	var reqs, pts, errs atomic.Uint64
	var firstErr atomic.Value
	rctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			var body []byte
			// Each client owns a time range so that requests never rewrite
			// each other's samples.
			t := benchT0 + int64(c)*1e12
			for rctx.Err() == nil {
				body = body[:0]
				for i := range o.Rows {
					body = append(body, "http.t"...)
					body = strconv.AppendInt(body, int64(i%o.Tags), 10)
					body = append(body, ',')
					body = strconv.AppendInt(body, t+int64(i/o.Tags), 10)
					body = append(body, ',')
					body = strconv.AppendFloat(body, float64(i%1000)/10, 'f', -1, 64)
					body = append(body, '\n')
				}
				t += int64(o.Rows/o.Tags) + 1
				resp, err := client.Post(url, "text/csv", bytes.NewReader(body))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("import: %s", resp.Status))
					continue
				}
				reqs.Add(1)
				pts.Add(uint64(o.Rows))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	res.Requests, res.Points, res.Errors, res.Seconds = reqs.Load(), pts.Load(), errs.Load(), el
	res.PointsPerSec = float64(res.Points) / el
	res.RequestsPerS = float64(res.Requests) / el
	if res.Requests == 0 {
		if err, ok := firstErr.Load().(error); ok {
			return res, fmt.Errorf("run http ingest: %w", err)
		}
	}
	return res, nil
}
