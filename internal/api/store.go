package api

import (
	"context"
	"fmt"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// Tx is a streaming atomic write, as *store.Tx implements it. The import
// handler calls Add many times then Commit once, or Rollback on any error;
// one Tx is used by one goroutine.
type Tx interface {
	// Add stages points. It must not keep pts after it returns: the
	// handler reuses the slice for the next batch.
	Add(pts []model.Point) error
	// Commit makes every staged point durable and visible, or none of them.
	Commit(ctx context.Context) error
	// Rollback drops the staged points; it is a no-op after Commit.
	Rollback()
}

// TextTx is a Tx that also takes text values (the import's quoted values).
// A Tx without it refuses text rows.
type TextTx interface {
	// AddText stages text points; like Add it must not keep pts. A
	// refused point is a *model.PointError (text for a numeric tag).
	AddText(pts []model.TextPoint) error
}

// TextQueries are the reads of text tags, implemented by a Store that
// holds text. A store without it answers text tags as it can (not at all).
type TextQueries interface {
	// RawText returns at most limit stored values of a text tag in
	// [from, to), in time order; an error wrapping store.ErrKind for a
	// numeric tag.
	RawText(tag string, from, to int64, limit int) ([]model.TextSample, error)
	// AggregateText answers first or last of a text tag per bucket, as
	// Aggregate does for numbers (count of a text tag is Aggregate's).
	AggregateText(tag string, from, to int64, n int, agg model.Agg) ([]store.TextBucket, error)
}

// Queries are the reads the API serves. They are called concurrently from
// many requests and must be safe for that.
type Queries interface {
	// Aggregate splits [from, to) into n equal buckets and aggregates each
	// (see docs/api.md, "Buckets"); store.ErrUnknownTag for a tag
	// never seen.
	Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error)
	// RawFunc hands fn at most limit stored samples in [from, to), in
	// time order, as arrays fn may read only while it runs (all when
	// limit <= 0); store.ErrKind for a text tag.
	RawFunc(tag string, from, to int64, limit int, fn func(ts []int64, vs []float64, qs []model.Quality)) error
	// Latest returns the newest sample of each named tag, of all tags when
	// none is named.
	Latest(tags ...string) ([]store.Latest, error)
	// Tags lists the stored tags. The caller may not modify the slice.
	Tags() []store.TagInfo
}

// Store is what the API needs from the archive. Begin is called once per
// import request, concurrently with other requests.
type Store interface {
	Begin() Tx
	Queries
}

// DB is a store whose Begin returns its own concrete transaction type, as
// *store.DB does (Begin() *store.Tx).
type DB[T Tx] interface {
	Begin() T
	Queries
}

// WrapDB adapts a store with a concrete transaction type, such as
// *store.DB, to Store: api.WrapDB(db). The type arguments are inferred.
func WrapDB[T Tx, D DB[T]](db D) Store { return dbStore[T, D]{db} }

type dbStore[T Tx, D DB[T]] struct{ db D }

var _ Store = dbStore[Tx, Store]{}

func (s dbStore[T, D]) Begin() Tx { return s.db.Begin() }

func (s dbStore[T, D]) Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error) {
	return s.db.Aggregate(tag, from, to, n, agg)
}

func (s dbStore[T, D]) RawFunc(tag string, from, to int64, limit int, fn func(ts []int64, vs []float64, qs []model.Quality)) error {
	return s.db.RawFunc(tag, from, to, limit, fn)
}

func (s dbStore[T, D]) Latest(tags ...string) ([]store.Latest, error) { return s.db.Latest(tags...) }

func (s dbStore[T, D]) Tags() []store.TagInfo { return s.db.Tags() }

// RawText reads text when the wrapped store holds text.
func (s dbStore[T, D]) RawText(tag string, from, to int64, limit int) ([]model.TextSample, error) {
	if tq, ok := any(s.db).(TextQueries); ok {
		return tq.RawText(tag, from, to, limit)
	}
	return nil, fmt.Errorf("text of %q: %w", tag, store.ErrKind)
}

// AggregateText aggregates text when the wrapped store holds text.
func (s dbStore[T, D]) AggregateText(tag string, from, to int64, n int, agg model.Agg) ([]store.TextBucket, error) {
	if tq, ok := any(s.db).(TextQueries); ok {
		return tq.AggregateText(tag, from, to, n, agg)
	}
	return nil, fmt.Errorf("text of %q: %w", tag, store.ErrKind)
}

// Controller writes a value to the device behind a tag. Control returns
// once the device acknowledged; it is called concurrently. Its errors
// should wrap ErrNoControlPath, ErrControlForbidden, ErrControlValue,
// store.ErrUnknownTag or context.DeadlineExceeded where they apply, or
// implement HTTPStatus() int, so the API answers the right status; any
// other error is a failed device write (502).
type Controller interface {
	Control(ctx context.Context, tag string, value float64, who string) error
}

// TagMeta is the descriptive metadata /api/v1/tags shows beside each
// stored tag. Empty fields are left out of the response.
type TagMeta struct {
	Unit        string // engineering unit, e.g. "degC"
	Description string // what the tag measures
	Source      string // where values come from, e.g. "modbus:boiler/40001"
	Archive     string // archive policy name
	// Status is the device's own status of the tag's last value, where
	// the protocol has one: the raw OPC UA status code, such as
	// "UncertainLastUsableValue (0x40900000)".
	Status string
	// Labels are the tag's labels as the tag table holds them; the
	// store's (TagInfo.Labels) win when it has any.
	Labels model.Labels
}

// MetaFunc returns the metadata of a tag; ok is false when it has none.
// It is called concurrently.
type MetaFunc func(tag string) (meta TagMeta, ok bool)
