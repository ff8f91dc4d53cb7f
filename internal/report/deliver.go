package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// sendTimeout bounds one delivery attempt.
const sendTimeout = 30 * time.Second

// meta is the JSON describing a sent report (docs/api.md, "Scheduled
// reports").
type meta struct {
	ID       string `json:"id"`
	Report   string `json:"report"`
	Site     string `json:"site"`
	Period   string `json:"period"`
	From     int64  `json:"from"`
	To       int64  `json:"to"`
	Timezone string `json:"timezone"`
	Link     string `json:"link"`
	Filename string `json:"filename"`
	CSV      string `json:"csv,omitempty"` // MQTT only: the file itself
}

func metaOf(r *Sent) meta {
	return meta{r.ID, r.Report, r.Site, r.Period, r.From, r.To, r.Timezone, r.Link, r.Filename, ""}
}

// Webhook POSTs a report as multipart/form-data: a part "report" (JSON,
// the period and the link) and a part "file" (the CSV, with its file
// name), with the header Idempotency-Key set to the report's id.
type Webhook struct {
	URL    string
	Header http.Header
	Client *http.Client // nil is a plain client
}

var _ Sender = (*Webhook)(nil)

// Name names the webhook in logs and in the state file.
func (w *Webhook) Name() string { return "webhook " + w.URL }

// Send posts r once; any answer but 2xx is an error.
func (w *Webhook) Send(ctx context.Context, r *Sent) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="report"`)
	h.Set("Content-Type", "application/json")
	p, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(p).Encode(metaOf(r)); err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, r.Filename))
	h.Set("Content-Type", "text/csv; charset=utf-8")
	if p, err = mw.CreatePart(h); err != nil {
		return err
	}
	p.Write(r.CSV)
	if err := mw.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, &body)
	if err != nil {
		return fmt.Errorf("build report request: %w", err)
	}
	for k, vs := range w.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Idempotency-Key", r.ID)
	c := w.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("post report: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post report: status %s", resp.Status)
	}
	return nil
}

// MQTT publishes a report (QoS 1, retained) to its schedule's topic as
// one JSON object: the fields of the webhook's "report" part plus "csv",
// the file. The connection is kept and re-made by autopaho.
type MQTT struct {
	broker string
	cm     *autopaho.ConnectionManager
}

var _ Sender = (*MQTT)(nil)

// MQTTOptions configure the MQTT sender.
type MQTTOptions struct {
	Broker   string // mqtt://host:port or tls://host:port
	ClientID string
	Username string
	Password string
}

// NewMQTT starts connecting to the broker; it does not wait.
func NewMQTT(ctx context.Context, o MQTTOptions, log *slog.Logger) (*MQTT, error) {
	u, err := url.Parse(o.Broker)
	if err != nil {
		return nil, fmt.Errorf("parse mqtt broker url: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     30,
		CleanStartOnInitialConnection: true,
		ReconnectBackoff:              autopaho.NewConstantBackoff(2 * time.Second),
		OnConnectError:                func(err error) { log.Warn("report mqtt connect", "broker", o.Broker, "err", err) },
		ClientConfig:                  paho.ClientConfig{ClientID: o.ClientID},
	}
	if o.Username != "" {
		cfg.ConnectUsername = o.Username
		cfg.ConnectPassword = []byte(o.Password)
	}
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start report mqtt connection: %w", err)
	}
	return &MQTT{broker: o.Broker, cm: cm}, nil
}

// Name names the sender in logs and in the state file.
func (m *MQTT) Name() string { return "mqtt " + m.broker }

// Send publishes r and waits for the broker's acknowledgement.
func (m *MQTT) Send(ctx context.Context, r *Sent) error {
	j := metaOf(r)
	j.CSV = string(r.CSV)
	body, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := m.cm.AwaitConnection(ctx); err != nil {
		return fmt.Errorf("wait for mqtt broker: %w", err)
	}
	if _, err := m.cm.Publish(ctx, &paho.Publish{Topic: r.Topic, QoS: 1, Retain: true, Payload: body}); err != nil {
		return fmt.Errorf("publish report: %w", err)
	}
	return nil
}

// Close disconnects from the broker.
func (m *MQTT) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.cm.Disconnect(ctx)
}
