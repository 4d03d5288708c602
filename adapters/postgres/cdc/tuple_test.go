package cdc_test

import (
	"testing"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// TestTupleKeyOnlyOld: a DELETE under REPLICA IDENTITY DEFAULT sends the
// key only; the other columns are reported as not sent ('u'), not as NULL,
// and the key columns are marked.
func TestTupleKeyOnlyOld(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id, v) VALUES (1, 5)", "DELETE FROM items WHERE id = 1")
	got, err := replRun(t, dsn, slot, cursor.NewMemory(cdc.Cursor{}), 2)
	if err != nil || len(got) != 2 || got[1].Op != cdc.Delete {
		t.Fatalf("Run() = %v, events %d; want an insert and a delete", err, len(got))
	}
	old := got[1].Old
	if name, v, kind := old.Column(0); name != "id" || string(v) != "1" || kind != 't' || !old.Key(0) {
		t.Errorf("Old.Column(0) = %q %q %c, key %t; want id 1 t, key true", name, v, kind, old.Key(0))
	}
	if name, v, kind := old.Column(1); name != "v" || v != nil || kind != 'u' || old.Key(1) {
		t.Errorf("Old.Column(1) = %q %q %c, key %t; want v, no value, u (not sent), key false", name, v, kind, old.Key(1))
	}
	if _, ok := old.Get("v"); ok {
		t.Error("Old.Get(v) ok, want not sent")
	}
	if _, _, kind := got[0].New.Column(1); kind != 't' || !got[0].New.Key(0) || got[0].New.Key(1) {
		t.Errorf("New.Column(1) kind %c, keys %t %t; want t, true false", kind, got[0].New.Key(0), got[0].New.Key(1))
	}
}
