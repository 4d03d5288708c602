package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/resumable-go/resumable/cursor"
)

var _ cursor.Store[int64] = (*cursor.File[int64])(nil)

// fileErr is what the tests check of a *cursor.FileError.
type fileErr struct {
	Op        string
	Path      string
	Corrupt   bool // errors.Is(err, cursor.ErrCorrupt)
	Permanent bool
	Cause     error // if not nil, the error must match it (errors.Is)
}

// checkFileError checks that err, returned by call, is a *cursor.FileError
// as want describes.
func checkFileError(t *testing.T, call string, err error, want fileErr) {
	t.Helper()
	var fe *cursor.FileError
	if !errors.As(err, &fe) {
		t.Fatalf("%s = %v (%T), want a *cursor.FileError with Op %q", call, err, err, want.Op)
	}
	got := fileErr{
		Op:        fe.Op,
		Path:      fe.Path,
		Corrupt:   errors.Is(err, cursor.ErrCorrupt),
		Permanent: fe.Permanent(),
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(fileErr{}, "Cause")); diff != "" {
		t.Errorf("%s error %v mismatch (-want +got):\n%s", call, err, diff)
	}
	if want.Cause != nil && !errors.Is(err, want.Cause) {
		t.Errorf("%s = %v, want an error matching %v", call, err, want.Cause)
	}
}

// checkMessage checks that the message of err, returned by call, contains
// each of want.
func checkMessage(t *testing.T, call string, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s = %q, want a message containing %q", call, err, w)
		}
	}
}

func mustNewFile[C any](tb testing.TB, path string, initial C, codec cursor.Codec[C]) *cursor.File[C] {
	tb.Helper()
	f, err := cursor.NewFile(path, initial, codec)
	if err != nil {
		tb.Fatalf("NewFile(%q) = %v, want nil error", path, err)
	}
	return f
}

func mustSave[C any](tb testing.TB, f *cursor.File[C], c C) {
	tb.Helper()
	if err := f.Save(context.Background(), c); err != nil {
		tb.Fatalf("Save(%v) = %v, want nil", c, err)
	}
}

func mustLoad[C any](tb testing.TB, f *cursor.File[C]) C {
	tb.Helper()
	c, err := f.Load(context.Background())
	if err != nil {
		tb.Fatalf("Load() = %v, want nil error", err)
	}
	return c
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// tempFiles returns the temporary files a Save left in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	return names
}

func checkNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	if names := tempFiles(t, dir); len(names) != 0 {
		t.Errorf("temporary files left in %s: %q, want none", dir, names)
	}
}

func TestNewFileArguments(t *testing.T) {
	dir := t.TempDir()
	if _, err := cursor.NewFile("", int64(0), cursor.Int64()); err == nil || !strings.Contains(err.Error(), "empty path") {
		t.Errorf(`NewFile("") = %v, want an error about the empty path`, err)
	}
	if _, err := cursor.NewFile[int64](filepath.Join(dir, "c"), 0, nil); err == nil || !strings.Contains(err.Error(), "nil codec") {
		t.Errorf("NewFile(nil codec) = %v, want an error about the nil codec", err)
	}
}

// TestNewFileRefusesUnencodableInitial: an initial cursor the codec cannot
// encode fails at construction, naming it, instead of at the first Save.
func TestNewFileRefusesUnencodableInitial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cursor")
	tests := []struct {
		name    string
		newFile func() error
		wantMsg string
	}{
		{
			name:    "NaN in JSON",
			newFile: func() error { _, err := cursor.NewFile(path, math.NaN(), cursor.JSON[float64]()); return err },
			wantMsg: "cursor: NewFile: the initial cursor NaN cannot be encoded: cursor: JSON codec: json: unsupported value: NaN",
		},
		{
			name: "codec that refuses the value",
			newFile: func() error {
				_, err := cursor.NewFile(path, int64(5), cursor.Codec[int64](failingCodec{bad: 5}))
				return err
			},
			wantMsg: "cursor: NewFile: the initial cursor 5 cannot be encoded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.newFile()
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantMsg) {
				t.Errorf("NewFile() = %v, want an error starting with %q", err, tt.wantMsg)
			}
		})
	}
}

