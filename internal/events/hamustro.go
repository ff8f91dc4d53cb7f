package events

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Hamustro compatibility (POST /api/v1/track): Hamustro's clients post a
// Collection (protobuf, Content-Type application/protobuf, or its JSON
// form, application/json), optionally signed:
//
//	X-Hamustro-Time: <Unix seconds>
//	X-Hamustro-Signature: base64(sha256(time + "|" + md5hex(body) + "|" + secret))
//
// The schema is Hamustro's proto/payload.proto (proto2):
//
//	message Collection { required string device_id = 1; required string client_id = 2;
//	  required string session = 3; required string system_version = 4;
//	  required string product_version = 5; required Environment env = 6;
//	  optional string device_make = 7; device_model = 8; system = 9; system_language = 10;
//	  browser = 11; browser_version = 12; product_git_hash = 13; product_language = 14;
//	  repeated Payload payloads = 15; }
//	message Payload { required uint64 at = 1; required string event = 2; required uint32 nr = 3;
//	  optional string timezone = 4; tenant_id = 5; user_id = 6; ip = 7; country = 8;
//	  repeated Parameter parameters = 9; }
//	message Parameter { required string name = 1; required string value = 2; }
//
// See docs/format/events.md for how a payload becomes an Event.
const (
	HamustroTimeHeader      = "X-Hamustro-Time"
	HamustroSignatureHeader = "X-Hamustro-Signature"
)

// hamEnvs are the names of Hamustro's Environment enum, by number.
var hamEnvs = [...]string{"PRODUCTION", "GENERAL_AVAILABILITY", "RELEASE_TO_MARKETING", "RELEASE_CANDIDATE",
	"BETA", "ALPHA", "WEEKLY", "NIGHTLY", "STAGING", "QUALITY_ASSURANCE", "TESTING", "DEVELOPMENT"}

// Field numbers of Collection's string fields 1..14 (6, env, is an enum)
// and the Str attribute each one becomes (device_id, client_id and
// session become the Source instead).
var hamCollectionStr = [15]string{
	4: "system_version", 5: "product_version", 7: "device_make", 8: "device_model", 9: "system",
	10: "system_language", 11: "browser", 12: "browser_version", 13: "product_git_hash", 14: "product_language",
}

// Payload's string fields 4..8.
var hamPayloadStr = [9]string{4: "timezone", 5: "tenant_id", 6: "user_id", 7: "ip", 8: "country"}

// hamEnvName is the name of an Environment value, or its number when it
// has none.
func hamEnvName(e int32) string {
	if e >= 0 && int(e) < len(hamEnvs) {
		return hamEnvs[e]
	}
	return strconv.FormatInt(int64(e), 10)
}

// hamCollection is a decoded Collection: str[n] is string field n, has
// says which fields were present (bit n).
type hamCollection struct {
	str      [15]string
	env      int32
	has      uint32
	payloads []hamPayload
}

type hamPayload struct {
	at     uint64
	nr     uint32
	event  string
	str    [9]string
	has    uint32
	params []hamParam
}

type hamParam struct {
	name, value string
	has         uint32
}

// decodeHamustroProto parses a Collection in the protobuf wire format as
// proto.Unmarshal does (last value of a singular field wins, fields of an
// unknown number or an unexpected wire type are skipped), without
// checking required fields or UTF-8: hamustroEvents does that.
func decodeHamustroProto(b []byte) (*hamCollection, error) {
	c := &hamCollection{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num >= 1 && num <= 14 && num != 6 && typ == protowire.BytesType:
			c.str[num] = string(v)
		case num == 6 && typ == protowire.VarintType:
			// Any value is kept, as Hamustro's generated code did; the
			// varint is truncated to int32 as proto.Unmarshal does.
			c.env = int32(x)
		case num == 15 && typ == protowire.BytesType:
			p, err := decodeHamPayload(v)
			if err != nil {
				return err
			}
			c.payloads = append(c.payloads, p)
		default:
			return nil
		}
		c.has |= 1 << num
		return nil
	})
	return c, err
}

func decodeHamPayload(b []byte) (hamPayload, error) {
	var p hamPayload
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			p.at = x
		case num == 2 && typ == protowire.BytesType:
			p.event = string(v)
		case num == 3 && typ == protowire.VarintType:
			p.nr = uint32(x)
		case num >= 4 && num <= 8 && typ == protowire.BytesType:
			p.str[num] = string(v)
		case num == 9 && typ == protowire.BytesType:
			var q hamParam
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if (num == 1 || num == 2) && typ == protowire.BytesType {
					if num == 1 {
						q.name = string(v)
					} else {
						q.value = string(v)
					}
					q.has |= 1 << num
				}
				return nil
			})
			if err != nil {
				return err
			}
			p.params = append(p.params, q)
		default:
			return nil
		}
		p.has |= 1 << num
		return nil
	})
	return p, err
}

