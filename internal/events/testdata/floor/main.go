// Command floor is the reference for the event collector's single-event
// benchmark: the least an HTTP/1.1 server can do per request and still
// acknowledge after fsync. It reads the headers and body of each
// keep-alive request, appends the body to a shared buffer, waits for the
// group fsync that covers it (one goroutine writes and fsyncs a file per
// round) and answers with fixed bytes. No JSON, no validation, no ids, no
// sink: what Pith does beyond it is the price of being a collector.
//
// Usage: go run ./internal/events/testdata/floor -listen 127.0.0.1:8096 -file /tmp/floor.wal
package main

import (
	"bufio"
	"bytes"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"sync"
)

var (
	mu    sync.Mutex
	buf   []byte
	round = make(chan struct{})
	kick  = make(chan struct{}, 1)
)

// committer writes and fsyncs what the requests appended, then wakes them.
func committer(f *os.File) {
	for range kick {
		mu.Lock()
		b, r := buf, round
		buf, round = nil, make(chan struct{})
		mu.Unlock()
		if _, err := f.Write(b); err != nil {
			log.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			log.Fatal(err)
		}
		close(r)
	}
}

var answer = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n{\"accepted\":1,\"duplicates\":0}\n")

func serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 8192)
	var body []byte
	for {
		n := 0
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if i := bytes.IndexByte(line, ':'); i > 0 && bytes.EqualFold(line[:i], []byte("Content-Length")) {
				n, _ = strconv.Atoi(string(bytes.TrimSpace(line[i+1:])))
			}
		}
		body = append(body[:0], make([]byte, n)...)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		mu.Lock()
		buf = append(buf, body...)
		ch := round
		mu.Unlock()
		select {
		case kick <- struct{}{}:
		default:
		}
		<-ch
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8096", "address")
	file := flag.String("file", "floor.wal", "file appended to and fsynced")
	flag.Parse()
	f, err := os.Create(*file)
	if err != nil {
		log.Fatal(err)
	}
	go committer(f)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c)
	}
}