// TestFileEmptyStringCursor: a String file store starts from, saves and
// loads the empty cursor (an SSE stream before its first id).
func TestFileEmptyStringCursor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cursor")
	f := mustNewFile(t, path, "", cursor.String())
	mustSave(t, f, "")
	if got := mustLoad(t, mustNewFile(t, path, "initial", cursor.String())); got != "" {
		t.Errorf("Load() = %q, want the empty cursor", got)
	}
}

func TestNewFileErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path to open
		cause error                                 // matched with errors.Is
	}{
		{
			name:  "missing directory",
			setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "missing", "cursor") },
			cause: fs.ErrNotExist,
		},
		{
			name: "directory is a file",
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "file"), "x")
				return filepath.Join(dir, "file", "cursor")
			},
			cause: syscall.ENOTDIR,
		},
		{
			name:  "path is a directory",
			setup: func(t *testing.T, dir string) string { return dir },
			cause: syscall.EISDIR,
		},
		{
			name: "path is a link to a directory",
			setup: func(t *testing.T, dir string) string {
				link := filepath.Join(dir, "link")
				if err := os.Symlink(dir, link); err != nil {
					t.Skipf("no symbolic links: %v", err)
				}
				return link
			},
			cause: syscall.EISDIR,
		},
		{
			name: "path is a device",
			setup: func(t *testing.T, dir string) string {
				if runtime.GOOS == "windows" {
					t.Skip("no device files")
				}
				return os.DevNull
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			_, err := cursor.NewFile(path, int64(0), cursor.Int64())
			checkFileError(t, "NewFile()", err, fileErr{Op: "new", Path: path, Permanent: true, Cause: tt.cause})
			checkMessage(t, "NewFile()", err, path)
		})
	}
}

func TestFileLoadInitial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	f := mustNewFile(t, path, "start", cursor.String())
	if got := mustLoad(t, f); got != "start" {
		t.Errorf("Load() = %q, want %q", got, "start")
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after Load = %v, want the file not created", err)
	}
}

func TestFileRoundTrip(t *testing.T) {
	t.Run("int64", func(t *testing.T) {
		testRoundTrip(t, cursor.Int64(), 0, []int64{1, 2, 3, -1, 1 << 62}, "4611686018427387904\n")
	})
	t.Run("string", func(t *testing.T) {
		testRoundTrip(t, cursor.String(), "", []string{"a", "10", "opaque/token=="}, "opaque/token==\n")
	})
	t.Run("empty string", func(t *testing.T) {
		testRoundTrip(t, cursor.String(), "start", []string{"a", "", " b\t", ""}, "quoted\n\"\"\n")
	})
	t.Run("JSON", func(t *testing.T) {
		testRoundTrip(t, cursor.JSON[position](), position{},
			[]position{{Revision: 1}, {Revision: 2, Token: "t"}}, `{"revision":2,"token":"t"}`+"\n")
	})
	t.Run("JSON map", func(t *testing.T) {
		testRoundTrip(t, cursor.JSON[map[string]int64](), nil,
			[]map[string]int64{{"p0": 1}, {"p0": 4, "p1": 2}}, `{"p0":4,"p1":2}`+"\n")
	})
}

// testRoundTrip saves each of saves in turn and checks what a store, and a
// fresh store on the same path, load, and the file's contents.
func testRoundTrip[C any](t *testing.T, codec cursor.Codec[C], initial C, saves []C, wantFile string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	f := mustNewFile(t, path, initial, codec)
	for _, c := range saves {
		mustSave(t, f, c)
		if diff := cmp.Diff(c, mustLoad(t, f)); diff != "" {
			t.Errorf("Load() after Save(%v) mismatch (-want +got):\n%s", c, diff)
		}
	}
	want := saves[len(saves)-1]
	if diff := cmp.Diff(want, mustLoad(t, mustNewFile(t, path, initial, codec))); diff != "" {
		t.Errorf("Load() on a new store mismatch (-want +got):\n%s", diff)
	}
	if got := readFile(t, path); got != wantFile {
		t.Errorf("file contents = %q, want %q", got, wantFile)
	}
	checkNoTempFiles(t, dir)
}

