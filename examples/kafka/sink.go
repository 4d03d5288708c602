package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/adapters/kafka"
	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
)

// sink applies each record's effect, a row of kafka_effects, and its
// partition's offset, a row of the postgres adapter's cursor table, in one
// PostgreSQL transaction (postgres.Transactional): exactly once. The
// partitions' Stores are opened by the group at each assignment
// (kafka.WithStore); handle finds the partition's handler.
type sink struct {
	pool *pgxpool.Pool

	mu       sync.Mutex
	handlers map[partitionKey]func(context.Context, *kgo.Record) error
}

type partitionKey struct {
	topic string
	id    int32
}

const createEffects = `CREATE TABLE IF NOT EXISTS kafka_effects (
	topic text NOT NULL, partition int NOT NULL, "offset" bigint NOT NULL, key text NOT NULL, value text NOT NULL)`

// newSink connects to dsn and creates the effects table.
func newSink(ctx context.Context, dsn string) (*sink, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, createEffects); err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating kafka_effects: %w", err)
	}
	return &sink{pool: pool, handlers: map[partitionKey]func(context.Context, *kgo.Record) error{}}, nil
}

func (s *sink) Close() { s.pool.Close() }

// open is the group's kafka.WithStore: the Store of one partition, a row
// named kafka/TOPIC/PARTITION whose cursor is the offset of the last
// record applied (-1: none).
func (s *sink) open(_ context.Context, topic string, id int32) (cursor.Store[int64], error) {
	st, err := postgres.NewStore(s.pool, fmt.Sprintf("kafka/%s/%d", topic, id), cursor.Int64(), -1)
	if err != nil {
		return nil, err
	}
	h := postgres.Transactional(st, kafka.Extract, apply)
	s.mu.Lock()
	s.handlers[partitionKey{topic, id}] = h
	s.mu.Unlock()
	return st, nil
}

// handle applies r and stores its offset, in one transaction.
func (s *sink) handle(ctx context.Context, r *kgo.Record) error {
	s.mu.Lock()
	h := s.handlers[partitionKey{r.Topic, r.Partition}]
	s.mu.Unlock()
	return h(ctx, r)
}

// apply is a record's effect.
func apply(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO kafka_effects (topic, partition, "offset", key, value) VALUES ($1, $2, $3, $4, $5)`,
		r.Topic, r.Partition, r.Offset, string(r.Key), string(r.Value))
	return err
}
