package acq

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/tag"
)

// noopStation answers at once and signals after n polls.
type noopStation struct {
	n    atomic.Int64
	want int64
	done chan struct{}
	once sync.Once
}

func (s *noopStation) Name() string    { return "bench" }
func (s *noopStation) Tags() []tag.Def { return []tag.Def{{Name: "bench.v"}} }
func (s *noopStation) Poll(_ context.Context, vals []Value) error {
	vals[0] = Value{V: float64(s.n.Add(1))}
	if s.n.Load() >= s.want {
		s.once.Do(func() { close(s.done) })
	}
	return nil
}

// BenchmarkScanLateness20ms runs a station with a 20 ms period on the real
// clock while another goroutine keeps a second core busy, and reports how
// late scans start behind their tick (p50, p99, max, avg in microseconds). One
// iteration is one scan, so give it a count:
//
//	go test -run '^$' -bench ScanLateness -benchtime 500x ./internal/acq/
func BenchmarkScanLateness20ms(b *testing.B) {
	for _, bc := range []struct {
		name string
		spin time.Duration
	}{{"spin=1ms(default)", DefaultSpin}, {"spin=200us", 200 * time.Microsecond}, {"spin=off", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			stop := make(chan struct{})
			var busy sync.WaitGroup
			busy.Add(1)
			go func() { // the other core's load
				defer busy.Done()
				x := 0
				for {
					select {
					case <-stop:
						return
					default:
					}
					for i := 0; i < 1e5; i++ {
						x += i
					}
					runtime.KeepAlive(x)
				}
			}()
			tab := tag.New(nil, tag.DefaultOptions(), nil)
			s := NewScheduler(tab, nil, nil)
			st := &noopStation{want: int64(b.N), done: make(chan struct{})}
			if err := s.Add(st, StationOptions{Period: 20 * time.Millisecond, Spin: bc.spin}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := s.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			<-st.done
			s.Stop()
			b.StopTimer()
			close(stop)
			busy.Wait()
			late := s.Stats()[0].Late
			us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
			b.ReportMetric(us(late.P99), "p99-late-us")
			b.ReportMetric(us(late.Max), "max-late-us")
			b.ReportMetric(us(late.Avg), "avg-late-us")
			b.ReportMetric(us(late.P50), "p50-late-us")
		})
	}
}