func TestFileLoadEditedByOperator(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    int64
	}{
		{name: "no newline", content: "17", want: 17},
		{name: "CRLF", content: "17\r\n", want: 17},
		{name: "padded", content: "  17\t\n\n", want: 17},
		{name: "negative", content: "-3\n", want: -3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cursor")
			writeFile(t, path, tt.content)
			if got := mustLoad(t, mustNewFile(t, path, int64(0), cursor.Int64())); got != tt.want {
				t.Errorf("Load() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFileLoadCorrupt(t *testing.T) {
	tests := []struct {
		name    string
		content string
		load    func(f string) error // NewFile + Load with some codec
	}{
		{name: "int64 empty", content: "", load: loadWith(int64(99), cursor.Int64())},
		{name: "int64 blank", content: "\n", load: loadWith(int64(99), cursor.Int64())},
		{name: "int64 zero bytes", content: "\x00\x00\x00\x00\x00\x00\x00\x00", load: loadWith(int64(99), cursor.Int64())},
		{name: "int64 word", content: "abc\n", load: loadWith(int64(99), cursor.Int64())},
		{name: "int64 two values", content: "12\n13\n", load: loadWith(int64(99), cursor.Int64())},
		{name: "int64 overflow", content: "99999999999999999999\n", load: loadWith(int64(99), cursor.Int64())},
		{name: "int64 too large", content: strings.Repeat("1", 1<<20+1), load: loadWith(int64(99), cursor.Int64())},
		{name: "string empty", content: "", load: loadWith("initial", cursor.String())},
		{name: "string zero bytes", content: "\x00\x00\x00\x00", load: loadWith("initial", cursor.String())},
		{name: "string two lines", content: "a\nb\n", load: loadWith("initial", cursor.String())},
		{name: "JSON empty", content: "", load: loadWith(position{Revision: 99}, cursor.JSON[position]())},
		{name: "JSON truncated", content: `{"revision":12`, load: loadWith(position{Revision: 99}, cursor.JSON[position]())},
		{name: "JSON two values", content: `{"revision":1} {"revision":2}`, load: loadWith(position{Revision: 99}, cursor.JSON[position]())},
		{name: "JSON null", content: "null", load: loadWith(position{Revision: 99}, cursor.JSON[position]())},
		{name: "JSON misspelt field", content: `{"revison":12}`, load: loadWith(position{Revision: 99}, cursor.JSON[position]())},
		{name: "JSON zero bytes", content: "\x00\x00\x00", load: loadWith(position{Revision: 99}, cursor.JSON[position]())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cursor")
			writeFile(t, path, tt.content)
			for range 2 { // the error stays: Load never falls back to the initial cursor
				err := tt.load(path)
				checkFileError(t, "Load()", err, fileErr{Op: "decode", Path: path, Corrupt: true, Permanent: true})
				if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "corrupt") || len(msg) > 400 {
					t.Errorf("Load() = %q, want a short message naming the path and the corruption", msg)
				}
			}
			if got := readFile(t, path); got != tt.content {
				t.Errorf("file contents after Load = %q, want them untouched", got)
			}
		})
	}
}

// loadWith returns a function that loads a File store on its path with
// codec, and checks it does not return the initial cursor.
func loadWith[C any](initial C, codec cursor.Codec[C]) func(path string) error {
	return func(path string) error {
		f, err := cursor.NewFile(path, initial, codec)
		if err != nil {
			return fmt.Errorf("NewFile: %w", err)
		}
		c, err := f.Load(context.Background())
		if err == nil {
			return fmt.Errorf("loaded %v", c)
		}
		return err
	}
}

func TestFileLoadErrors(t *testing.T) {
	tests := []struct {
		name      string
		damage    func(t *testing.T, dir, path string) // after NewFile
		cause     error
		permanent bool
	}{
		{
			name: "file replaced by a directory",
			damage: func(t *testing.T, dir, path string) {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			cause:     syscall.EISDIR,
			permanent: true,
		},
		{
			name: "directory removed",
			damage: func(t *testing.T, dir, path string) {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			},
			cause:     fs.ErrNotExist,
			permanent: true,
		},
		{
			name: "directory replaced by a file",
			damage: func(t *testing.T, dir, path string) {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, "x")
			},
			cause:     syscall.ENOTDIR,
			permanent: true,
		},
		{
			name: "file replaced by a link to a device",
			damage: func(t *testing.T, dir, path string) {
				if runtime.GOOS == "windows" {
					t.Skip("no device files")
				}
				if err := os.Symlink(os.DevNull, path); err != nil {
					t.Skipf("no symbolic links: %v", err)
				}
			},
			permanent: true,
		},
		{
			name: "file unreadable",
			damage: func(t *testing.T, dir, path string) {
				if runtime.GOOS == "windows" || os.Geteuid() == 0 {
					t.Skip("permissions do not stop root (or Windows)")
				}
				writeFile(t, path, "1\n")
				if err := os.Chmod(path, 0); err != nil {
					t.Fatal(err)
				}
			},
			cause:     fs.ErrPermission,
			permanent: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "cursor")
			f := mustNewFile(t, path, int64(7), cursor.Int64())
			tt.damage(t, dir, path)
			_, err := f.Load(context.Background())
			checkFileError(t, "Load()", err, fileErr{Op: "load", Path: path, Permanent: tt.permanent, Cause: tt.cause})
		})
	}
}

