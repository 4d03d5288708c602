package deadletter

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"time"
)

// Record is one parked event, as [Read] returns it. Two records with the same
// Cursor are one event parked again after a crash.
type Record[T, C any] struct {
	// Time is when the event was parked, in UTC.
	Time time.Time `json:"time"`
	// Cursor is the event's cursor, as the File's extractor returned it.
	Cursor C `json:"cursor"`
	// Tries is how many times the handler was called with the event.
	Tries int `json:"tries"`
	// Err is the text of the handler's last error.
	Err string `json:"error"`
	// Event is the event.
	Event T `json:"event"`
}

// Read returns the records of the dead-letter file at path, in the order
// they were parked. A line that is not a record yields an error naming the
// file and line, and reading goes on; a file that cannot be opened or read
// yields one error and ends the sequence. A last line without its newline
// (a Park that never returned, or one still writing) is skipped. The file is
// open while the sequence is ranged over; a [File] may append meanwhile.
func Read[T, C any](path string) iter.Seq2[Record[T, C], error] {
	return func(yield func(Record[T, C], error) bool) {
		fh, err := os.Open(path)
		if err != nil {
			yield(Record[T, C]{}, fmt.Errorf("deadletter: read: %w", err))
			return
		}
		defer fh.Close()
		br := bufio.NewReader(fh)
		for n := 1; ; n++ {
			data, err := br.ReadBytes('\n')
			if err == io.EOF {
				return // the end, or a torn last line
			}
			if err != nil {
				yield(Record[T, C]{}, fmt.Errorf("deadletter: read %s line %d: %w", path, n, err))
				return
			}
			rec, err := decode[T, C](data)
			if err != nil {
				err = fmt.Errorf("deadletter: read %s line %d: %w", path, n, err)
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

// errNotRecord: a line that decodes but lacks a record's time or tries.
var errNotRecord = errors.New("not a dead-letter record (no time or tries)")

func decode[T, C any](data []byte) (Record[T, C], error) {
	var rec Record[T, C]
	if err := json.Unmarshal(data, &rec); err != nil {
		return Record[T, C]{}, err
	}
	if rec.Time.IsZero() || rec.Tries < 1 {
		return Record[T, C]{}, errNotRecord
	}
	return rec, nil
}
