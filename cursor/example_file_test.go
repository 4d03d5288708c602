package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/resumable-go/resumable/cursor"
)

func ExampleNewFile() {
	dir, err := os.MkdirTemp("", "cursor-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders.cursor")
	ctx := context.Background()

	// A stream over a log resumes after an offset; 0 before the first run.
	store, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		log.Fatal(err)
	}
	offset, err := store.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first run starts after", offset)

	if err := store.Save(ctx, 1042); err != nil {
		log.Fatal(err)
	}

	// After a restart, a new store on the same path loads the saved offset.
	restarted, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		log.Fatal(err)
	}
	offset, err = restarted.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next run starts after", offset)

	// The file is plain text, for an operator to read or edit.
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("file: %q\n", data)
	// Output:
	// first run starts after 0
	// next run starts after 1042
	// file: "1042\n"
}

func ExampleJSON() {
	dir, err := os.MkdirTemp("", "cursor-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	type position struct {
		Revision int64  `json:"revision"`
		Shard    string `json:"shard"`
	}
	path := filepath.Join(dir, "watch.json")
	store, err := cursor.NewFile(path, position{}, cursor.JSON[position]())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Save(ctx, position{Revision: 7, Shard: "eu-1"}); err != nil {
		log.Fatal(err)
	}
	p, err := store.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", p)
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(data))
	// Output:
	// {Revision:7 Shard:eu-1}
	// {"revision":7,"shard":"eu-1"}
}

func ExampleErrCorrupt() {
	dir, err := os.MkdirTemp("", "cursor-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.cursor")

	// Damage the file the way a bad hand edit would.
	if err := os.WriteFile(path, []byte("12O5\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	store, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		log.Fatal(err)
	}
	_, err = store.Load(context.Background())

	// Load fails instead of starting over from 0, and says the failure is
	// permanent: retrying cannot repair the file.
	var p interface{ Permanent() bool } // what errclass.Default honours
	fmt.Println(errors.Is(err, cursor.ErrCorrupt))
	fmt.Println(errors.As(err, &p) && p.Permanent())
	// Output:
	// true
	// true
}