func TestFileContext(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	f := mustNewFile(t, path, int64(0), cursor.Int64())
	mustSave(t, f, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Load(cancelled) = %v, want context.Canceled", err)
	}
	if err := f.Save(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("Save(cancelled) = %v, want context.Canceled", err)
	}
	if got := mustLoad(t, f); got != 1 {
		t.Errorf("Load() after a cancelled Save = %d, want 1", got)
	}
}

// failingCodec is Int64, except that it fails to encode the cursor bad and
// encodes the cursor garbled as data its Decode rejects.
type failingCodec struct {
	bad, garbled int64
}

var errEncode = errors.New("cannot encode")

func (c failingCodec) Encode(n int64) ([]byte, error) {
	switch n {
	case c.bad:
		return nil, errEncode
	case c.garbled:
		return []byte("garbled\n"), nil
	}
	return cursor.Int64().Encode(n)
}

func (failingCodec) Decode(data []byte) (int64, error) { return cursor.Int64().Decode(data) }

func TestFileSaveEncodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		save    func(path string) error // saves a valid cursor, then a bad one
		cause   error
		wantMsg string
	}{
		{
			name:  "codec fails",
			save:  saveThen(failingCodec{bad: 5, garbled: 6}, 1, 5),
			cause: errEncode,
		},
		{
			name:    "codec cannot decode its encoding",
			save:    saveThen(failingCodec{bad: 5, garbled: 6}, 1, 6),
			wantMsg: "cannot decode its own encoding",
		},
		{
			name:    "too large",
			save:    saveThen(cursor.String(), "1", strings.Repeat("x", 1<<20)),
			wantMsg: "more than a cursor file holds",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cursor")
			err := tt.save(path)
			checkFileError(t, "Save()", err, fileErr{Op: "encode", Path: path, Permanent: true, Cause: tt.cause})
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Save() = %q, want a message containing %q", err, tt.wantMsg)
			}
			if got := readFile(t, path); got != "1\n" {
				t.Errorf("file contents after a failed Save = %q, want the previous %q", got, "1\n")
			}
			checkNoTempFiles(t, dir)
		})
	}
}

// saveThen returns a function that saves first, which must encode as
// "1\n", then bad, and returns the error of the second Save.
func saveThen[C any](codec cursor.Codec[C], first, bad C) func(path string) error {
	return func(path string) error {
		f, err := cursor.NewFile(path, first, codec)
		if err != nil {
			return fmt.Errorf("NewFile: %w", err)
		}
		if err := f.Save(context.Background(), first); err != nil {
			return fmt.Errorf("first Save: %w", err)
		}
		return f.Save(context.Background(), bad)
	}
}

