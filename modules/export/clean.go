package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	"gocloud.dev/blob"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

var keyTask = regexp.MustCompile(`^(?:parts|exports)/t(\d+)/`)

// CleanReport is what one cleaner pass did.
type CleanReport struct {
	Seen, Referenced, Young, Marked, Deleted int
}

func (m *Module[TTx]) workClean(ctx context.Context, _ *keel.Job[CleanArgs]) error {
	_, err := m.CleanOrphans(ctx)
	return err
}

// CleanOrphans is one pass of the orphan cleaner over the store. An object
// is an orphan when it is older than orphan_age (past the retry and manual
// windows) and no task references it: its task is finished (parts are no
// longer needed) and it is not the task's published file, and it is not
// quarantined. An orphan is marked first and deleted only on a pass at
// least orphan_grace after its mark, if still unreferenced; each deletion
// is audited. A referenced object is never deleted (checked again at the
// deletion itself).
func (m *Module[TTx]) CleanOrphans(ctx context.Context) (CleanReport, error) {
	var rep CleanReport
	c, err := m.Client()
	if err != nil {
		return rep, err
	}
	now := m.Now()
	actx := keel.WithActor(ctx, "system:export-orphan-cleaner")
	it := m.bucket.List(&blob.ListOptions{})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return rep, fmt.Errorf("export: listing objects: %w", err)
		}
		if obj.IsDir {
			continue
		}
		rep.Seen++
		ref, err := m.referenced(ctx, obj.Key)
		if err != nil {
			return rep, err
		}
		if ref {
			rep.Referenced++
			_, _ = m.DB.Exec(ctx, m.q.Get("OrphanUnmark"), obj.Key)
			continue
		}
		if now.Sub(obj.ModTime) < m.set.orphanAge {
			rep.Young++
			continue
		}
		var marked time.Time
		var deleted *time.Time
		err = m.DB.QueryRow(ctx, m.q.Get("OrphanGet"), obj.Key).Scan(&marked, &deleted)
		if errors.Is(err, keelsql.ErrNoRows) {
			if _, err := m.DB.Exec(ctx, m.q.Get("OrphanMark"), obj.Key, now); err != nil {
				return rep, err
			}
			rep.Marked++
			m.count("orphans_marked")
			continue
		}
		if err != nil {
			return rep, err
		}
		if now.Sub(marked) < m.set.orphanGrace {
			continue
		}
		if err := m.bucket.Delete(ctx, obj.Key); err != nil {
			return rep, fmt.Errorf("export: deleting orphan %s: %w", obj.Key, err)
		}
		err = m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			if _, err := tx.Exec(ctx, m.q.Get("OrphanDeleted"), obj.Key, now); err != nil {
				return err
			}
			return c.AuditRecordTx(actx, tx.Native(), keel.Audit{Action: "export.orphan_delete", Target: "object:" + obj.Key,
				Reason: reasonOrphan, Context: map[string]any{"marked_at": marked, "size": obj.Size}})
		})
		if err != nil {
			return rep, err
		}
		rep.Deleted++
		m.count("orphans_deleted")
	}
	return rep, nil
}

// referenced: the object's task still needs it, or it is quarantined, or
// it is not one of the module's keys at all (left alone).
func (m *Module[TTx]) referenced(ctx context.Context, key string) (bool, error) {
	var q int64
	if err := m.DB.QueryRow(ctx, m.q.Get("QuarantineRef"), key).Scan(&q); err != nil {
		return false, err
	}
	if q > 0 {
		return true, nil
	}
	mm := keyTask.FindStringSubmatch(key)
	if mm == nil {
		return true, nil
	}
	id, _ := strconv.ParseInt(mm[1], 10, 64)
	var state, object string
	err := m.DB.QueryRow(ctx, m.q.Get("TaskRef"), id).Scan(&state, &object)
	if errors.Is(err, keelsql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch state {
	case StateRunning, StateMerging, StateQuarantined, StateFailed:
		// Failed tasks keep their parts for a retry.
		return true, nil
	}
	return object == key, nil
}
