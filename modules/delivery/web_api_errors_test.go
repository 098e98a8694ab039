package delivery

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/module"
)

// TestRequeueRefusalIsAProblem: a single-record requeue that is refused
// (the record awaits its ACK, or is unknown) is an error with a stable
// code, written as problem+json, not a 409 JSON answer.
func TestRequeueRefusalIsAProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	i := e.start(testSettings("cmpp_addr", "off"))
	a := e.app(i, e.enterprise(i, "Acme"), "api", "c101", ProtoCMPP30, "")
	rec := e.seed(i, a, StatusAwaitingACK, time.Now().Add(-time.Minute), "13800000001")
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{PathDeliveries + "/" + itoa(rec.ID) + "/requeue", http.StatusConflict, "requeue_refused"},
		{PathDeliveries + "/99999999/requeue", http.StatusNotFound, "delivery_not_found"},
	} {
		_, body, err := callRoute(t, i.m.apiRequeueOne, "POST", c.path, `{"reason":"customer asked again"}`)
		me, ok := err.(*module.Error)
		if !ok || me.Status != c.status || me.Code != c.code || strings.Contains(me.Detail, "keel") {
			t.Errorf("POST %s: body %v, error %#v; want a %d %s problem", c.path, body, err, c.status, c.code)
		}
	}
}
