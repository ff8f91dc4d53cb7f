package opcua

import (
	"context"
	"sync"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

// TextTable is the road of text values into the tag table (tag.Table
// implements it): String variables become text tags, which the table
// stores by WriteText rather than by Update. A station with String tags
// needs a table that has it.
type TextTable interface {
	// WriteText stores pts and applies them to the table; it returns once
	// they are durable, or stores none and says why.
	WriteText(ctx context.Context, pts []model.TextPoint, source string) error
}

// textSample is one new state of a text tag, found while converting a
// data value.
type textSample struct {
	tag  int // index into Station.tags
	t    int64
	text string
	q    model.Quality
	hold bool // keep the last text, set q (bad) only
}

// textLast is the last value of a text tag the station stored.
type textLast struct {
	t    int64
	text string
	q    model.Quality
}

// texts holds the station's text state. Its lock is held across the
// write, so that the session and the read loop store a tag's values in
// the order they took them.
type texts struct {
	mu   sync.Mutex
	last map[int]textLast
	buf  []model.TextPoint
}

// isText reports whether tag i is a text tag.
func (s *Station) isText(i int) bool { return s.tags[i].Type == config.OPCUAString }

// writeTexts stores the text samples that change their tag (text or
// quality), or all of them for a tag with archive = "all", and returns
// how many it stored. A hold of a tag that never had a text stores
// nothing.
func (s *Station) writeTexts(ctx context.Context, smp []textSample) int {
	if len(smp) == 0 {
		return 0
	}
	s.text.mu.Lock()
	defer s.text.mu.Unlock()
	if s.text.last == nil {
		s.text.last = make(map[int]textLast)
	}
	pts := s.text.buf[:0]
	// last is updated as the batch is built (a message may hold several
	// values of a tag), and restored if the write fails.
	undo := map[int]*textLast{}
	for _, x := range smp {
		last, had := s.text.last[x.tag]
		if had && x.t < last.t {
			// Older than what the station stored (a read that was under
			// way when the connection was lost, applied after the tag
			// was marked bad): the table keeps its current value, so
			// the station must not remember this one as stored.
			continue
		}
		if x.hold {
			if !had {
				continue
			}
			x.text = last.text
		}
		if had && last.text == x.text && last.q == x.q && s.tags[x.tag].Archive != config.ArchiveAll {
			continue
		}
		pts = append(pts, model.TextPoint{Tag: s.tags[x.tag].Name, T: x.t, Text: x.text, Q: x.q})
		if _, ok := undo[x.tag]; !ok {
			undo[x.tag] = nil
			if had {
				undo[x.tag] = &last
			}
		}
		s.text.last[x.tag] = textLast{t: x.t, text: x.text, q: x.q}
	}
	s.text.buf = pts[:0]
	if len(pts) == 0 {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
	defer cancel()
	if err := s.tt.WriteText(cctx, pts, "opcua:"+s.cfg.Name); err != nil {
		s.cnt.errors.Add(1)
		s.setLastErr(err)
		s.log.Warn("opcua text values not stored", "values", len(pts), "first", pts[0].Tag, "err", err)
		for ti, l := range undo {
			if l == nil {
				delete(s.text.last, ti)
			} else {
				s.text.last[ti] = *l
			}
		}
		return 0
	}
	return len(pts)
}
