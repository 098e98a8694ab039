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
			return cli.KeysList(ctx, c, o, "", false, false, 50, "")
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
