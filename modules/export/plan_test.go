package export

import (
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: a shard's completion and the merge's steps read
// their task by primary key, on a table analyzed while no task ran (every
// export done) and read after many started. With a plain state test the
// generic plan served them from export_tasks_open_idx (state,
// created_at), whose state the statistics show rare, walking every
// running task for the one named, once per shard.
func TestPlansAfterAnalyze(t *testing.T) {
	key := []string{"export_tasks_pkey"}
	moduletest.RequireKeyLookups(t, testLines, queryFiles, []string{
		`INSERT INTO export_tasks (tenant, user_id, params, params_digest, permissions, data_version, idem_key, format,
		     gzip, bom, range_lo, range_hi, estimated_rows, shard_count, state, created_at, updated_at)
		 SELECT 't', 'u', '{}', 'd', 'p', 1, 'k' || g, 'csv', false, false, 0, 1, 1, 1, 'done', now(), now()
		 FROM generate_series(1, 20000) g`,
		`ANALYZE export_tasks`,
		`UPDATE export_tasks SET state = (ARRAY['running', 'merging'])[1 + id % 2]`,
	},
		moduletest.Lookup{Statement: "TaskShardDone", Relation: "export_tasks", Keys: key},
		moduletest.Lookup{Statement: "TaskPublish", Relation: "export_tasks", Keys: key},
		moduletest.Lookup{Statement: "TaskMergeBump", Relation: "export_tasks", Keys: key})
}
