package keel

import (
	"context"

	"github.com/keelwork/keel/keeltype"
)

// FlowLimitSetTx creates or replaces a limit inside the caller's
// transaction tx, for a module whose own audited change implies the limit
// (an application's rate is its key's limit): the module's audit entry, in
// the same transaction, covers it, so none is written here, and a refused
// limit rolls the module's change back with it. Other instances reload
// limits when notified (sent now, so at worst they apply it on their next
// periodic reload, within a second).
func (c *Client[TTx]) FlowLimitSetTx(ctx context.Context, tx TTx, l *keeltype.FlowLimit) (*keeltype.FlowLimit, error) {
	if err := ValidateFlowLimit(l); err != nil {
		return nil, err
	}
	if l.Weight == 0 {
		l.Weight = 1
	}
	l.UpdatedBy = ActorFrom(ctx)
	out, err := flowExec(c.driver.UnwrapExecutor(tx)).FlowLimitUpsert(ctx, l)
	if err != nil {
		return nil, err
	}
	c.flowChanged(ctx, "limits")
	return out, nil
}