func TestFileSaveWriteErrors(t *testing.T) {
	tests := []struct {
		name     string
		damage   func(t *testing.T, dir, path string) // after a first Save
		repair   func(t *testing.T, dir, path string) // before checking the file
		cause    error
		wantFile string // contents after repair
	}{
		{
			name: "directory replaced by a file",
			damage: func(t *testing.T, dir, path string) {
				if err := os.Rename(dir, dir+".moved"); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, "x")
			},
			repair: func(t *testing.T, dir, path string) {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(dir+".moved", dir); err != nil {
					t.Fatal(err)
				}
			},
			cause:    syscall.ENOTDIR,
			wantFile: "1\n",
		},
		{
			name: "directory moved away",
			damage: func(t *testing.T, dir, path string) {
				if err := os.Rename(dir, dir+".moved"); err != nil {
					t.Fatal(err)
				}
			},
			repair: func(t *testing.T, dir, path string) {
				if err := os.Rename(dir+".moved", dir); err != nil {
					t.Fatal(err)
				}
			},
			cause:    fs.ErrNotExist,
			wantFile: "1\n",
		},
		{
			// The temporary file is written, and the rename fails: Save
			// must remove the temporary file.
			name: "file replaced by a directory",
			damage: func(t *testing.T, dir, path string) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(path, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			repair: func(t *testing.T, dir, path string) {
				if err := os.RemoveAll(path); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, "1\n")
			},
			wantFile: "1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "cursor")
			f := mustNewFile(t, path, int64(0), cursor.Int64())
			mustSave(t, f, 1)
			tt.damage(t, dir, path)
			err := f.Save(context.Background(), 2)
			checkFileError(t, "Save(2)", err, fileErr{Op: "save", Path: path, Permanent: true, Cause: tt.cause})
			tt.repair(t, dir, path)
			if got := readFile(t, path); got != tt.wantFile {
				t.Errorf("file contents after a failed Save = %q, want %q", got, tt.wantFile)
			}
			if got := mustLoad(t, f); got != 1 {
				t.Errorf("Load() after a failed Save = %d, want 1", got)
			}
			checkNoTempFiles(t, dir)
			// The store works again once the directory is repaired.
			mustSave(t, f, 3)
			if got := mustLoad(t, f); got != 3 {
				t.Errorf("Load() after repair and Save(3) = %d, want 3", got)
			}
		})
	}
}

func TestFileConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	// Two stores on one path, each used by several goroutines.
	stores := []*cursor.File[int64]{
		mustNewFile(t, path, -1, cursor.Int64()),
		mustNewFile(t, path, -1, cursor.Int64()),
	}
	const goroutines, saves = 4, 25
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range goroutines {
		f := stores[g%len(stores)]
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range saves {
				if err := f.Save(ctx, int64(g*saves+i)); err != nil {
					t.Errorf("Save() = %v, want nil", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range saves {
				got, err := f.Load(ctx)
				if err != nil || got < -1 || got >= goroutines*saves {
					t.Errorf("Load() = %d, %v, want -1 or a saved cursor", got, err)
				}
			}
		}()
	}
	wg.Wait()
	got := mustLoad(t, stores[0])
	var last []int64
	for g := range goroutines {
		last = append(last, int64(g*saves+saves-1))
	}
	if !slices.Contains(last, got) {
		t.Errorf("Load() after all Saves = %d, want the last Save of one goroutine, one of %v", got, last)
	}
	checkNoTempFiles(t, dir)
}

func TestFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permission bits")
	}
	tests := []struct {
		name     string
		existing fs.FileMode // 0: no file when NewFile is called
		want     fs.FileMode
	}{
		{name: "new file", want: 0o644},
		{name: "existing file keeps its mode", existing: 0o600, want: 0o600},
		{name: "group readable", existing: 0o640, want: 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cursor")
			if tt.existing != 0 {
				writeFile(t, path, "1\n")
				if err := os.Chmod(path, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			f := mustNewFile(t, path, int64(0), cursor.Int64())
			mustSave(t, f, 2)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode(); got != tt.want {
				t.Errorf("mode after Save = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFileRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	f := mustNewFile(t, "cursor", int64(0), cursor.Int64())
	want := filepath.Join(dir, "cursor")
	t.Chdir(t.TempDir()) // the store keeps its file
	mustSave(t, f, 4)
	if got := readFile(t, want); got != "4\n" {
		t.Errorf("file contents = %q, want %q", got, "4\n")
	}
}

func TestFileErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *cursor.FileError
		want string
	}{
		{
			name: "corrupt",
			err:  &cursor.FileError{Path: "/var/lib/app/cursor", Op: "decode", Err: errors.New("cursor: empty cursor data")},
			want: "cursor: corrupt cursor file /var/lib/app/cursor: cursor: empty cursor data",
		},
		{
			name: "save",
			err:  &cursor.FileError{Path: "/var/lib/app/cursor", Op: "save", Err: &fs.PathError{Op: "sync", Path: "/var/lib/app/.cursor.1.tmp", Err: syscall.EIO}},
			want: "cursor: save /var/lib/app/cursor: sync /var/lib/app/.cursor.1.tmp: input/output error",
		},
		{
			name: "nil cause",
			err:  &cursor.FileError{Path: "/c", Op: "load"},
			want: "cursor: load /c: <nil>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && tt.name == "save" {
				t.Skip("errno text differs")
			}
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}
