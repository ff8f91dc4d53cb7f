package opcua

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
)

// measureEnv turns on TestMeasureCPU, a measurement rather than a check
// (it takes about two minutes):
//
//	PITH_TEST_OPCUA=1 PITH_MEASURE_OPCUA=1 go test -run TestMeasureCPU -v ./internal/acq/opcua/
const measureEnv = "PITH_MEASURE_OPCUA"

// counter is a tag.Sink that only counts.
type counter struct{ n int }

func (c *counter) Enqueue(pts []model.Point) bool             { c.n += len(pts); return true }
func (c *counter) Write(context.Context, []model.Point) error { return nil }

// cpuTime is the CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs start, waits warm, then returns the CPU time used over d
// and the samples archived meanwhile.
func measure(t *testing.T, warm, d time.Duration, sink *counter, start func() func()) (time.Duration, int) {
	stop := start()
	defer stop()
	time.Sleep(warm)
	c0, n0 := cpuTime(), sink.n
	time.Sleep(d)
	return cpuTime() - c0, sink.n - n0
}

// TestMeasureCPU measures the CPU Pith spends acquiring 1,000 tags
// changing at 1 Hz over OPC UA (monitored items from a node-opcua
// server) and over Modbus TCP (1,000 registers polled every second from
// a pymodbus server), and the monitored items per second one core takes
// (1,000 items at 10 Hz). The peers run in their own processes, so only
// Pith's side is counted.
func TestMeasureCPU(t *testing.T) {
	if os.Getenv(measureEnv) == "" {
		t.Skipf("%s not set: a measurement, not a check", measureEnv)
	}
	needPeer(t)
	const n = 1000
	warm, span := 10*time.Second, 30*time.Second
	log := slog.New(slog.DiscardHandler)
	opcuaRun := func(rate float64, sink *counter) func() func() {
		return func() func() {
			srv := startNodeServer(t, n, rate)
			c := stationConfig(t, srv.endpoint(), n)
			c.PublishInterval = config.Duration(time.Second)
			for i := range c.Tags {
				c.Tags[i].SamplingInterval = 0
			}
			tab := tag.New(log, tag.DefaultOptions(), sink)
			st, err := NewStation(validated(t, c), tab, log)
			if err != nil {
				t.Fatal(err)
			}
			st.Start(context.Background())
			return func() { st.Stop(); srv.stop() }
		}
	}
	var uaSink, mbSink, fastSink counter
	uaCPU, uaN := measure(t, warm, span, &uaSink, opcuaRun(1, &uaSink))
	mbCPU, mbN := measure(t, warm, span, &mbSink, func() func() { return startModbus(t, n, &mbSink, log) })
	fastCPU, fastN := measure(t, warm, span, &fastSink, opcuaRun(10, &fastSink))
	pct := func(c time.Duration) float64 { return 100 * c.Seconds() / span.Seconds() }
	t.Logf("1,000 tags at 1 Hz over %s: OPC UA %.2f%% of a core (%d values), Modbus TCP %.2f%% of a core (%d values)",
		span, pct(uaCPU), uaN, pct(mbCPU), mbN)
	t.Logf("1,000 monitored items at 10 Hz: %.2f%% of a core, %.0f values/s, %.0f monitored item values per CPU-second",
		pct(fastCPU), float64(fastN)/span.Seconds(), float64(fastN)/fastCPU.Seconds())
}

// startModbus starts a pymodbus server with n holding registers that
// change every second and a Modbus station polling them at 1 Hz.
func startModbus(t *testing.T, n int, sink *counter, log *slog.Logger) func() {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 missing")
	}
	script := filepath.Join(t.TempDir(), "server.py")
	src := `import sys, threading, time
from pymodbus.datastore import ModbusSequentialDataBlock, ModbusServerContext, ModbusSlaveContext
from pymodbus.server import StartTcpServer
n = int(sys.argv[2])
block = ModbusSequentialDataBlock(0, [0] * n)
store = ModbusSlaveContext(hr=block, zero_mode=True)
def tick():
    k = 0
    while True:
        k += 1
        block.setValues(0, [k % 65536] * n)
        time.sleep(1)
threading.Thread(target=tick, daemon=True).start()
StartTcpServer(context=ModbusServerContext(slaves=store, single=True), address=("127.0.0.1", int(sys.argv[1])))
`
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command("/usr/bin/python3", script, strconv.Itoa(port), strconv.Itoa(n))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	c := config.DefaultModbusClient()
	c.Name, c.URL = "mb", fmt.Sprintf("tcp://127.0.0.1:%d", port)
	ts := config.DefaultModbusTagSpec()
	ts.Name, ts.Register, ts.Type, ts.Count = "mb.r{i}", "holding:0", "uint16", n
	c.Tags = []config.ModbusTagSpec{ts}
	tab := tag.New(log, tag.DefaultOptions(), sink)
	sched := acq.NewScheduler(tab, nil, log)
	links, err := sched.AddModbus([]config.ModbusClient{c}, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return func() { sched.Stop(); links.Close(); cmd.Process.Kill(); cmd.Wait() }
}
