package eventcrash_test

import (
	"os"
	"testing"

	"github.com/keelwork/keel/keelevents/eventcrash"
)

var harness = eventcrash.Harness{Bus: "database", NewBus: eventcrash.DatabaseBus, SQLite: true}

func TestMain(m *testing.M) {
	eventcrash.Main(harness)
	os.Exit(m.Run())
}

func TestRelayKilled(t *testing.T)    { eventcrash.RelayKilled(t, harness) }
func TestConsumerKilled(t *testing.T) { eventcrash.ConsumerKilled(t, harness) }
func TestThreeRelays(t *testing.T)    { eventcrash.ThreeRelays(t, harness) }
