package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver "sqlite"

	"github.com/esjet/esjet/config"
)

// The SQLite-outbox baseline: the classic transactional outbox that esjet
// exists to beat, in one embedded file beside the run's data. A decision
// is one transaction that checks the aggregate's version, inserts the event
// row and an outbox row, and bumps the version; a dispatcher reads pending
// outbox rows, runs the (no-op) effect and marks each row done in its own
// commit. WAL journal; synchronous=FULL under sync always (every commit
// fsynced, as esjet's default), NORMAL under sync interval (fsync at
// checkpoints only: a power loss may lose the last commits, as interval
// may). One connection: SQLite has one writer, and its busy wait sleeps, so
// a pool of writers only adds waiting.

// sqliteOutbox is the baseline's database.
type sqliteOutbox struct {
	db *sql.DB
}

// openSQLite creates the baseline's file in dir with the durability that
// matches sync.
func openSQLite(dir, sync string) (*sqliteOutbox, error) {
	mode := "FULL"
	if sync == config.SyncInterval {
		mode = "NORMAL"
	}
	path := filepath.Join(dir, "outbox.db")
	dsn := "file:" + path + "?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(" + mode + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite baseline: %w", err)
	}
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{
		`CREATE TABLE aggregates (id TEXT PRIMARY KEY, version INTEGER NOT NULL)`,
		`CREATE TABLE events (aggregate TEXT NOT NULL, version INTEGER NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (aggregate, version))`,
		`CREATE TABLE outbox (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, payload BLOB NOT NULL, done INTEGER NOT NULL DEFAULT 0)`,
		`CREATE INDEX outbox_pending ON outbox (done, id)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite baseline: %s: %w", stmt, err)
		}
	}
	return &sqliteOutbox{db: db}, nil
}

func (s *sqliteOutbox) Close() error { return s.db.Close() }

// decide is one decision on aggregate id: read the version, insert the
// event and one outbox row, bump the version, in one transaction.
func (s *sqliteOutbox) decide(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: a no-op
	var v int64
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM aggregates WHERE id = ?`, id).Scan(&v); {
	case err == sql.ErrNoRows:
		if _, err := tx.ExecContext(ctx, `INSERT INTO aggregates (id, version) VALUES (?, 0)`, id); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (aggregate, version, type, data, at) VALUES (?, ?, 'deposited', ?, ?)`,
		id, v+1, depositBody, time.Now().UnixNano()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (kind, payload) VALUES ('notify', ?)`, depositBody); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE aggregates SET version = ? WHERE id = ? AND version = ?`, v+1, id, v); err != nil {
		return err
	}
	return tx.Commit()
}

// fill marks every pending row done (untimed) and inserts n fresh ones in
// one transaction: the batch one dispatch round drains.
func (s *sqliteOutbox) fill(ctx context.Context, n int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `UPDATE outbox SET done = 1 WHERE done = 0`); err != nil {
		return err
	}
	for range n {
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (kind, payload) VALUES ('charge', ?)`, depositBody); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// dispatch drains n pending rows: read up to 100 at a time, run the no-op
// effect, mark each one done in its own commit (a crash re-runs at most the
// row in flight). It returns the time it took.
func (s *sqliteOutbox) dispatch(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	done := 0
	for done < n {
		rows, err := s.db.QueryContext(ctx, `SELECT id, payload FROM outbox WHERE done = 0 ORDER BY id LIMIT 100`)
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			var payload []byte
			if err := rows.Scan(&id, &payload); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id) // the effect: a no-op, as the workers' handler

		}
		rows.Close()
		if len(ids) == 0 {
			return 0, fmt.Errorf("sqlite dispatcher: %d of %d rows found", done, n)
		}
		for _, id := range ids {
			if _, err := s.db.ExecContext(ctx, `UPDATE outbox SET done = 1 WHERE id = ?`, id); err != nil {
				return 0, err
			}
			done++
		}
	}
	return time.Since(start), nil
}

// setupSQLite opens the baseline in a temporary directory (beside the
// embedded node's, on the same disk) and returns its clean-up.
func (e *env) setupSQLite() (func(), error) {
	dir, err := os.MkdirTemp("", "esjet-bench-sqlite-")
	if err != nil {
		return nil, err
	}
	db, err := openSQLite(dir, e.cfg.NATS.Embedded.Sync)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e.sqlite = db
	return func() { db.Close(); os.RemoveAll(dir) }, nil
}

// sqliteID is aggregate a's id on the SQLite side.
func sqliteID(a int) string { return "a" + strconv.Itoa(a) }
