package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Standby returns a physical standby of s, closed when t ends: a base
// backup of s taken between pg_backup_start and pg_backup_stop and copied
// file by file, streaming from s through the physical slot slot (created on
// s, WAL reserved at once, when missing), with hot_standby_feedback on and
// dbname in primary_conninfo; on PostgreSQL 17 also sync_replication_slots
// on, so that it keeps synced copies of s's failover slots. settings are
// added after these (later lines win). It runs the binaries of s.
//
// The primary's synchronized_standby_slots is the caller's to set.
func (s *Server) Standby(t testing.TB, slot string, settings map[string]string) *Server {
	t.Helper()
	sb, err := s.standby(slot, settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

func (s *Server) standby(slot string, settings map[string]string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&version); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true) WHERE NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)", slot); err != nil {
		return nil, fmt.Errorf("pgtest: physical slot %s: %w", slot, err)
	}
	opts := s.opts
	opts.Bin, opts.Settings = s.bin, nil
	sb, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		sb.Close()
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_backup_start('pgtest standby', true)"); err != nil {
		return fail(fmt.Errorf("pgtest: pg_backup_start: %w", err))
	}
	copyErr := sb.copyData(s.DataDir())
	var label, spcmap string
	if err := conn.QueryRow(ctx, "SELECT labelfile, coalesce(spcmapfile, '') FROM pg_backup_stop(false)").Scan(&label, &spcmap); err != nil {
		return fail(fmt.Errorf("pgtest: pg_backup_stop: %w", err))
	}
	if copyErr != nil {
		return fail(copyErr)
	}
	conf := []string{
		"port = " + strconv.Itoa(sb.port),
		"unix_socket_directories = '" + sb.dir + "'",
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=%s'", s.port, slot),
		"primary_slot_name = '" + slot + "'",
		"hot_standby = on",
		"hot_standby_feedback = on",
	}
	if version >= 17 {
		conf = append(conf, "sync_replication_slots = on")
	}
	for _, k := range sortedKeys(settings) {
		conf = append(conf, k+" = "+settings[k])
	}
	for name, text := range map[string]string{
		"backup_label":    label,
		"tablespace_map":  spcmap,
		"standby.signal":  "",
		"postgresql.conf": "\n# pgtest standby\n" + strings.Join(conf, "\n") + "\n",
	} {
		if name == "tablespace_map" && text == "" {
			continue
		}
		if err := sb.writeData(name, text); err != nil {
			return fail(err)
		}
	}
	if err := sb.Start(); err != nil {
		return fail(err)
	}
	return sb, nil
}

// skipped are the entries of a data directory a base backup leaves out
// (the directories among them are made empty).
var skipped = map[string]bool{
	"postmaster.pid": true, "postmaster.opts": true, "pg_wal": true, "pg_replslot": true,
	"pg_stat_tmp": true, "pg_dynshmem": true, "pg_notify": true, "pg_serial": true,
	"pg_snapshots": true, "pg_subtrans": true,
}

// copyData copies the data directory from into s's, skipping what a base
// backup skips; files that vanish while it copies are left out.
func (s *Server) copyData(from string) error {
	to := s.DataDir()
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pgtest: copying the data directory: %w", err)
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			if err := s.mkdir(dst); err != nil {
				return err
			}
			if skipped[rel] {
				if rel == "pg_wal" {
					if err := s.mkdir(filepath.Join(dst, "archive_status")); err != nil {
						return err
					}
				}
				return filepath.SkipDir
			}
			return nil
		}
		if skipped[rel] || !d.Type().IsRegular() {
			return nil
		}
		return s.copyFile(path, dst)
	})
}

func (s *Server) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pgtest: %w", err)
	}
	return s.own(dir)
}

func (s *Server) own(path string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

func (s *Server) copyFile(from, to string) error {
	in, err := os.Open(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("pgtest: copying %s: %w", from, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return s.own(to)
}

// writeData appends text to the file name of the data directory, creating
// it when missing.
func (s *Server) writeData(name, text string) error {
	path := filepath.Join(s.DataDir(), name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return s.own(path)
}

// Promote promotes the standby (pg_promote, waiting until it is done): it
// leaves recovery on a new timeline and accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return fmt.Errorf("pgtest: pg_promote: %w", err)
	}
	if !ok {
		return errors.New("pgtest: pg_promote: not promoted within 60 seconds")
	}
	return nil
}
