package export

import (
	"time"

	"github.com/keelwork/keel/module"
)

// settings are the module's instance settings (export.<key>).
type settings struct {
	shardRows    int           // shard_rows: id span of one shard, in rows of the cut
	batchRows    int           // batch_rows: rows per keyset read
	chunkRows    int           // chunk_rows: rows per committed part object
	budgetMB     int           // memory_budget_mb: memory this instance gives exports
	taskPeakMB   int           // task_peak_mb: measured peak of one running shard
	watermarkMB  int           // heap_watermark_mb: heap above which no new shard is claimed
	maxRows      int           // max_rows: largest export accepted
	userCap      int           // user_inflight: running exports per user
	tenantCap    int           // tenant_inflight: running exports per tenant
	tenantShards int           // tenant_shards: shards of one tenant running at once, all instances
	oldAfter     time.Duration // old_after: age from which a task is served from the reserved share
	oldShare     int           // old_share: percent of this instance's shard starts reserved for old tasks
	window       time.Duration // idempotency_window: a repeated request within it returns the task
	storage      string        // storage: file or s3
	dir          string        // dir: fileblob root
	s3Endpoint   string
	s3Bucket     string
	s3Region     string
	s3Key        string
	s3Secret     string
	orphanAge    time.Duration // orphan_age: retry and manual windows an object must outlive
	orphanGrace  time.Duration // orphan_grace: time between mark and delete
	orphanEvery  time.Duration
	noticeRetry  time.Duration
	demoRows     int
	mergeWorkers int
}

func readSettings(s *module.Settings) settings {
	out := settings{
		shardRows:    s.Int("shard_rows", 200_000, 1, 10_000_000),
		batchRows:    s.Int("batch_rows", 5_000, 1, 100_000),
		chunkRows:    s.Int("chunk_rows", 50_000, 1, 10_000_000),
		budgetMB:     s.Int("memory_budget_mb", 256, 1, 1<<20),
		taskPeakMB:   s.Int("task_peak_mb", 24, 1, 1<<20),
		watermarkMB:  s.Int("heap_watermark_mb", 0, 0, 1<<20),
		maxRows:      s.Int("max_rows", 20_000_000, 1, 1<<40),
		userCap:      s.Int("user_inflight", 3, 1, 1000),
		tenantCap:    s.Int("tenant_inflight", 10, 1, 100000),
		tenantShards: s.Int("tenant_shards", 64, 1, 100000),
		oldAfter:     s.Duration("old_after", 15*time.Minute, 0, 30*24*time.Hour),
		oldShare:     s.Int("old_share", 25, 0, 100),
		window:       s.Duration("idempotency_window", 10*time.Minute, 0, 24*time.Hour),
		storage:      s.OneOf("storage", "file", "file", "s3"),
		dir:          s.String("dir", ".keel/exports", nil),
		s3Endpoint:   s.String("s3_endpoint", "", nil),
		s3Bucket:     s.String("s3_bucket", "", nil),
		s3Region:     s.String("s3_region", "us-east-1", nil),
		s3Key:        s.String("s3_access_key", "", nil),
		s3Secret:     s.String("s3_secret_key", "", nil),
		orphanAge:    s.Duration("orphan_age", 48*time.Hour, 0, 365*24*time.Hour),
		orphanGrace:  s.Duration("orphan_grace", 24*time.Hour, 0, 365*24*time.Hour),
		orphanEvery:  s.Duration("orphan_interval", time.Hour, time.Second, 24*time.Hour),
		noticeRetry:  s.Duration("notice_retry", 10*time.Second, time.Millisecond, time.Hour),
		demoRows:     s.Int("demo_rows", 20_000, 0, 100_000_000),
		mergeWorkers: s.Int("merge_workers", 2, 1, 64),
	}
	if out.watermarkMB == 0 {
		out.watermarkMB = out.budgetMB
	}
	s.Check(out.storage != "s3" || (out.s3Bucket != ""), "export.s3_bucket is required with export.storage=s3")
	return out
}

// concurrency is the seed's rule: floor(budget / per-task peak) shards at
// once on this instance, never the number of cores; at least one.
func (s settings) concurrency() int {
	return max(1, s.budgetMB/s.taskPeakMB)
}
