package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
)

// keyEnv is the environment variable every command that talks to a
// running Pith reads its API key from when --key is not given.
const keyEnv = "PITH_KEY"

// serverFlags are the flags every command that talks to a running Pith
// takes alike: its API key and whether to trust a self-signed certificate.
type serverFlags struct {
	key      string
	insecure bool
}

// register adds --key and --insecure to fs; scope is the key scope the
// command's endpoint needs, for the help text.
func (s *serverFlags) register(fs *flag.FlagSet, scope string) {
	fs.StringVar(&s.key, "key", "", "API key with "+scope+" scope (default $"+keyEnv+")")
	fs.BoolVar(&s.insecure, "insecure", false, "skip TLS certificate verification (a self-signed tls = \"auto\" certificate)")
}

// client returns the client these flags describe: --key wins over
// $PITH_KEY, which wins over no key at all.
func (s *serverFlags) client() *apiClient {
	key := s.key
	if key == "" {
		key = os.Getenv(keyEnv)
	}
	return newAPIClient(key, s.insecure)
}

// apiClient calls a running Pith's API with a key.
type apiClient struct {
	key  string // sent as "Authorization: Bearer KEY"; empty sends none
	http *http.Client
}

func newAPIClient(key string, insecure bool) *apiClient {
	c := &apiClient{key: key, http: &http.Client{}}
	if insecure {
		c.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	}
	return c
}

// postJSON posts v as JSON to url. An answer other than 200 is returned
// as an error "call VERB: STATUS: MESSAGE" with the API's error message;
// on 200 the caller reads and closes the body.
func (c *apiClient) postJSON(ctx context.Context, verb, url string, v any) (*http.Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("call %s: encode request: %w", verb, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", verb, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", verb, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("call %s: %s: %s", verb, resp.Status, e.Error)
		}
		return nil, fmt.Errorf("call %s: %s: %s", verb, resp.Status, bytes.TrimSpace(b))
	}
	return resp, nil
}
