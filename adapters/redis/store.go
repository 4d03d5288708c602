package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
)

// ErrCursorChanged is matched by the error [Store.Save] and a
// [Transactional] handler return when the Store no longer owns its key:
// another Store of the same key loaded it since (a second process on the
// same stream, a paused process that woke up after its successor
// started), or the key was deleted or flushed. The error is marked
// errclass.Permanent, so a stream stops: nothing of the write that met it
// reached Redis, and going on would overwrite the other owner's cursor.
var ErrCursorChanged = errors.New("redis: the cursor key changed owner")

// The fields of a Store's hash.
const (
	fieldCursor = "cursor" // the encoded cursor; absent: the initial one
	fieldOwner  = "owner"  // the token of the Store that loaded it last
)

// loadScript makes ARGV[1] the hash's owner and returns its cursor (nil
// when it has none).
var loadScript = goredis.NewScript(`
redis.call('HSET', KEYS[1], 'owner', ARGV[1])
return redis.call('HGET', KEYS[1], 'cursor')
`)

// saveScript writes ARGV[2] as the cursor when ARGV[1] owns the hash, and
// returns 1; else it writes nothing and returns 0.
var saveScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
return 1
`)

// Store is a [cursor.Store] that keeps one stream's cursor in a Redis
// hash (the encoded cursor and the token of its owner). Make one with
// [NewStore]. It is safe for concurrent use; its Loads, Saves and
// [Transactional] transactions run one at a time.
//
// [Store.Load] takes the key over: it makes the Store the hash's owner,
// and every later write of another Store of the key (a predecessor still
// running) writes nothing and fails with [ErrCursorChanged]. Saves are
// checked and written by one script; a Transactional handler's commands
// and the cursor are one MULTI/EXEC under WATCH of the hash. A Save of the
// cursor the hash holds, as far as the Store knows, returns nil at once:
// that is the Resumer's Save after a Transactional handler committed it.
type Store[C any] struct {
	rdb     goredis.UniversalClient
	key     string
	codec   cursor.Codec[C]
	initial C
	inTx    atomic.Bool // set by Transactional

	mu    sync.Mutex
	token string // the owner token written by the last Load; "" before it
	sure  bool   // last is what the hash holds (no write of unknown outcome since)
	last  []byte // the hash's cursor as last read or written; nil: none
}

var _ cursor.Store[string] = (*Store[string])(nil)
var _ cursor.HandlerCommitter = (*Store[string])(nil)

// NewStore returns a Store that keeps a cursor in the hash key of rdb (a
// *Client, *ClusterClient or *Ring of go-redis v9), encoded by codec (a
// cursor package codec: cursor.String, cursor.JSON, cursor.Int64). Load
// returns initial while the hash holds no cursor. NewStore makes no round
// trip. Every argument is checked at once: a nil client or codec and an
// empty key each add an error matching stream.ErrInvalidOption that names
// it, all joined.
//
// On a ClusterClient, the commands a [Transactional] handler queues must
// name keys of key's hash slot (a hash tag: "{orders}.cursor" beside
// "orders").
func NewStore[C any](rdb goredis.UniversalClient, key string, codec cursor.Codec[C], initial C) (*Store[C], error) {
	var errs []error
	if isNil(rdb) {
		errs = append(errs, badarg.New("redis: NewStore", "rdb", rdb, "required"))
	}
	if key == "" {
		errs = append(errs, badarg.New("redis: NewStore", "key", key, "must not be empty"))
	}
	if isNil(codec) {
		errs = append(errs, badarg.New("redis: NewStore", "codec", codec, "required"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Store[C]{rdb: rdb, key: key, codec: codec, initial: initial}, nil
}

// CommitsInHandler reports whether a [Transactional] or
// [TransactionalBatch] handler was made over the Store: the cursor is then
// committed by the handler, in its own MULTI/EXEC, not by the stream. A
// stream refuses to run such a handler concurrently
// (stream.WithConcurrency above 1): transactions committed out of order
// would store a cursor beyond an unfinished event.
func (s *Store[C]) CommitsInHandler() bool { return s.inTx.Load() }

// Load returns the cursor (initial while the hash holds none) and makes
// the Store the key's owner, in one script: a predecessor's MULTI/EXEC
// already on its way runs before it (and Load returns its cursor) or
// fails, and every later write of the predecessor fails with
// [ErrCursorChanged]. A hash the codec cannot decode, or a key of another
// type, gives an error marked errclass.Permanent.
func (s *Store[C]) Load(ctx context.Context) (C, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load(ctx)
}

func (s *Store[C]) load(ctx context.Context) (C, error) {
	var zero C
	token, err := newToken()
	if err != nil {
		return zero, fmt.Errorf("redis: loading the cursor of %q: %w", s.key, err)
	}
	v, err := loadScript.Run(ctx, s.rdb, []string{s.key}, token).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return zero, classify(fmt.Sprintf("loading the cursor of %q", s.key), err)
	}
	s.token, s.sure, s.last = token, true, nil
	str, ok := v.(string)
	if !ok {
		return s.initial, nil
	}
	c, err := s.codec.Decode([]byte(str))
	if err != nil {
		return zero, errclass.Permanent(fmt.Errorf("redis: the cursor in %q does not decode: %w", s.key, err))
	}
	s.last = []byte(str)
	return c, nil
}

// newToken returns a random owner token.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Save writes c while the Store owns the key, as the type's documentation
// says: nothing when the hash holds c's encoding already. A Save before
// any Load loads first (and takes the key over). An encoding error is
// marked errclass.Permanent.
func (s *Store[C]) Save(ctx context.Context, c C) error {
	enc, err := s.encode(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds(enc) {
		return nil
	}
	if s.token == "" {
		if _, err := s.load(ctx); err != nil {
			return err
		}
		if s.holds(enc) {
			return nil
		}
	}
	n, err := saveScript.Run(ctx, s.rdb, []string{s.key}, s.token, enc).Int()
	if err != nil {
		s.sure = false // applied or not: the next write reads the hash
		return classify(fmt.Sprintf("saving the cursor of %q", s.key), err)
	}
	if n == 0 {
		return s.changed()
	}
	s.sure, s.last = true, enc
	return nil
}

// encode returns the encoding of c; its error is marked
// errclass.Permanent.
func (s *Store[C]) encode(c C) ([]byte, error) {
	enc, err := s.codec.Encode(c)
	if err != nil {
		return nil, errclass.Permanent(fmt.Errorf("redis: encoding the cursor %v of %q: %w", c, s.key, err))
	}
	return enc, nil
}

// holds reports whether the hash is known to hold enc; s.mu is held.
func (s *Store[C]) holds(enc []byte) bool {
	return s.token != "" && s.sure && s.last != nil && bytes.Equal(enc, s.last)
}

// changed returns the error of a write refused because the Store no
// longer owns the key; s.mu is held.
func (s *Store[C]) changed() error {
	return errclass.Permanent(fmt.Errorf("%w: %q was loaded by another Store, or deleted", ErrCursorChanged, s.key))
}
