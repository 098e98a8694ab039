package export

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
)

// Group puts the export centre under data services in the console.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "数据服务", EN: "Data services", Order: 60}
}

// Home: exports running, the oldest running one's age, the heap against
// its watermark.
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	var n int64
	var oldest *time.Time
	if err := m.DB.QueryRow(ctx, m.q.Get("HomeStats")).Scan(&n, &oldest); err != nil {
		return nil, fmt.Errorf("export: home numbers: %w", err)
	}
	age := 0.0
	if oldest != nil {
		age = m.Now().Sub(*oldest).Minutes()
	}
	ageLevel := module.LevelOK
	if age > 60 {
		ageLevel = module.LevelWarn
	}
	heap := float64(m.heap()) / (1 << 20)
	wm := float64(m.watermark.Load()) / (1 << 20)
	heapLevel := module.LevelOK
	switch {
	case m.paused.Load():
		heapLevel = module.LevelBad
	case heap > 0.8*wm:
		heapLevel = module.LevelWarn
	}
	return []module.Stat{
		{Key: "export_running", ZH: "进行中的导出", EN: "Exports running", Value: float64(n), UnitZH: "个", UnitEN: "tasks", Link: "/exports"},
		{Key: "export_oldest", ZH: "最老进行中导出", EN: "Oldest running export", Value: age, UnitZH: "分钟", UnitEN: "min", Level: ageLevel, Link: "/exports"},
		{Key: "export_heap", ZH: fmt.Sprintf("导出堆内存（水位 %.0f MiB）", wm), EN: fmt.Sprintf("Export heap (watermark %.0f MiB)", wm), Value: heap, UnitZH: "MiB", UnitEN: "MiB", Level: heapLevel},
	}, nil
}

// Search finds an export task by id ("42" or "export:42").
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	q = strings.TrimPrefix(strings.TrimSpace(q), "export:")
	id, err := strconv.ParseInt(q, 10, 64)
	if err != nil || id <= 0 {
		return nil, nil
	}
	t, err := m.Task(ctx, id)
	if err != nil {
		return nil, nil
	}
	return []module.Hit{{KindZH: "导出任务", KindEN: "Export task", Title: fmt.Sprintf("#%d %s · %s", t.ID, t.Tenant, t.Format), Path: fmt.Sprintf("/exports/%d", t.ID)}}, nil
}

var (
	_ module.Grouper  = (*Module[any])(nil)
	_ module.Homer    = (*Module[any])(nil)
	_ module.Searcher = (*Module[any])(nil)
)
