package delivery

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
)

// The delivery system in the console's navigation, its home numbers and
// its lookups by id (module.Grouper, Homer, Searcher).
var (
	_ module.Grouper  = (*Module[any])(nil)
	_ module.Homer    = (*Module[any])(nil)
	_ module.Searcher = (*Module[any])(nil)
)

// Group implements module.Grouper.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "投递", EN: "Delivery", Order: 20}
}

// Home implements module.Homer: records awaiting the customer's ACK, how
// long the oldest undelivered record has waited, and the applications
// auto-paused in live requeue tasks.
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	awaiting, err := m.st.countAwaitingACK(ctx)
	if err != nil {
		return nil, err
	}
	oldest := 0.0
	if since, ok, err := m.st.oldestWaiting(ctx); err != nil {
		return nil, err
	} else if ok {
		oldest = max(0, time.Since(since).Seconds())
	}
	paused, err := m.autoPausedApps(ctx)
	if err != nil {
		return nil, err
	}
	level := func(bad bool, warn bool) module.Level {
		switch {
		case bad:
			return module.LevelBad
		case warn:
			return module.LevelWarn
		}
		return module.LevelOK
	}
	return []module.Stat{
		{Key: "awaiting_ack", ZH: "等待 ACK", EN: "Awaiting ACK", Value: float64(awaiting), UnitZH: "条", UnitEN: "records",
			Level: level(false, awaiting > 0), Link: "/delivery/records?status=" + string(StatusAwaitingACK)},
		{Key: "oldest_waiting_s", ZH: "最久未完成投递", EN: "Oldest waiting", Value: float64(int64(oldest)), UnitZH: "秒", UnitEN: "s",
			Level: level(oldest > 3600, oldest > 300), Link: "/delivery/records?status=" + string(StatusPending)},
		{Key: "auto_paused_apps", ZH: "自动暂停的应用", EN: "Auto-paused applications", Value: float64(paused), UnitZH: "个", UnitEN: "apps",
			Level: level(paused > 0, false), Link: "/delivery/tasks"},
	}, nil
}

// autoPausedApps counts the applications whose key a live requeue task
// paused after consecutive failures (each counted once).
func (m *Module[TTx]) autoPausedApps(ctx context.Context) (int, error) {
	c := m.client.Load()
	if c == nil {
		return 0, nil
	}
	m.mu.Lock()
	tasks := append([]int64(nil), m.tasks...)
	m.mu.Unlock()
	apps := map[int64]bool{}
	for _, id := range tasks {
		keys, err := c.BatchKeys(ctx, id, "", 1000)
		if err != nil {
			return 0, fmt.Errorf("delivery: reading the keys of task %d: %w", id, err)
		}
		for _, k := range keys {
			if k.PausedAt != nil && strings.HasPrefix(k.PauseReason, "auto") {
				if app, ok := appOfKey(k.Key); ok {
					apps[app] = true
				}
			}
		}
	}
	return len(apps), nil
}

// Search implements module.Searcher: a record id, or a message id (the
// customer's Msg_Id, which a report and its MO share).
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	var ids []int64
	if id, err := strconv.ParseInt(q, 10, 64); err == nil && id > 0 {
		switch _, err := m.st.record(ctx, id); {
		case err == nil:
			ids = append(ids, id)
		case !isNoRows(err):
			return nil, err
		}
	}
	if len(q) <= 64 {
		byMsg, err := m.st.recordIDsByMsgID(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("delivery: looking up message %q: %w", q, err)
		}
		for _, id := range byMsg {
			if len(ids) < 20 && (len(ids) == 0 || ids[0] != id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	recs, err := m.st.recordsByIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("delivery: reading records: %w", err)
	}
	out := make([]module.Hit, 0, len(recs))
	for _, r := range recs {
		out = append(out, module.Hit{Kind: "delivery_record", KindZH: "投递记录", KindEN: "delivery record",
			Title:   fmt.Sprintf("#%d · %s · %s", r.ID, r.MsgID, Label("zh", "status."+string(r.Status))),
			TitleEN: fmt.Sprintf("#%d · %s · %s", r.ID, r.MsgID, Label("en", "status."+string(r.Status))),
			Path:    "/delivery/records/" + strconv.FormatInt(r.ID, 10)})
	}
	return out, nil
}
