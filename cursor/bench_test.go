package cursor_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/resumable-go/resumable/cursor"
)

func BenchmarkMemorySave(b *testing.B) {
	m := cursor.NewMemory(int64(0))
	ctx := context.Background()
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		n++
		if err := m.Save(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFileSave measures a durable Save: it is bound by the two syncs
// of the file system the temporary directory is on.
func BenchmarkFileSave(b *testing.B) {
	b.Run("Int64", func(b *testing.B) {
		f := mustNewFile(b, filepath.Join(b.TempDir(), "cursor"), int64(0), cursor.Int64())
		var n int64
		benchSave(b, f, func() int64 { n++; return n })
	})
	b.Run("JSON", func(b *testing.B) {
		f := mustNewFile(b, filepath.Join(b.TempDir(), "cursor"), position{}, cursor.JSON[position]())
		var n int64
		benchSave(b, f, func() position { n++; return position{Revision: n, Token: "shard-1"} })
	})
}

func BenchmarkFileLoad(b *testing.B) {
	b.Run("Int64", func(b *testing.B) {
		f := mustNewFile(b, filepath.Join(b.TempDir(), "cursor"), int64(0), cursor.Int64())
		benchLoad(b, f, 1234567890)
	})
	b.Run("JSON", func(b *testing.B) {
		f := mustNewFile(b, filepath.Join(b.TempDir(), "cursor"), position{}, cursor.JSON[position]())
		benchLoad(b, f, position{Revision: 1234567890, Token: "shard-1"})
	})
}

func benchSave[C any](b *testing.B, f *cursor.File[C], next func() C) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Save(ctx, next()); err != nil {
			b.Fatal(err)
		}
	}
}

func benchLoad[C any](b *testing.B, f *cursor.File[C], c C) {
	ctx := context.Background()
	if err := f.Save(ctx, c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONEncode measures the JSON codec alone, without the file
// system: the part of a Save that is CPU.
func BenchmarkJSONEncode(b *testing.B) {
	codec := cursor.JSON[position]()
	c := position{Revision: 1234567890, Token: "shard-1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.Encode(c); err != nil {
			b.Fatal(err)
		}
	}
}
