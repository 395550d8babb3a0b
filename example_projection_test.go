package esjet_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite: database/sql driver "sqlite"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// sqlSpend is a view in your own database: requests per traveler in a SQL
// table, the projection's position in the same transaction, moved only
// from the position this owner read (the fence: another owner's write in
// between makes the UPDATE match no row).
type sqlSpend struct{ db *sql.DB }

func (s sqlSpend) init(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `
		CREATE TABLE IF NOT EXISTS spend (traveler TEXT PRIMARY KEY, requested INTEGER NOT NULL, budget INTEGER NOT NULL);
		CREATE TABLE IF NOT EXISTS checkpoint (name TEXT PRIMARY KEY, position INTEGER NOT NULL);
		INSERT OR IGNORE INTO checkpoint VALUES ('spend', 0);`)
	return err
}

func (s sqlSpend) Position(ctx context.Context) (uint64, error) {
	var p uint64
	err := s.db.QueryRowContext(ctx, `SELECT position FROM checkpoint WHERE name = 'spend'`).Scan(&p)
	return p, err
}

func (s sqlSpend) Apply(ctx context.Context, from, to uint64, events []esjet.ProjectionEvent) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, e := range events {
		var r trip.TripRequested
		if err := e.Decode(&r); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO spend VALUES (?, 1, ?)
			ON CONFLICT (traveler) DO UPDATE SET requested = requested + 1, budget = budget + excluded.budget`, r.Traveler, r.Budget); err != nil {
			return err
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE checkpoint SET position = ? WHERE name = 'spend' AND position = ?`, to, from)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: the position moved from %d under this owner", esjet.ErrViewFenced, from)
	}
	return tx.Commit()
}

// TestSQLSinkProjectsEachEventOnceAcrossRestarts: the SQL view counts every
// request exactly once, across a restart of the node in between, and its
// position is in the same database.
func TestSQLSinkProjectsEachEventOnceAcrossRestarts(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "views.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	sink := sqlSpend{db: db}
	if err := sink.init(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg := esjettest.Config(t)
	cfg.Demo.Services = false
	view := esjet.Projection{Name: "sql_spend", AggregateTypes: []string{trip.Type}, EventTypes: []string{trip.EventTripRequested}, Sink: sink}
	start := func() *esjet.Node {
		n, err := esjet.Start(t.Context(), esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()}, Projections: []esjet.Projection{view}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	request := func(n *esjet.Node, id, traveler string) esjet.Result {
		res, err := n.Send(t.Context(), trip.Type, id, trip.KindRequestTrip, json.RawMessage(
			fmt.Sprintf(`{"traveler":%q,"destination":"Oslo","budget":1000,"flight_price":400,"hotel_price":300}`, traveler)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	waitFor := func(pos uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if p, _ := sink.Position(t.Context()); p >= pos {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the SQL view did not reach position %d", pos)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	n := start()
	request(n, "s1", "ada")
	waitFor(request(n, "s2", "ada").Position)
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	n = start()
	defer n.Close(context.Background())
	waitFor(request(n, "s3", "bob").Position)
	rows := map[string][2]int64{}
	for _, who := range []string{"ada", "bob"} {
		var req, budget int64
		if err := db.QueryRowContext(t.Context(), `SELECT requested, budget FROM spend WHERE traveler = ?`, who).Scan(&req, &budget); err != nil {
			t.Fatal(err)
		}
		rows[who] = [2]int64{req, budget}
	}
	if rows["ada"] != [2]int64{2, 2000} || rows["bob"] != [2]int64{1, 1000} {
		t.Fatalf("spend rows: %v, want ada 2 requests 2000, bob 1 request 1000", rows)
	}
}

// A view in your own SQL database: the events and the projection's position
// are written in one transaction (sqlSpend above), so each event counts
// once, across restarts and owner changes.
func ExampleProjection_sql() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "esjet-example-sql-")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "views.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	sink := sqlSpend{db: db}
	if err := sink.init(ctx); err != nil {
		fmt.Println(err)
		return
	}

	cfg := esjet.DefaultConfig()
	cfg.NATS.Embedded.DataDir = filepath.Join(dir, "data")
	cfg.NATS.Embedded.Listen = "none" // in-process only
	cfg.HTTP.Listen = "none"
	cfg.Demo.Services = false
	node, err := esjet.Start(ctx, esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()},
		Projections: []esjet.Projection{{Name: "spend", AggregateTypes: []string{trip.Type},
			EventTypes: []string{trip.EventTripRequested}, Sink: sink}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Close(ctx)

	res, err := node.Send(ctx, trip.Type, "t1", trip.KindRequestTrip, json.RawMessage(
		`{"traveler":"ada","destination":"Oslo","budget":1000,"flight_price":400,"hotel_price":300}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if p, _ := sink.Position(ctx); p >= res.Position {
			break
		}
	}
	var requested, budget int
	err = db.QueryRowContext(ctx, `SELECT requested, budget FROM spend WHERE traveler = 'ada'`).Scan(&requested, &budget)
	fmt.Println(requested, budget, err)
	// Output: 1 1000 <nil>
}