// eachField calls fn for every field of the message b: v is the content
// of a bytes field, x the value of a varint field. Fields of other wire
// types are checked and skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return errors.New("field number out of range")
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n >= 0 {
				b = b[n:]
				continue
			}
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// hamustroSession is the session Hamustro requires:
// md5hex(device_id ":" client_id ":" system_version ":" product_version).
func hamustroSession(device, client, systemVersion, productVersion string) string {
	h := md5.New()
	for i, s := range [...]string{device, client, systemVersion, productVersion} {
		if i > 0 {
			h.Write([]byte{':'})
		}
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// events checks the collection (required fields, the session, UTF-8)
// and appends one Event per payload to dst; see docs/format/events.md.
func (c *hamCollection) events(dst []Event, maxEvents int) ([]Event, error) {
	for _, n := range [...]int{1, 2, 3, 4, 5} {
		if c.has&(1<<n) == 0 {
			return dst, &ValidationError{Field: hamCollectionNames[n], Msg: "is required"}
		}
	}
	for n, s := range c.str {
		if !utf8.ValidString(s) {
			return dst, &ValidationError{Field: hamCollectionNames[n], Msg: "is not UTF-8"}
		}
	}
	if c.str[3] != hamustroSession(c.str[1], c.str[2], c.str[4], c.str[5]) {
		return dst, &ValidationError{Field: "session", Msg: "is not md5(device_id:client_id:system_version:product_version)"}
	}
	if len(c.payloads) > maxEvents {
		return dst, &ValidationError{Index: maxEvents, Msg: fmt.Sprintf("more than %d events in one request", maxEvents)}
	}
	for i := range c.payloads {
		ev, err := c.event(&c.payloads[i])
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				ve.Index = i
			}
			return dst, err
		}
		dst = append(dst, ev)
	}
	return dst, nil
}

// event turns payload p of the collection into an Event.
func (c *hamCollection) event(p *hamPayload) (Event, error) {
	for _, f := range [...]struct {
		n    int
		name string
	}{{1, "at"}, {2, "event"}, {3, "nr"}} {
		if p.has&(1<<f.n) == 0 {
			return Event{}, &ValidationError{Field: f.name, Msg: "is required"}
		}
	}
	if p.at == 0 || p.at > math.MaxInt64/1000 {
		return Event{}, &ValidationError{Field: "at", Msg: "must be positive Unix seconds"}
	}
	ev := Event{
		Time:   int64(p.at) * 1000,
		Name:   p.event,
		Source: Source{Device: c.str[1], Client: c.str[2], Session: c.str[3]},
		Num:    map[string]float64{"nr": float64(p.nr)},
		Str:    map[string]string{"env": hamEnvName(c.env)},
	}
	for n, k := range hamCollectionStr {
		if k != "" && c.str[n] != "" {
			ev.Str[k] = c.str[n]
		}
	}
	for n, k := range hamPayloadStr {
		if k == "" || p.str[n] == "" {
			continue
		}
		if !utf8.ValidString(p.str[n]) {
			return ev, &ValidationError{Field: k, Msg: "is not UTF-8"}
		}
		ev.Str[k] = p.str[n]
	}
	if len(p.params) > 0 {
		params := make(map[string]string, len(p.params))
		for _, q := range p.params {
			if q.has != 1<<1|1<<2 {
				return ev, &ValidationError{Field: "parameters", Msg: "name and value are required"}
			}
			if !utf8.ValidString(q.name) || !utf8.ValidString(q.value) {
				return ev, &ValidationError{Field: "parameters", Msg: "is not UTF-8"}
			}
			params[q.name] = q.value
		}
		b, _ := json.Marshal(params) // sorted keys, as Hamustro wrote them
		ev.Str["parameters"] = string(b)
	}
	// A retry of the same payload gets the same id, so it is dropped as a
	// duplicate within the dedup window.
	h := sha256.New()
	for _, s := range [...]string{c.str[1], c.str[2], c.str[3], strconv.FormatUint(uint64(p.nr), 10), strconv.FormatUint(p.at, 10), p.event} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	ev.ID = hex.EncodeToString(h.Sum(nil)[:16])
	w := wireEvent{ID: ev.ID, Time: &ev.Time, Name: ev.Name, Source: ev.Source, Num: ev.Num, Str: ev.Str}
	return w.event(0)
}

// HamustroSign returns the X-Hamustro-Signature value for body sent with
// X-Hamustro-Time ts.
func HamustroSign(secret []byte, ts string, body []byte) string {
	sum := md5.Sum(body)
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write([]byte{'|'})
	h.Write([]byte(hex.EncodeToString(sum[:])))
	h.Write([]byte{'|'})
	h.Write(secret)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// verifyHamustro checks a Hamustro signature; ts must be Unix seconds
// within SignatureWindow of now (Hamustro itself does not check the
// time; Pith does, so that a captured request cannot be replayed later).
func verifyHamustro(secret []byte, ts, sig string, body []byte, now time.Time) (string, error) {
	if ts == "" || sig == "" {
		return "", fmt.Errorf("%s and %s are required: %w", HamustroTimeHeader, HamustroSignatureHeader, ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("parse %s %q: %w", HamustroTimeHeader, ts, ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > SignatureWindow || d < -SignatureWindow {
		return "", fmt.Errorf("check signature time: %v away from server time: %w", d.Round(time.Second), ErrBadSignature)
	}
	if subtle.ConstantTimeCompare([]byte(sig), []byte(HamustroSign(secret, ts, body))) != 1 {
		return "", fmt.Errorf("check signature: %w", ErrBadSignature)
	}
	return sig, nil
}

// hamCollectionNames are the names of Collection's fields, by number.
var hamCollectionNames = [16]string{"", "device_id", "client_id", "session", "system_version", "product_version", "env",
	"device_make", "device_model", "system", "system_language", "browser", "browser_version", "product_git_hash",
	"product_language", "payloads"}
