package export

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// consumeNotices delivers completion notices to the in-site notice box.
// It is a consumer of the outbox event the publish wrote: its failures are
// retried by the events backbone and never touch the task's state.
func (m *Module[TTx]) consumeNotices() error {
	return m.events.Consume(keelevents.Consumer[TTx]{
		Name:   "export-notice",
		Topics: []string{TopicCompleted},
		// Its own retries: a failing notice channel waits between tries
		// and never touches the export.
		Backoff:     []time.Duration{m.set.noticeRetry},
		MaxAttempts: 1000,
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			var p struct {
				Task int64  `json:"task"`
				User string `json:"user"`
				Rows int64  `json:"rows"`
			}
			if err := json.Unmarshal(d.Payload, &p); err != nil {
				return fmt.Errorf("export notice: %w", err)
			}
			if m.hooks.Notice != nil {
				if err := m.hooks.Notice(p.Task); err != nil {
					return err
				}
			}
			body := fmt.Sprintf("导出 %d 已完成：%d 行，可在导出中心下载。", p.Task, p.Rows)
			if _, err := tx.Exec(ctx, m.q.Get("NoticeInsert"), p.Task, p.User, body, m.Now()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, m.q.Get("TaskNotice"), p.Task, "delivered")
			return err
		},
	})
}

// Notices counts the notices delivered for a task.
func (m *Module[TTx]) Notices(ctx context.Context, task int64) (int64, error) {
	var n int64
	err := m.DB.QueryRow(ctx, m.q.Get("NoticeCount"), task).Scan(&n)
	return n, err
}
