package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// Limits of the public display configuration.
const (
	maxDisplayTiles     = 64
	maxDisplayDecimals  = 10
	minDisplayRefresh   = time.Second
	defaultRefresh      = 5 * time.Second
	displayDataCacheTTL = time.Second // many kiosks cost one set of reads per second
)

// DisplayConfig is the public display page, a read-only kiosk view (the
// config file's [display] section). Only the tags named here are exposed
// at /display/data, so the page can be served without an API key while
// the rest of the API keeps its keys.
type DisplayConfig struct {
	Title   string        // big heading of the page
	Refresh time.Duration // how often the page reloads its values; >= 1s, 0 means 5s
	Tiles   []DisplayTile // at least one, at most 64
}

// DisplayTile is one big number with an optional sparkline.
type DisplayTile struct {
	Tag      string        // tag whose current value is shown
	Label    string        // caption; the tag name when empty
	Unit     string        // unit shown after the number
	Decimals int           // digits after the decimal point, 0 to 10
	Spark    time.Duration // sparkline window ending now; 0 draws none
}

// displayJSON is the page's view of the configuration.
type displayJSON struct {
	Title     string     `json:"title"`
	RefreshMS int64      `json:"refresh_ms"`
	Tiles     []tileJSON `json:"tiles"`
}

type tileJSON struct {
	Tag      string `json:"tag"`
	Label    string `json:"label"`
	Unit     string `json:"unit"`
	Decimals int    `json:"decimals"`
	SparkMS  int64  `json:"spark_ms"`
}

// Check validates the configuration; errors name the offending field.
func (c *DisplayConfig) Check() error {
	if len(c.Tiles) == 0 {
		return errors.New("check display: no tile configured")
	}
	if len(c.Tiles) > maxDisplayTiles {
		return fmt.Errorf("check display: %d tiles, at most %d", len(c.Tiles), maxDisplayTiles)
	}
	if c.Refresh != 0 && c.Refresh < minDisplayRefresh {
		return fmt.Errorf("check display: refresh %v is shorter than %v", c.Refresh, minDisplayRefresh)
	}
	for i, t := range c.Tiles {
		if t.Tag == "" {
			return fmt.Errorf("check display: tile[%d].tag is empty", i)
		}
		if t.Decimals < 0 || t.Decimals > maxDisplayDecimals {
			return fmt.Errorf("check display: tile[%d].decimals %d is not in 0..%d", i, t.Decimals, maxDisplayDecimals)
		}
		if t.Spark < 0 {
			return fmt.Errorf("check display: tile[%d].spark %v is negative", i, t.Spark)
		}
	}
	return nil
}

func (c *DisplayConfig) encode() ([]byte, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	d := displayJSON{Title: c.Title, RefreshMS: c.Refresh.Milliseconds()}
	if c.Refresh == 0 {
		d.RefreshMS = defaultRefresh.Milliseconds()
	}
	for _, t := range c.Tiles {
		label := t.Label
		if label == "" {
			label = t.Tag
		}
		d.Tiles = append(d.Tiles, tileJSON{Tag: t.Tag, Label: label, Unit: t.Unit, Decimals: t.Decimals, SparkMS: t.Spark.Milliseconds()})
	}
	return json.Marshal(d)
}

// displayCache holds the last /display/data answer for a second.
type displayCache struct {
	mu   sync.Mutex
	at   time.Time
	body []byte
}

// serveDisplayData answers GET /display/config.json with the page's
// configuration and GET /display/data with the configured tiles' current
// values and sparklines:
// {"now":MS,"tiles":[{"tag":T,"ts":MS,"value":V|null,"quality":Q,"spark":[[MS,V|null],...]}]}.
func (s *Server) serveDisplayData(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	if s.display == nil {
		http.Error(w, "no public display is configured", http.StatusNotFound)
		return
	}
	body := s.display
	if r.URL.Path == "/display/data" {
		var err error
		if body, err = s.displayData(time.Now()); err != nil {
			s.log.Error("display data", "err", err)
			http.Error(w, "read display data: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method != http.MethodHead {
		w.Write(body) //nolint:errcheck // the client went away
	}
}

// sparkPoints is the number of sparkline buckets per tile.
const sparkPoints = defaultDisplayPoints

// displayData builds (or reuses for a second) the tiles' data. A tag with
// no data yet shows null rather than failing the page.
func (s *Server) displayData(now time.Time) ([]byte, error) {
	c := &s.dcache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body != nil && now.Sub(c.at) >= 0 && now.Sub(c.at) < displayDataCacheTTL {
		return c.body, nil
	}
	ms := now.UnixMilli()
	// A fresh slice each time: callers still write the previous one.
	b := make([]byte, 0, len(c.body)+64)
	b = append(b, `{"now":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, `,"tiles":[`...)
	for i, t := range s.opts.Display.Tiles {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"tag":`...)
		b = jsonenc.AppendString(b, t.Tag)
		lat, err := s.opts.Source.Latest(t.Tag)
		switch {
		case err == nil && len(lat) == 1:
			b = append(b, `,"ts":`...)
			b = strconv.AppendInt(b, lat[0].T, 10)
			b = append(b, `,"value":`...)
			b = jsonenc.AppendFloat(b, lat[0].V)
			b = append(b, `,"quality":"`...)
			b = append(b, lat[0].Q.String()...)
			b = append(b, '"')
		case err == nil || errors.Is(err, store.ErrUnknownTag):
			b = append(b, `,"ts":null,"value":null,"quality":null`...)
		default:
			return nil, fmt.Errorf("read latest of %q: %w", t.Tag, err)
		}
		b = append(b, `,"spark":[`...)
		if span := t.Spark.Milliseconds(); span > 0 {
			bks, err := s.opts.History.Aggregate(t.Tag, ms-span, ms, sparkPoints, model.AggMean)
			if err != nil && !errors.Is(err, store.ErrUnknownTag) {
				return nil, fmt.Errorf("read sparkline of %q: %w", t.Tag, err)
			}
			for j, bk := range bks {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				b = strconv.AppendInt(b, bk.T, 10)
				b = append(b, ',')
				if bk.OK {
					b = jsonenc.AppendFloat(b, bk.V)
				} else {
					b = append(b, "null"...)
				}
				b = append(b, ']')
			}
		}
		b = append(b, "]}"...)
	}
	b = append(b, "]}"...)
	c.body, c.at = b, now
	return b, nil
}
