package servertest

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module/web"
)

// The console names the test batches' and jobs' kinds like a module's.
func init() {
	web.RegisterBatchKinds(map[string][2]string{"servertest.items": {"测试条目批次", "Test item batch"}})
	web.RegisterJobKinds(map[string][2]string{
		"test.noop":       {"测试空任务", "Test no-op job"},
		"test.batch_item": {"测试条目", "Test item"},
	})
	web.RegisterFields("test", map[string][2]string{"n": {"序号", "Number"}, "subject": {"条目", "Subject"}})
}

// ItemArgs is the job kind of test batch items (no worker runs it).
type ItemArgs struct {
	Subject string `json:"subject"`
}

// Kind names the item kind.
func (ItemArgs) Kind() string { return "test.batch_item" }

// itemTable is a module's subject table in the test database: one row per
// record, filtered by a tag.
type itemTable struct {
	db      *sql.DB
	once    sync.Once
	initErr error
	seq     int
	mu      sync.Mutex
}

type itemFilter struct {
	Tag string `json:"tag"`
}

type itemRow struct {
	id, app string
	at      int64
}

func (tb *itemTable) init(ctx context.Context) error {
	tb.once.Do(func() {
		_, tb.initErr = tb.db.ExecContext(ctx, `CREATE TABLE servertest_item (id text PRIMARY KEY, tag text NOT NULL, app text NOT NULL, created_at bigint NOT NULL)`)
	})
	return tb.initErr
}

// rows reads every row of the tag created by snapshot, before any emit
// (so SQLite's writer is free while items are inserted).
func (tb *itemTable) rows(ctx context.Context, f itemFilter, snapshot time.Time) ([]itemRow, error) {
	rs, err := tb.db.QueryContext(ctx, `SELECT id, app, created_at FROM servertest_item WHERE tag = $1 AND created_at <= $2 ORDER BY id`,
		f.Tag, snapshot.UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []itemRow
	for rs.Next() {
		var r itemRow
		if err := rs.Scan(&r.id, &r.app, &r.at); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// itemSource is the BatchSource over the table.
type itemSource struct{ tb *itemTable }

func (itemSource) Kind() string { return "servertest.items" }

func (s itemSource) Preview(ctx context.Context, f itemFilter, snapshot time.Time) (*keel.BatchPreview, error) {
	rows, err := s.tb.rows(ctx, f, snapshot)
	if err != nil {
		return nil, err
	}
	pv := &keel.BatchPreview{Hits: int64(len(rows)), Eligible: int64(len(rows)), ByState: map[string]int64{"failed": int64(len(rows))}}
	apps := map[string]bool{}
	for _, r := range rows {
		apps[r.app] = true
		if t := time.UnixMicro(r.at).UTC(); pv.Earliest == nil || t.Before(*pv.Earliest) {
			pv.Earliest = &t
		}
	}
	pv.DistinctKeys = int64(len(apps))
	return pv, nil
}

func (s itemSource) Subjects(ctx context.Context, f itemFilter, snapshot time.Time, emit func(string, string, keel.JobArgs) error) error {
	rows, err := s.tb.rows(ctx, f, snapshot)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := emit(r.id, r.app, ItemArgs{Subject: r.id}); err != nil {
			return err
		}
	}
	return nil
}

func (tb *itemTable) createBatch(ctx context.Context, c batchClient, actor, reason string, n int) (int64, error) {
	if err := tb.init(ctx); err != nil {
		return 0, err
	}
	tb.mu.Lock()
	tb.seq++
	tag := fmt.Sprintf("t%d", tb.seq)
	tb.mu.Unlock()
	at := time.Now().Add(-time.Second).UnixMicro()
	for i := range n {
		if _, err := tb.db.ExecContext(ctx, `INSERT INTO servertest_item (id, tag, app, created_at) VALUES ($1, $2, $3, $4)`,
			fmt.Sprintf("%s-s%03d", tag, i+1), tag, fmt.Sprintf("app:%d", i%3+1), at); err != nil {
			return 0, err
		}
	}
	return c.create(keel.WithActor(ctx, actor), itemSource{tb: tb}, itemFilter{Tag: tag}, reason)
}

// batchClient hides the driver's transaction type.
type batchClient interface {
	create(ctx context.Context, src itemSource, f itemFilter, reason string) (int64, error)
}

type clientOf[TTx any] struct{ c *keel.Client[TTx] }

func (k clientOf[TTx]) create(ctx context.Context, src itemSource, f itemFilter, reason string) (int64, error) {
	pv, err := keel.BatchPreviewOf(ctx, k.c, src, f)
	if err != nil {
		return 0, err
	}
	b, err := keel.BatchCreate(ctx, k.c, src, pv.Token, keel.BatchOpts{Name: "servertest " + f.Tag, Reason: reason, Rate: 1})
	if err != nil {
		return 0, err
	}
	return b.ID, nil
}
