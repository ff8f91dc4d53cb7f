package ingest

import (
	"context"
	"unsafe"
)

// maxBodyKey is the context key of WithMaxBody.
type maxBodyKey struct{}

// WithMaxBody lowers, for one request, the largest body the push
// handlers (line protocol, remote_write, emoncms) accept, compressed or
// decoded, to n bytes: what the server reserved memory for. A larger
// body is refused with 413 like one over the handler's own limit.
func WithMaxBody(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, maxBodyKey{}, n)
}

// maxBody is limit, lowered by WithMaxBody when ctx carries a lower one.
func maxBody(ctx context.Context, limit int64) int64 {
	if n, ok := ctx.Value(maxBodyKey{}).(int64); ok && n < limit {
		return max(n, 0)
	}
	return limit
}

// poolKeepBytes is the most memory a per-request state may hold and still
// go back to its handler's free list. One maximal body grows a state's
// buffers to tens of MB; kept, a few such states would pin that memory
// for the life of the process, outside any request's budget. Larger
// states are left to the garbage collector, so the free lists hold at
// most 2*GOMAXPROCS*poolKeepBytes per handler.
const poolKeepBytes = 4 << 20

// capBytes is the memory s's backing array takes.
func capBytes[T any](s []T) int64 {
	var z T
	return int64(cap(s)) * int64(unsafe.Sizeof(z))
}

// retained is the memory the body buffers take.
func (b *bodyReader) retained() int64 { return int64(cap(b.buf) + cap(b.inflated)) }

func (st *lpState) retained() int64 {
	return st.body.retained() + capBytes(st.rows.Rows) + capBytes(st.rows.tagsPool) + capBytes(st.rows.fieldsPool) +
		capBytes(st.pts) + capBytes(st.lines) + int64(cap(st.key))
}

func (st *rwState) retained() int64 {
	return st.body.retained() + int64(cap(st.decoded)) + capBytes(st.req.Series) + capBytes(st.req.labels) +
		capBytes(st.req.samples) + capBytes(st.pts) + int64(cap(st.key))
}

func (st *emState) retained() int64 {
	return st.body.retained() + int64(cap(st.clean)) + capBytes(st.pts) + int64(cap(st.key))
}
