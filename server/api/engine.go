package api

import (
	"context"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// Engine is what the admin API needs of a *keel.Client (any driver): the
// client's read and control methods, none of which depend on the driver's
// transaction type.
type Engine interface {
	JobGet(ctx context.Context, id int64) (*keeltype.JobRow, error)
	JobList(ctx context.Context, params *keel.JobListParams) ([]*keeltype.JobRow, error)
	JobFinalizedCounts(ctx context.Context, since, until time.Time) (map[keeltype.JobState]int64, error)
	JobCancel(ctx context.Context, id int64, reason string) (*keeltype.JobRow, error)
	JobRetry(ctx context.Context, id int64, reason string) (*keeltype.JobRow, error)
	JobDelete(ctx context.Context, id int64, reason string) (*keeltype.JobRow, error)

	QueueList(ctx context.Context) ([]*keeltype.QueueRow, error)
	QueueStats(ctx context.Context) ([]*keeltype.QueueStats, error)
	Ping(ctx context.Context) error
	QueuePause(ctx context.Context, queue, reason string) (*keeltype.QueueRow, error)
	QueueResume(ctx context.Context, queue, reason string) (*keeltype.QueueRow, error)

	FlowLimits(ctx context.Context) ([]*keeltype.FlowLimit, error)
	FlowLimitSet(ctx context.Context, l *keeltype.FlowLimit, reason string) (*keeltype.FlowLimit, error)
	FlowLimitDelete(ctx context.Context, pattern, queue, reason string) error
	FlowKeyGet(ctx context.Context, key string) (*keeltype.FlowKeyRow, error)
	FlowKeyList(ctx context.Context, params *keel.FlowKeyListParams) ([]*keeltype.FlowKeyRow, error)
	FlowKeyStats(ctx context.Context, keys []string) ([]*keeltype.FlowKeyStats, error)
	FlowKeyPause(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error)
	FlowKeyResume(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error)
	FlowKeyCloseBreaker(ctx context.Context, key, reason string) (*keeltype.FlowKeyRow, error)

	BatchList(ctx context.Context, params *keel.BatchListParams) ([]*keeltype.BatchRow, error)
	BatchGet(ctx context.Context, id int64) (*keeltype.BatchRow, error)
	BatchItems(ctx context.Context, params *keel.BatchItemsParams) ([]*keeltype.JobRow, error)
	BatchKeys(ctx context.Context, id int64, after string, limit int) ([]*keeltype.FlowKeyRow, error)
	BatchPause(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error)
	BatchResume(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error)
	BatchTerminate(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error)
	BatchKeyResume(ctx context.Context, id int64, key, reason string) (*keeltype.FlowKeyRow, error)

	AuditList(ctx context.Context, params *keel.AuditListParams) ([]*keeltype.AuditRow, error)
	AuditRecord(ctx context.Context, a keel.Audit) error
}

var _ Engine = (*keel.Client[any])(nil)
