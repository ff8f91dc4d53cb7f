package alarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// Retry timing of the notifiers: the wait doubles from retryFirst up to
// retryMax between attempts.
const (
	retryFirst       = 500 * time.Millisecond
	retryMax         = 30 * time.Second
	defaultAttempts  = 5
	defaultHookLimit = 10 * time.Second
)

// retry calls try up to attempts times with a doubling wait between
// attempts, stopping early on a permanent error or when ctx ends.
func retry(ctx context.Context, attempts int, first time.Duration, try func(context.Context) error) error {
	wait := first
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
			case <-time.After(wait):
			}
			wait = min(2*wait, retryMax)
		}
		if err = try(ctx); err == nil {
			return nil
		}
		var p permanentErr
		if errors.As(err, &p) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", attempts, err)
}

// permanentErr marks an error that retrying cannot fix.
type permanentErr struct{ error }

func (p permanentErr) Unwrap() error { return p.error }

// Webhook POSTs every event as a JSON object to a URL, retrying network
// errors, 429 and 5xx answers with backoff. Each request carries the
// header Idempotency-Key (IdempotencyKey): the same on every attempt and
// on both boxes of a redundant pair, whose new active box may send again
// what the old one sent just before it stopped.
type Webhook struct {
	URL      string
	Header   http.Header
	Timeout  time.Duration // one attempt; 0 is 10 s
	Attempts int           // 0 is 5
	Client   *http.Client  // nil is a plain client
	// RetryWait is the first wait between attempts; 0 is 500 ms.
	RetryWait time.Duration
}

var _ Notifier = (*Webhook)(nil)

// Name names the webhook in logs.
func (w *Webhook) Name() string {
	u, err := url.Parse(w.URL)
	if err != nil {
		return "webhook"
	}
	return "webhook " + u.Host
}

// Notify posts ev.
func (w *Webhook) Notify(ctx context.Context, ev Event) error {
	body, err := json.Marshal(&ev)
	if err != nil {
		return fmt.Errorf("encode alarm event: %w", err)
	}
	client := w.Client
	if client == nil {
		client = http.DefaultClient
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = defaultHookLimit
	}
	attempts := w.Attempts
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	first := w.RetryWait
	if first <= 0 {
		first = retryFirst
	}
	return retry(ctx, attempts, first, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
		if err != nil {
			return permanentErr{fmt.Errorf("build webhook request: %w", err)}
		}
		for k, vs := range w.Header {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", IdempotencyKey(ev))
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("post alarm event: %w", err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode < 300:
			return nil
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return fmt.Errorf("post alarm event: status %s", resp.Status)
		}
		return permanentErr{fmt.Errorf("post alarm event: status %s", resp.Status)}
	})
}

// IdempotencyKey names one transition: "<alarm>/<event>/<time ms>".
func IdempotencyKey(ev Event) string {
	return ev.Alarm + "/" + ev.Event + "/" + strconv.FormatInt(ev.T, 10)
}

// ParseHeaders turns "Name: value" lines into a header.
func ParseHeaders(lines []string) (http.Header, error) {
	h := http.Header{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("parse header %q: want \"Name: value\"", l)
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h, nil
}

// MQTTOptions configure the MQTT notifier.
type MQTTOptions struct {
	Broker   string // mqtt://host:port or tls://host:port
	Topic    string // prefix; events go to <Topic>/<alarm name>
	ClientID string
	Username string
	Password string
	Attempts int // per event; 0 is 5
}

// MQTT publishes every event, QoS 1 and retained, to <topic>/<alarm>.
// The connection is kept (and re-made) by autopaho.
type MQTT struct {
	opts MQTTOptions
	cm   *autopaho.ConnectionManager
	log  *slog.Logger
}

var _ Notifier = (*MQTT)(nil)

// NewMQTT starts connecting to the broker; it does not wait for the
// connection. Close it with Close.
func NewMQTT(ctx context.Context, opts MQTTOptions, log *slog.Logger) (*MQTT, error) {
	u, err := url.Parse(opts.Broker)
	if err != nil {
		return nil, fmt.Errorf("parse mqtt broker url: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &MQTT{opts: opts, log: log}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     30,
		CleanStartOnInitialConnection: true,
		ReconnectBackoff:              autopaho.NewConstantBackoff(2 * time.Second),
		OnConnectError: func(err error) {
			log.Warn("alarm mqtt connect", "broker", opts.Broker, "err", err)
		},
		ClientConfig: paho.ClientConfig{ClientID: opts.ClientID},
	}
	if opts.Username != "" {
		cfg.ConnectUsername = opts.Username
		cfg.ConnectPassword = []byte(opts.Password)
	}
	m.cm, err = autopaho.NewConnection(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start alarm mqtt connection: %w", err)
	}
	return m, nil
}

// Name names the notifier in logs.
func (m *MQTT) Name() string { return "mqtt " + m.opts.Broker }

// Topic returns the topic of an alarm's events.
func (m *MQTT) Topic(alarm string) string { return strings.TrimSuffix(m.opts.Topic, "/") + "/" + alarm }

// Notify publishes ev and waits for the broker's acknowledgement.
func (m *MQTT) Notify(ctx context.Context, ev Event) error {
	body, err := json.Marshal(&ev)
	if err != nil {
		return fmt.Errorf("encode alarm event: %w", err)
	}
	attempts := m.opts.Attempts
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	return retry(ctx, attempts, retryFirst, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, defaultHookLimit)
		defer cancel()
		if err := m.cm.AwaitConnection(ctx); err != nil {
			return fmt.Errorf("wait for mqtt broker: %w", err)
		}
		_, err := m.cm.Publish(ctx, &paho.Publish{Topic: m.Topic(ev.Alarm), QoS: 1, Retain: true, Payload: body})
		if err != nil {
			return fmt.Errorf("publish alarm event: %w", err)
		}
		return nil
	})
}

// Close disconnects from the broker.
func (m *MQTT) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.cm.Disconnect(ctx)
}
