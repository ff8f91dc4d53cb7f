package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// BenchmarkLabelsCost measures what labels cost per tag: memory (heap
// after a GC, the store's series table with its labels) and disk (the
// series file), for 10,000 remote_write-like tags with five labels
// (__name__, cpu, instance, job, mode, about 80 bytes of text): 100
// targets (instances) of 100 series each, ten metrics by two cpus by five
// modes, against the same tags without labels. Run it with
//
//	go test -run '^$' -bench LabelsCost -benchtime 3x -count 5 ./internal/store/
func BenchmarkLabelsCost(b *testing.B) {
	const tags = 10_000
	for _, labelled := range []bool{false, true} {
		b.Run(fmt.Sprintf("labels=%v", labelled), func(b *testing.B) {
			var mem, disk float64
			for b.Loop() {
				mem, disk = labelsCost(b, tags, labelled)
			}
			b.ReportMetric(mem/tags, "B/tag-mem")
			b.ReportMetric(disk/tags, "B/tag-disk")
		})
	}
}

// labelsCost fills a new store with tags tags (labelled or not) and
// returns the heap the store holds for them and the series file's size.
func labelsCost(b *testing.B, tags int, labelled bool) (mem, disk float64) {
	dir := b.TempDir()
	opts := testOptions()
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for lo := 0; lo < tags; lo += 1000 {
		var series []model.Series
		var pts []model.Point
		for i := lo; i < lo+1000; i++ {
			inst := fmt.Sprintf("10.0.%d.%d:9100", i/100/250, i/100%250)
			metric := fmt.Sprintf("node_metric_%d_total", i%10)
			cpu, mode := fmt.Sprint(i/10%2), [...]string{"idle", "user", "system", "iowait", "irq"}[i/20%5]
			name := fmt.Sprintf("%s.%s.%s.node.%s", metric, cpu, inst, mode)
			pts = append(pts, model.Point{Tag: name, T: 1_700_000_000_000, V: 1})
			if labelled {
				// Fresh strings per series, as an input decodes them.
				series = append(series, model.Series{Tag: name, Labels: model.LabelsFrom(
					string([]byte("__name__")), metric, string([]byte("cpu")), cpu,
					string([]byte("instance")), inst, string([]byte("job")), "node", string([]byte("mode")), mode)})
			}
		}
		if labelled {
			if err := db.SetLabels(ctx, series); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Write(ctx, pts); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	st, err := os.Stat(filepath.Join(dir, seriesFiles[0]))
	if err != nil {
		b.Fatal(err)
	}
	runtime.KeepAlive(db)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), float64(st.Size())
}
