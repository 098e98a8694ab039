package alarm

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
)

// ReconName is the severe-delivery reconciler's name.
const ReconName = "alarm.severe"

// reconciler proves that every severe instance's notice reached its
// channel or a person took it over (acknowledged it, or took its ticket);
// a muted one (a silence) is reported apart, as are the aggregated,
// sampled and shed counts.
type reconciler[TTx any] struct{ m *Module[TTx] }

func (r *reconciler[TTx]) Name() string            { return ReconName }
func (r *reconciler[TTx]) RuleVersion() string     { return "1" }
func (r *reconciler[TTx]) Schedule() keel.Schedule { return nil }

// Run compares every severe instance first received before the cutoff.
func (r *reconciler[TTx]) Run(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	res, err := r.m.ReconcileSevere(ctx, in.Cutoff)
	if err != nil {
		return out, err
	}
	out.Compared = int64(res.Compared)
	for _, u := range res.Undelivered {
		ev, _ := json.Marshal(u)
		out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.MissingTheirs, Key: u.Instance,
			Evidence: map[string]json.RawMessage{"ours": ev}, SuggestedAction: "严重告警未送达且无人接管：立即电话通知值班"})
	}
	return out, nil
}

func (r *reconciler[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	return errors.New("severe delivery gaps are handled by a person: call the on-call engineer")
}
