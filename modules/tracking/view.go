package tracking

import (
	"context"
	"errors"
	"fmt"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/store"
)

// CustomerView is what a customer is shown of a waybill.
func (m *Module[TTx]) CustomerView(ctx context.Context, carrier, waybill string) (domain.View, error) {
	if _, err := m.carrier(carrier); err != nil {
		return domain.View{}, err
	}
	w, err := m.store.GetWaybill(ctx, nil, carrier, waybill)
	if errors.Is(err, store.ErrNotFound) {
		return domain.View{}, fmt.Errorf("%w: no waybill %s of %s", keeltype.ErrNotFound, waybill, carrier)
	}
	if err != nil {
		return domain.View{}, err
	}
	gaps, err := m.store.Gaps(ctx, nil, carrier, waybill)
	if err != nil {
		return domain.View{}, err
	}
	open := 0
	for _, g := range gaps {
		if g.ClosedAt == nil {
			open++
		}
	}
	h, err := m.health(ctx, carrier)
	if err != nil {
		return domain.View{}, err
	}
	return domain.ViewOf(w.State, w.UpdatedAt, w.VerifiedAt, open, h.Degraded()), nil
}
