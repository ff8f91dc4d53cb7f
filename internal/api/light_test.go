package api

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoHandler answers what it was asked, so that the light server and
// net/http can be compared by their answers. X-Light says which served.
func echoHandler(slow, started chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*lightResponse); ok {
			w.Header().Set("X-Light", "1")
		}
		switch r.URL.Path {
		case "/panic":
			panic("boom")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
			return
		case "/noread":
			w.Write([]byte("did not read\n"))
			return
		case "/slow":
			close(started)
			<-slow
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "read body: %v\n", err)
			return
		}
		var keys []string
		for k, vs := range r.Header {
			keys = append(keys, k+"="+strings.Join(vs, "|"))
		}
		slices.Sort(keys)
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s?%s %s host=%s len=%d close=%v remote=%s key=%q\n%s\nbody=%q\n",
			r.Method, r.URL.Path, r.URL.RawQuery, r.Proto, r.Host, r.ContentLength, r.Close, host,
			KeyName(r.Context()), strings.Join(keys, "\n"), body)
	})
}

// startLight serves echoHandler on loopback, with the light server for
// POST /light, /panic, /204, /noread and /slow when light is set.
func startLight(t testing.TB, light bool, slow, started chan struct{}) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := echoHandler(slow, started)
	lim := DefaultServerLimits()
	if light {
		lim.LightPOST = map[string]http.Handler{}
		for _, p := range []string{"/light", "/panic", "/204", "/noread", "/slow"} {
			lim.LightPOST[p] = h
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWith(ctx, ln, h, lim, nil, nil) }()
	var once sync.Once
	var serr error
	stop = func() error {
		once.Do(func() { cancel(); serr = <-done })
		return serr
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

// exchange sends raw, half-closes, and returns every answer read until
// the server closes, each as its status, selected headers and body.
func exchange(t testing.TB, addr, raw string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	var out []string
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			out = append(out, "body error: "+err.Error())
			break
		}
		light := resp.Header.Get("X-Light") == "1"
		out = append(out, fmt.Sprintf("%d light=%v type=%q length=%d close=%v\n%s",
			resp.StatusCode, light, resp.Header.Get("Content-Type"), resp.ContentLength, resp.Close, body))
	}
	return out
}

// withoutLight drops the light marks, which are all that may differ.
func withoutLight(answers []string) []string {
	out := make([]string, len(answers))
	for i, a := range answers {
		out[i] = strings.Replace(a, " light=true ", " light=false ", 1)
	}
	return out
}

