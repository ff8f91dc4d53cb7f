package agent

import (
	"log/slog"
	"net/url"
	"strings"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
)

// openSink makes a forwarder's sink; it returns the sink, the function
// closing it and a description of the upstream for the logs.
type openSink func(log *slog.Logger) (forward.Sink, func(), string, error)

func natsSink(c config.ForwardNATS, site string) openSink {
	return func(log *slog.Logger) (forward.Sink, func(), string, error) {
		o := forward.DefaultNATSOptions()
		o.URL, o.Site = c.URL, site
		s, err := forward.NewNATSSink(o, log)
		if err != nil {
			return nil, nil, "", err
		}
		return s, s.Close, c.URL + " " + s.Subject(), nil
	}
}

// redundancySink publishes this box's values to the pair's stream, the
// site's subject, with the box named in each message.
func redundancySink(r config.Redundancy, site string) openSink {
	return func(log *slog.Logger) (forward.Sink, func(), string, error) {
		o := forward.DefaultNATSOptions()
		o.URL, o.Site, o.Node = r.NATS, site, r.Node
		o.Replicas = min(3, len(strings.Split(r.NATS, ",")))
		s, err := forward.NewNATSSink(o, log)
		if err != nil {
			return nil, nil, "", err
		}
		return s, s.Close, r.NATS + " " + s.Subject(), nil
	}
}

func postgresSink(c config.ForwardPostgres, site string) openSink {
	return func(log *slog.Logger) (forward.Sink, func(), string, error) {
		s, err := forward.NewPostgresSink(forward.PostgresOptions{URL: c.URL, Table: c.Table, Site: site, Partition: c.Partition}, log)
		if err != nil {
			return nil, nil, "", err
		}
		return s, s.Close, redactURL(c.URL) + " table " + c.Table, nil
	}
}

// mqttClientID is a [[forward.mqtt]] entry's client id: the one given, or
// "pith-<site>-<name>", fixed so that the broker keeps the session across
// restarts, with "-<node>" on a box of a redundant pair (both boxes
// forward, and share the site: one id would let one connect at a time).
func mqttClientID(c config.ForwardMQTT, site, node string) string {
	switch {
	case c.ClientID != "":
		return c.ClientID
	case node != "":
		return "pith-" + site + "-" + c.Name + "-" + node
	}
	return "pith-" + site + "-" + c.Name
}

func mqttSink(c config.ForwardMQTT, site, node string) openSink {
	return func(log *slog.Logger) (forward.Sink, func(), string, error) {
		id := mqttClientID(c, site, node)
		s, err := forward.NewMQTTSink(forward.MQTTOptions{URL: c.URL, Prefix: c.Prefix, ClientID: id, Username: c.Username, Password: c.Password}, log)
		if err != nil {
			return nil, nil, "", err
		}
		return s, s.Close, c.URL + " " + c.Prefix, nil
	}
}

func httpSink(c config.ForwardHTTP, site string) openSink {
	return func(log *slog.Logger) (forward.Sink, func(), string, error) {
		s, err := forward.NewHTTPSink(forward.HTTPOptions{URL: c.URL, Key: c.Key, Site: site}, log)
		if err != nil {
			return nil, nil, "", err
		}
		return s, s.Close, c.URL, nil
	}
}

// redactURL hides the password of a URL for the logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "(dsn)"
	}
	return u.Redacted()
}
