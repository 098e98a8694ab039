package module_test

import (
	"context"
	"database/sql"
	"embed"
	"io/fs"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

// notes is the module docs/modules.md walks through: a note is written
// with its reminder job in one transaction, and the reminder marks it by a
// conditional update. It is compiled and run here on both databases, so
// the walk-through cannot rot.

//go:embed testdata/notes
var notesFiles embed.FS

// NotesLines are the module's migration lines.
func NotesLines(dialect string) []keelmigrate.Line {
	sub, err := fs.Sub(notesFiles, "testdata/notes/migrations/"+dialect)
	if err != nil {
		return nil
	}
	return []keelmigrate.Line{{Name: "notes", FS: sub}}
}

type RemindArgs struct {
	NoteID int64 `json:"note_id"`
}

func (RemindArgs) Kind() string { return "notes.remind" }

type Notes[TTx any] struct {
	*module.Base[TTx]
	q     sqlfile.Set
	after time.Duration
}

func NewNotes[TTx any](h *module.Host[TTx]) (*Notes[TTx], error) {
	b, err := module.NewBase("notes", h)
	if err != nil {
		return nil, err
	}
	q, err := b.Queries(notesFiles, "testdata/notes/queries")
	if err != nil {
		return nil, err
	}
	s := b.Settings()
	after := s.Duration("remind_after", time.Hour, 0, 30*24*time.Hour)
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &Notes[TTx]{Base: b, q: q, after: after}, nil
}

func (n *Notes[TTx]) Name() string                   { return "notes" }
func (n *Notes[TTx]) Lines() []keelmigrate.Line      { return NotesLines(n.DB.Dialect()) }
func (n *Notes[TTx]) Routes() []module.Route         { return nil }
func (n *Notes[TTx]) Pages() []module.Page           { return nil }
func (n *Notes[TTx]) Nav() []module.NavItem          { return nil }
func (n *Notes[TTx]) Stop(ctx context.Context) error { return n.Life.Stop(ctx) }

func (n *Notes[TTx]) Configure(cfg *keel.Config) error {
	return keel.AddWorkerSafely[RemindArgs](cfg.Workers, keel.WorkerFunc[RemindArgs](n.remind))
}

func (n *Notes[TTx]) Start(ctx context.Context, c *keel.Client[TTx]) error { return n.Bind(c) }

// Add writes a note and its reminder in one transaction.
func (n *Notes[TTx]) Add(ctx context.Context, body string) (int64, error) {
	c, err := n.Client()
	if err != nil {
		return 0, err
	}
	var id int64
	err = n.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		due := n.Now().Add(n.after)
		if err := tx.QueryRow(ctx, n.q.Get("NoteInsert"), body, due).Scan(&id); err != nil {
			return err
		}
		_, err := c.InsertTx(ctx, tx.Native(), RemindArgs{NoteID: id}, &keel.InsertOpts{RunAt: due})
		return err
	})
	return id, err
}

func (n *Notes[TTx]) remind(ctx context.Context, job *keel.Job[RemindArgs]) error {
	_, err := n.DB.Exec(ctx, n.q.Get("NoteRemind"), job.Args.NoteID, n.Now())
	return err
}

// The descriptor: installing the module in the binary is adding this to
// internal/cli/modules.go's list.
var NotesDescriptor = module.Descriptor{
	Name:     "notes",
	Lines:    NotesLines,
	Postgres: module.Constructor(NewNotes[pgx.Tx]),
	SQLite:   module.Constructor(NewNotes[*sql.Tx]),
}

func TestNotesModule(t *testing.T) {
	moduletest.Each(t, NotesLines, testNotes[pgx.Tx], testNotes[*sql.Tx])
}

func testNotes[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	e.Clock.Set(time.Now()) // the engine runs jobs when their run_at passes on the real clock
	m, err := module.Build(&NotesDescriptor, e.Host(map[string]string{"notes.remind_after": "0s"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{Workers: keel.NewWorkers(), FetchPollInterval: 20 * time.Millisecond}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	c := e.Client(t, cfg)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if err := m.Start(ctx, c); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	notes := m.(*Notes[TTx])
	var ids []int64
	for _, body := range []string{"call the carrier", "renew the certificate"} {
		id, err := notes.Add(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	moduletest.WaitFor(t, 10*time.Second, "both reminders", func() bool {
		var n int
		err := notes.DB.QueryRow(ctx, notes.q.Get("NotesReminded"), keelsql.ArrayOf(ids)).Scan(&n)
		return err == nil && n == 2
	})
	if _, err := module.Build(&NotesDescriptor, e.Host(map[string]string{"notes.remind_afer": "1m"})); err == nil {
		t.Fatal("a misspelt setting was accepted")
	}
}