func TestLightAnswersAsNetHTTP(t *testing.T) {
	lightAddr, _ := startLight(t, true, nil, nil)
	plainAddr, _ := startLight(t, false, nil, nil)
	post := func(path, body string, extra ...string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: pith\r\nContent-Type: application/json\r\n" +
			strings.Join(extra, "") + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	for _, tc := range []struct {
		name  string
		raw   string
		light []bool // which answers the light server gave
	}{
		{"one", post("/light", `{"name":"a"}`), []bool{true}},
		{"pipelined", post("/light", "a") + post("/light", "bb") + post("/light", ""), []bool{true, true, true}},
		{"light then other", post("/light", "a") + "GET /x HTTP/1.1\r\nHost: pith\r\n\r\n" + post("/light", "c"), []bool{true, false, false}},
		{"other then light", "GET /x HTTP/1.1\r\nHost: pith\r\n\r\n" + post("/light", "a"), []bool{false, false}},
		{"query", post("/light?x=1", "a"), []bool{false}},
		{"other path", post("/lighter", "a"), []bool{false}},
		{"lower-case headers", "POST /light HTTP/1.1\r\nhost: pith\r\ncontent-length: 2\r\nx-pith-signature: s\r\nauthorization: Bearer k\r\nx-odd_name: v\r\nX-Multi: 1\r\nx-multi: 2\r\n\r\nab", []bool{true}},
		{"spaces around values", "POST /light HTTP/1.1\r\nHost:   pith \t\r\nContent-Length:  1 \r\n\r\na", []bool{true}},
		{"connection close", post("/light", "a", "Connection: close\r\n") + post("/light", "b"), []bool{true}},
		{"connection keep-alive", post("/light", "a", "Connection: Keep-Alive\r\n") + post("/light", "b"), []bool{true, true}},
		{"connection upgrade", post("/light", "a", "Connection: upgrade\r\nUpgrade: h2c\r\n"), []bool{false}},
		{"chunked", "POST /light HTTP/1.1\r\nHost: pith\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n", []bool{false}},
		{"expect", post("/light", "a", "Expect: 100-continue\r\n"), []bool{false, false}},
		{"gzip", post("/light", "a", "Content-Encoding: gzip\r\n"), []bool{false}},
		{"pragma", post("/light", "a", "Pragma: no-cache\r\n"), []bool{false}},
		{"no host", "POST /light HTTP/1.1\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"two hosts", "POST /light HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"bad host", "POST /light HTTP/1.1\r\nHost: a b\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"no length", "POST /light HTTP/1.1\r\nHost: pith\r\n\r\n", []bool{false}},
		{"two lengths", "POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"signed length", "POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: +1\r\n\r\na", []bool{false}},
		{"HTTP/1.0", "POST /light HTTP/1.0\r\nHost: pith\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"bare LF", "POST /light HTTP/1.1\nHost: pith\nContent-Length: 1\n\na", []bool{false}},
		{"folded", "POST /light HTTP/1.1\r\nHost: pith\r\nX-A: 1\r\n 2\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"space before colon", "POST /light HTTP/1.1\r\nHost: pith\r\nX-A : 1\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"control in value", "POST /light HTTP/1.1\r\nHost: pith\r\nX-A: 1\x002\r\nContent-Length: 1\r\n\r\na", []bool{false}},
		{"large headers", post("/light", "a", "X-Big: "+strings.Repeat("b", lightBufSize)+"\r\n"), []bool{false}},
		{"body unread", post("/noread", "0123456789") + post("/light", "a"), []bool{true, true}},
		{"no content", post("/204", "a") + post("/light", "b"), []bool{true, true}},
		{"short body", "POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 100\r\n\r\nabc", []bool{true}},
		{"panic", post("/panic", "a") + post("/light", "b"), nil},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00", []bool{false}},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exchange(t, lightAddr, tc.raw)
			want := exchange(t, plainAddr, tc.raw)
			if !slices.Equal(withoutLight(got), want) {
				t.Fatalf("light server answered\n%s\nnet/http answered\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
			}
			var light []bool
			for _, a := range got {
				light = append(light, strings.Contains(a, " light=true "))
			}
			if !slices.Equal(light, tc.light) {
				t.Errorf("served light: %v, want %v; answers:\n%s", light, tc.light, strings.Join(got, "\n--\n"))
			}
		})
	}
}

// TestLightShutdown checks that stopping the server closes idle light
// connections at once and lets a request in progress finish first.
func TestLightShutdown(t *testing.T) {
	slow, started := make(chan struct{}), make(chan struct{})
	addr, stop := startLight(t, true, slow, started)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(idle, "POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 1\r\n\r\na")
	ibr := bufio.NewReader(idle)
	resp, err := http.ReadResponse(ibr, nil)
	if err != nil || resp.Header.Get("X-Light") != "1" {
		t.Fatalf("first answer: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)

	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busy.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(busy, "POST /slow HTTP/1.1\r\nHost: pith\r\nContent-Length: 4\r\n\r\nslow")
	<-started

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The idle connection is closed without an answer.
	if _, err := ibr.ReadByte(); err == nil {
		t.Fatal("idle connection still open after shutdown began")
	}
	select {
	case err := <-stopped:
		t.Fatalf("server stopped (%v) while a request was in progress", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(slow)
	resp, err = http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatalf("request in progress at shutdown: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`body="slow"`)) || !resp.Close {
		t.Fatalf("answer at shutdown: %d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// FuzzLight sends any bytes to a server with the light server and to one
// without, and wants the same answers from both.
func FuzzLight(f *testing.F) {
	for _, s := range []string{
		"POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 1\r\n\r\na",
		"POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 1\r\n\r\naPOST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 0\r\n\r\n",
		"POST /light HTTP/1.1\r\nhost: p\r\ncontent-length: 3\r\nconnection: close\r\n\r\nabc",
		"POST /light HTTP/1.1\r\nHost: pith\r\nContent-Length: 10\r\n\r\nab",
		"POST /noread HTTP/1.1\r\nHost: pith\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /204 HTTP/1.1\r\nHost: pith\r\nContent-Length: 0\r\nX-A: \t1\r\n\r\n",
	} {
		f.Add(s)
	}
	lightAddr, _ := startLight(f, true, nil, nil)
	plainAddr, _ := startLight(f, false, nil, nil)
	f.Fuzz(func(t *testing.T, raw string) {
		if strings.Contains(raw, "/panic") || strings.Contains(raw, "/slow") {
			return
		}
		got := exchange(t, lightAddr, raw)
		want := exchange(t, plainAddr, raw)
		if !slices.Equal(withoutLight(got), want) {
			t.Fatalf("light server answered\n%s\nnet/http answered\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
		}
	})
}

// BenchmarkLight measures one keep-alive request and answer through the
// light server, and through net/http, with a handler that reads the body
// and answers a few bytes (as the event collector does); the client is a
// raw connection, so allocs/op are the server's.
//
// Run with: go test -run '^$' -bench Light -benchtime 2s ./internal/api/
func BenchmarkLight(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Write([]byte(`{"accepted":1,"duplicates":0}` + "\n"))
	})
	for _, light := range []bool{false, true} {
		b.Run(fmt.Sprintf("light=%v", light), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			lim := DefaultServerLimits()
			if light {
				lim.LightPOST = map[string]http.Handler{"/api/v1/events": h}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ServeWith(ctx, ln, h, lim, nil, nil) }()
			defer func() { cancel(); <-done }()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			body := `{"name":"app.click","source":{"device":"dev-0042"},"num":{"x":12}}`
			req := []byte(fmt.Sprintf("POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
			br := bufio.NewReader(c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				// The answer ends with the body's newline.
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if bytes.HasPrefix(line, []byte(`{"accepted"`)) {
						break
					}
				}
			}
		})
	}
}

// TestLightRefusalReachesClient sends a large body to a light path whose
// handler refuses it without reading: the client, still sending, must
// get the answer rather than a connection reset.
func TestLightRefusalReachesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	lim := DefaultServerLimits()
	lim.LightPOST = map[string]http.Handler{"/api/v1/events": refuse}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWith(ctx, ln, refuse, lim, nil, nil) }()
	defer func() { cancel(); <-done }()
	body := bytes.Repeat([]byte("x"), 4<<20)
	for i := range 8 {
		resp, err := http.Post("http://"+ln.Addr().String()+"/api/v1/events", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
}
