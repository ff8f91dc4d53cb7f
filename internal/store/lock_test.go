package store

import "testing"

// TestOneProcessPerDirectory: a second Open of a directory in use fails
// with a clear error, and works again once the first is closed.
func TestOneProcessPerDirectory(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if db2, err := Open(dir, testOptions()); err == nil {
		db2.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, testOptions())
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	db.Close()
}
