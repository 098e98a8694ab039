package reservation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// AvailabilityConsumer is the durable name of the module's consumer of
// availability events, which hands them to the Publisher.
const AvailabilityConsumer = "reservation-availability"

func (m *Module[TTx]) availabilityConsumer() keelevents.Consumer[TTx] {
	return keelevents.Consumer[TTx]{
		Name: AvailabilityConsumer, Topics: []string{AvailabilityTopic}, Ordered: true,
		Handle: func(ctx context.Context, _ keelsql.Tx[TTx], d *keelevents.Delivery) error {
			var body struct {
				Slots []SlotAvailability `json:"slots"`
			}
			if err := json.Unmarshal(d.Payload, &body); err != nil {
				return fmt.Errorf("availability event %s: %w", d.ID, err)
			}
			return m.opt.publisher.Publish(ctx, []Event{{ID: d.ID, Slots: body.Slots, At: d.EmittedAt}})
		},
	}
}
