package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/store"
)

// fakeController records writes and fails with err when set.
type fakeController struct {
	err    error
	tag    string
	value  float64
	who    string
	called int
}

func (c *fakeController) Control(ctx context.Context, tag string, value float64, who string) error {
	c.called++
	c.tag, c.value, c.who = tag, value, who
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline on the control context")
	}
	return c.err
}

var _ Controller = (*fakeController)(nil)

func TestControlNoPath(t *testing.T) {
	h := NewServer(newFakeStore(), DefaultOptions(), nil).Handler()
	r := do(t, h, http.MethodPost, "/api/v1/control", strings.NewReader(`{"tag":"a","value":1}`), nil)
	wantJSON(t, r, http.StatusNotFound, `{"error":"no control path"}`)
}

func TestControl(t *testing.T) {
	c := &fakeController{}
	opts := DefaultOptions()
	opts.Controller = c
	h := NewServer(newFakeStore(), opts, nil).Handler()
	r := do(t, h, http.MethodPost, "/api/v1/control", strings.NewReader(`{"tag":"pump.speed","value":42.5}`), nil)
	wantJSON(t, r, http.StatusOK, `{"tag":"pump.speed","value":42.5}`)
	if c.tag != "pump.speed" || c.value != 42.5 || c.who == "" {
		t.Errorf("controller got %q %v %q", c.tag, c.value, c.who)
	}
}

type statusErr struct{}

func (statusErr) Error() string   { return "device busy" }
func (statusErr) HTTPStatus() int { return http.StatusConflict }

func TestControlErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		err     error
		status  int
		wantErr string
	}{
		{"bad json", `{"tag":`, nil, 400, "decode control request"},
		{"unknown field", `{"tag":"a","value":1,"x":2}`, nil, 400, "unknown field"},
		{"missing tag", `{"value":1}`, nil, 400, "missing field tag"},
		{"missing value", `{"tag":"a"}`, nil, 400, "missing field value"},
		{"string value", `{"tag":"a","value":"1"}`, nil, 400, "decode control request"},
		{"trailing", `{"tag":"a","value":1}{}`, nil, 400, "trailing"},
		{"too large", `{"tag":"` + strings.Repeat("a", 5000) + `","value":1}`, nil, 413, "too large"},
		{"no path", `{"tag":"a","value":1}`, fmt.Errorf("write a: %w", ErrNoControlPath), 404, "no control path"},
		{"unknown tag", `{"tag":"a","value":1}`, store.ErrUnknownTag, 404, "unknown tag"},
		{"forbidden", `{"tag":"a","value":1}`, ErrControlForbidden, 403, "forbidden"},
		{"bad value", `{"tag":"a","value":1}`, fmt.Errorf("%w: max 10", ErrControlValue), 400, "max 10"},
		{"timeout", `{"tag":"a","value":1}`, context.DeadlineExceeded, 504, "deadline"},
		{"own status", `{"tag":"a","value":1}`, statusErr{}, 409, "device busy"},
		{"device error", `{"tag":"a","value":1}`, errors.New("modbus exception 2"), 502, "modbus exception 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Controller = &fakeController{err: tt.err}
			h := NewServer(newFakeStore(), opts, nil).Handler()
			r := do(t, h, http.MethodPost, "/api/v1/control", strings.NewReader(tt.body), nil)
			wantError(t, r, tt.status, tt.wantErr)
		})
	}
}
