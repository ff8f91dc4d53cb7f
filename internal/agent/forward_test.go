package agent

import (
	"context"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/eclipse/paho.golang/paho"
	"github.com/jackc/pgx/v5"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/plant"
)

// TestServeForwardsToNATS runs `pith serve` with a [[forward.nats]] entry,
// changes a tag in the tag table, and reads it back from JetStream as a
// central Pith would.
func TestServeForwardsToNATS(t *testing.T) {
	url := os.Getenv("PITH_TEST_NATS")
	if url == "" {
		testpeer.Missing(t, "PITH_TEST_NATS not set (e.g. nats://127.0.0.1:4222 with JetStream): forwarding test skipped")
	}
	site := fmt.Sprintf("fwtest%d", time.Now().UnixNano())
	cfg := config.Default()
	cfg.Site.Name = site
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Events.Enabled = false
	cfg.Forward.NATS = []config.ForwardNATS{{Name: "fleet", URL: url}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plants := make(chan *plant.Plant, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, NewLogger("warn"), func(_ string, p *plant.Plant) { plants <- p })
	}()
	var p *plant.Plant
	select {
	case p = <-plants:
	case err := <-done:
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := p.Table().UpdatePoints([]model.Point{{Tag: "hx.t_out", T: now, V: 61.5}}, true, "test"); err != nil {
		t.Fatal(err)
	}
	got := make(chan model.Point, 100)
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go forward.Consume(cctx, url, []string{"pith." + site + ".samples"}, "central-"+site,
		forward.Handlers{Points: func(s string, pts []model.Point) error {
			for _, pt := range pts {
				if s == site && pt.Tag == "hx.t_out" {
					got <- pt
				}
			}
			return nil
		}}, NewLogger("warn"))
	select {
	case pt := <-got:
		if pt.T != now || pt.V != 61.5 {
			t.Errorf("forwarded %+v, want t=%d v=61.5", pt, now)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the value did not arrive through JetStream within 20 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestServeForwardsAllKinds runs an edge Pith with one forwarder of each
// other kind, PostgreSQL, MQTT and HTTP (into a second Pith), changes a
// tag and imports values, and finds them at each upstream.
func TestServeForwardsAllKinds(t *testing.T) {
	pgURL, mqttURL := os.Getenv("PITH_TEST_PG"), os.Getenv("PITH_TEST_MQTT")
	if pgURL == "" || mqttURL == "" {
		testpeer.Missing(t, "PITH_TEST_PG and PITH_TEST_MQTT not both set (e.g. postgres://postgres@127.0.0.1:5432/test, tcp://127.0.0.1:1883): forwarding test skipped")
	}
	if !strings.Contains(mqttURL, "://") {
		mqttURL = "tcp://" + mqttURL
	}
	site := testSiteName("kinds")
	table := "pith_fwtest_" + site
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	defer pg.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
	msgs := subscribeMQTT(t, mqttURL, "pith/"+site+"/#")

	hub := startInstance(t, fwdConfig(t, "hub", t.TempDir()))
	ecfg := fwdConfig(t, site, t.TempDir())
	ecfg.Forward.Postgres = []config.ForwardPostgres{{Name: "db", URL: pgURL, Table: table}}
	ecfg.Forward.MQTT = []config.ForwardMQTT{{Name: "broker", URL: mqttURL, Prefix: "pith/" + site}}
	ecfg.Forward.HTTP = []config.ForwardHTTP{{Name: "hub", URL: hub.base}}
	edge := startInstance(t, ecfg)

	now := time.Now().UnixMilli()
	for i := range 10 {
		edge.update(t, []model.Point{{Tag: "hx.t_out", T: now - 100 + int64(i), V: float64(i)}})
	}
	edge.importCSV(t, fmt.Sprintf("imp.a,%d,1\nimp.a,%d,2\nimp.a,%d,3\n", now-50, now-40, now-30))

	eventually(t, 20*time.Second, "values at the other Pith", func() bool {
		return hub.count(t, site+".hx.t_out", now-100, now) == 10 && hub.count(t, site+".imp.a", now-100, now) == 3
	})
	eventually(t, 20*time.Second, "rows in PostgreSQL", func() bool {
		var n int
		err := pg.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE tag = $1 OR tag = $2", site+".hx.t_out", site+".imp.a").Scan(&n)
		return err == nil && n == 13
	})
	topics := map[string]int{}
	eventually(t, 20*time.Second, "messages from the MQTT broker", func() bool {
		for {
			select {
			case m := <-msgs:
				topics[m]++
			default:
				return topics["pith/"+site+"/hx/t_out"] >= 10 && topics["pith/"+site+"/imp/a"] >= 3
			}
		}
	})
	for _, name := range []string{"db", "broker", "hub"} {
		eventually(t, 10*time.Second, name+" backlog system tag", func() bool {
			v, ok := edge.latest(t, "pith.sys.forward."+name+".backlog")
			return ok && v == 0
		})
	}
}

// subscribeMQTT subscribes to filter at QoS 1 and returns the topics of
// the messages received.
func subscribeMQTT(t *testing.T, brokerURL, filter string) <-chan string {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan string, 1000)
	c := paho.NewClient(paho.ClientConfig{
		Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			select {
			case msgs <- pr.Packet.Topic:
			default:
			}
			return true, nil
		}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pith-test-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}) })
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	return msgs
}
