package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/pith-historian/pith/internal/store"
)

type logSink struct{ strings.Builder }

func TestDeleteRealStore(t *testing.T) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs logSink
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ap, ah := GenerateKey()
	wp, wh := GenerateKey()
	auth, err := NewAuth([]Key{{"ops", ah, ScopeAdmin}, {"telegraf", wh, ScopeWrite}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := auth.Wrap(NewServer(WrapDB(db), DefaultOptions(), log).Handler())
	admin := map[string]string{"Authorization": "Bearer " + ap}
	body := "a.x,1000,1\na.x,1500,3\na.x,3000,10\nb.y,2000,-2.5\n"
	wantJSON(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(body), map[string]string{"Authorization": "Bearer " + wp}), http.StatusOK, `{"points":4}`)

	tests := []struct {
		name, target string
		header       map[string]string
		status       int
		want         string
	}{
		{"write key refused", "/api/v1/data?tag=a.x&from=0&to=2000", map[string]string{"Authorization": "Bearer " + wp}, 403, "needs admin"},
		{"no key", "/api/v1/data?tag=a.x&from=0&to=2000", nil, 401, "no API key"},
		{"missing tag", "/api/v1/data?from=0&to=2000", admin, 400, "tag"},
		{"bad from", "/api/v1/data?tag=a.x&from=x&to=2000", admin, 400, "from"},
		{"empty range", "/api/v1/data?tag=a.x&from=5&to=5", admin, 400, "greater"},
		{"unknown tag", "/api/v1/data?tag=nope&from=0&to=10", admin, 404, "unknown tag"},
	}
	for _, tt := range tests {
		wantError(t, do(t, h, http.MethodDelete, tt.target, nil, tt.header), tt.status, tt.want)
	}
	wantJSON(t, do(t, h, http.MethodDelete, "/api/v1/data?tag=a.x&from=1000&to=2000", nil, admin), http.StatusOK, `{"deleted":2}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=a.x&from=0&to=4000&agg=raw", nil, admin), http.StatusOK,
		`{"tag":"a.x","agg":"raw","points":[[3000,10]]}`)
	wantJSON(t, do(t, h, http.MethodDelete, "/api/v1/data?tag=a.x&from=1000&to=2000", nil, admin), http.StatusOK, `{"deleted":0}`)
	if l := logs.String(); !strings.Contains(l, "data delete done") || !strings.Contains(l, "who=ops") || !strings.Contains(l, "deleted=2") {
		t.Errorf("delete not logged with who and what:\n%s", l)
	}
}

// fullStore is a fake whose writes fail as a full disk does.
type fullStore struct {
	*fakeStore
}

func (fullStore) Delete(context.Context, string, int64, int64) (int64, error) {
	return 0, fmt.Errorf("delete: %w", diskFullErr())
}

func diskFullErr() error {
	// As the store builds it: ErrDiskFull and the system error together.
	return fmt.Errorf("commit write: %w: %w", store.ErrDiskFull, syscall.ENOSPC)
}

func TestDiskFullStatus(t *testing.T) {
	fs := newFakeStore()
	fs.commitErr = diskFullErr()
	h := NewServer(fullStore{fs}, DefaultOptions(), nil).Handler()
	wantError(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader("a,1,1\n"), nil), http.StatusInsufficientStorage, "disk full")
	wantError(t, do(t, h, http.MethodDelete, "/api/v1/data?tag=a&from=0&to=5", nil, nil), http.StatusInsufficientStorage, "disk full")
	for _, tt := range []struct {
		err  error
		want int
	}{
		{diskFullErr(), 507},
		{fmt.Errorf("x: %w", syscall.EDQUOT), 507},
		{store.ErrClosed, 503},
		{context.Canceled, 503},
		{fmt.Errorf("x: %w", syscall.EIO), 500},
	} {
		if got := writeErrStatus(tt.err); got != tt.want {
			t.Errorf("writeErrStatus(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
