package cli_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/server/servertest"
)

// TestCLIRoughEdges: `keys list` prints one aligned table even when a
// pause reason or an error holds line breaks, and `batches get` prints no
// "" for a name.
func TestCLIRoughEdges(t *testing.T) {
	t.Parallel()
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := keel.WithActor(context.Background(), "test:cli")
		b := newBatchCLI(t, e)
		if _, err := e.Engine.FlowKeyPause(ctx, "k-short", "first line\nsecond line\tand a tab"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Engine.FlowKeyPause(ctx, "a-much-longer-key-name", "maintenance window"); err != nil {
			t.Fatal(err)
		}
		out := b.must(func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.KeysList(ctx, c, o, "", false, false, true, 50, "")
		})
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		col := strings.Index(lines[0], "STATE")
		for _, l := range lines[1:] {
			if len(l) < col || l[col-1] != ' ' || l[col] == ' ' {
				t.Errorf("keys list is not one aligned table (STATE at %d):\n%s", col, out)
				break
			}
		}
		id, err := e.CreateBatch(ctx, "test:cli", "rough edges batch", 2)
		if err != nil {
			t.Fatal(err)
		}
		got := b.must(func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.BatchGet(ctx, c, o, strconv.FormatInt(id, 10))
		})
		if strings.Contains(got, `""`) {
			t.Errorf("batches get prints an empty name as \"\":\n%s", got)
		}
	})
}

// TestKeysListHidesFinishedBatches: the keys a finished batch leaves
// behind leave `keys list` (and the API's list), which shows them with
// --finished; a running batch's keys and other keys starting with "batch:"
// stay listed.
func TestKeysListHidesFinishedBatches(t *testing.T) {
	t.Parallel()
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := keel.WithActor(context.Background(), "test:cli")
		b := newBatchCLI(t, e)
		done, err := e.CreateBatch(ctx, "test:cli", "finished batch keys", 2)
		if err != nil {
			t.Fatal(err)
		}
		running, err := e.CreateBatch(ctx, "test:cli", "running batch keys", 2)
		if err != nil {
			t.Fatal(err)
		}
		doneKey := "batch:" + strconv.FormatInt(done, 10) + ":app:1"
		runningKey := "batch:" + strconv.FormatInt(running, 10) + ":app:1"
		for _, k := range []string{doneKey, runningKey, "batch:not-a-batch", "plain:key"} {
			if _, err := e.Engine.FlowKeyPause(ctx, k, "key of the list test"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Engine.BatchTerminate(ctx, done, "finished for the list test"); err != nil {
			t.Fatal(err)
		}
		list := func(finished bool) string {
			return b.must(func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.KeysList(ctx, c, o, "", false, false, finished, 50, "")
			})
		}
		out := list(false)
		if strings.Contains(out, doneKey) {
			t.Errorf("keys list shows a finished batch's key %s:\n%s", doneKey, out)
		}
		for _, k := range []string{runningKey, "batch:not-a-batch", "plain:key"} {
			if !strings.Contains(out, k) {
				t.Errorf("keys list lacks %s:\n%s", k, out)
			}
		}
		if out := list(true); !strings.Contains(out, doneKey) {
			t.Errorf("keys list --finished lacks %s:\n%s", doneKey, out)
		}
	})
}
