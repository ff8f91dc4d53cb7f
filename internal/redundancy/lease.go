package redundancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The lease's bucket is a plain JetStream stream (the layout of a
// key-value bucket, spoken with a few JetStream API requests rather than
// nats.go's key-value client, which would add about 100 kB to the
// binary): one subject per key, one message kept per subject, messages
// aged out after the lease TTL.

// Errors of bucket operations.
var (
	errNotFound = errors.New("no such key")
	errWrongRev = errors.New("key changed since the revision given")
)

// JetStream API error codes the lease tells apart.
const (
	jsErrWrongLastSeq = 10071 // JSStreamWrongLastSequenceErr
	jsErrNoMessage    = 10037 // JSNoMessageFoundErr
	jsErrNoStream     = 10059 // JSStreamNotFoundErr
	jsErrNoConsumer   = 10014 // JSConsumerNotFoundErr
)

// bucket is the pair's stream.
type bucket struct {
	nc     *nats.Conn
	stream string // PITH_REDUNDANCY_<group>
	prefix string // pith.redundancy.<group>.
}

func newBucket(nc *nats.Conn, group string) *bucket {
	return &bucket{nc: nc, stream: Bucket(group), prefix: "pith.redundancy." + group + "."}
}

// apiError is the error member of a JetStream API answer.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream: %s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
}

// request sends a JetStream API request and decodes the answer into out;
// an error answer is returned as *apiError.
func (b *bucket) request(ctx context.Context, msg *nats.Msg, out any) error {
	resp, err := b.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return err
	}
	var e struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &e); err != nil {
		return fmt.Errorf("decode jetstream answer: %w", err)
	}
	if e.Error != nil {
		return e.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(resp.Data, out)
}

func errCode(err error) int {
	var e *apiError
	if errors.As(err, &e) {
		return e.ErrCode
	}
	return 0
}

// put writes key = val. With rev >= 0 the write succeeds only when the
// key's last revision is rev (0: the key does not exist), else it fails
// with errWrongRev. It returns the new revision.
func (b *bucket) put(ctx context.Context, key string, val []byte, rev int64) (uint64, error) {
	msg := &nats.Msg{Subject: b.prefix + key, Data: val, Header: nats.Header{}}
	if rev >= 0 {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatInt(rev, 10))
	}
	var ack struct {
		Seq uint64 `json:"seq"`
	}
	err := b.request(ctx, msg, &ack)
	if errCode(err) == jsErrWrongLastSeq {
		return 0, fmt.Errorf("%w: %w", errWrongRev, err)
	}
	return ack.Seq, err
}

// get returns the value and revision of key, errNotFound when it is
// absent or aged out.
func (b *bucket) get(ctx context.Context, key string) ([]byte, uint64, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": b.prefix + key})
	var r struct {
		Message struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	err := b.request(ctx, &nats.Msg{Subject: "$JS.API.STREAM.MSG.GET." + b.stream, Data: req}, &r)
	if errCode(err) == jsErrNoMessage {
		return nil, 0, errNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	return r.Message.Data, r.Message.Seq, nil
}

// del removes revision rev (a released lease).
func (b *bucket) del(ctx context.Context, rev uint64) error {
	req := fmt.Appendf(nil, `{"seq":%d,"no_erase":true}`, rev)
	return b.request(ctx, &nats.Msg{Subject: "$JS.API.STREAM.MSG.DELETE." + b.stream, Data: req}, nil)
}

// ensure creates the stream when missing; an existing one must have the
// same TTL.
func (b *bucket) ensure(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) error {
	s, err := js.Stream(ctx, b.stream)
	if err == nil {
		if got := s.CachedInfo().Config.MaxAge; got != ttl {
			return fmt.Errorf("stream %s has TTL %s, this box wants %s: give both boxes the same lease_ttl (or delete the stream)", b.stream, got, ttl)
		}
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              b.stream,
		Subjects:          []string{b.prefix + ">"},
		MaxMsgsPerSubject: 1,
		MaxAge:            ttl,
		Storage:           jetstream.MemoryStorage,
		Replicas:          replicas,
		Discard:           jetstream.DiscardOld,
	})
	return err
}

// ConsumerPending returns the messages a durable consumer of stream has
// not had acknowledged yet (pending plus awaiting ack); found is false
// when the stream or the consumer does not exist.
func ConsumerPending(ctx context.Context, nc *nats.Conn, stream, durable string) (n int64, found bool, err error) {
	var r struct {
		NumPending    int64 `json:"num_pending"`
		NumAckPending int64 `json:"num_ack_pending"`
	}
	b := &bucket{nc: nc}
	err = b.request(ctx, &nats.Msg{Subject: "$JS.API.CONSUMER.INFO." + stream + "." + durable}, &r)
	if c := errCode(err); c == jsErrNoStream || c == jsErrNoConsumer {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return r.NumPending + r.NumAckPending, true, nil
}

// StreamOf returns the name of the stream holding subject, "" when none.
func StreamOf(ctx context.Context, nc *nats.Conn, subject string) (string, error) {
	req, _ := json.Marshal(map[string]string{"subject": subject})
	var r struct {
		Streams []string `json:"streams"`
	}
	b := &bucket{nc: nc}
	if err := b.request(ctx, &nats.Msg{Subject: "$JS.API.STREAM.NAMES", Data: req}, &r); err != nil {
		return "", err
	}
	if len(r.Streams) == 0 {
		return "", nil
	}
	return r.Streams[0], nil
}

// nodeName returns the node of an alive key's subject, "" for others.
func (b *bucket) nodeName(subject string) string {
	name, _ := strings.CutPrefix(subject, b.prefix+nodeKey)
	if name == subject {
		return ""
	}
	return name
}
