package keel

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// TestLimitCacheRefreshDoesNotHoldCallers: the refresh of the flow-limit
// cache needs a pool connection, and some callers of the cache already
// hold one (a claim's or a settle's transaction). Here the pool has one
// connection: the transaction holds it and asks for the limits while a
// refresh waits for it. The transaction gets the last set at once and
// ends, and the refresh then gets the connection. With the cache's lock
// held through the load, both waited for ever, as a delivery test's
// eight-connection pool once did.
func TestLimitCacheRefreshDoesNotHoldCallers(t *testing.T) {
	t.Parallel()
	pool := make(chan struct{}, 1) // one connection
	loading := make(chan struct{}, 1)
	c := &limitCache{load: func(ctx context.Context) ([]*keeltype.FlowLimit, error) {
		select {
		case loading <- struct{}{}:
		default:
		}
		select {
		case pool <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { <-pool }()
		return []*keeltype.FlowLimit{{Pattern: "app:1", Rate: 5}}, nil
	}}
	ctx := context.Background()
	if _, err := c.get(ctx); err != nil {
		t.Fatal(err)
	}
	<-loading
	c.invalidate()

	pool <- struct{}{} // the transaction takes the connection
	refreshed := make(chan error, 1)
	go func() { _, err := c.get(ctx); refreshed <- err }()
	<-loading // the refresh waits for the connection
	txDone := make(chan *limitSet, 1)
	go func() {
		set, _ := c.get(ctx) // inside the transaction
		txDone <- set
	}()
	select {
	case set := <-txDone:
		if set == nil || set.match("app:1", "default") == nil {
			t.Fatalf("the transaction got %v, want the last set with app:1", set)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a caller holding the only connection waited on the cache while its refresh waited for that connection")
	}
	<-pool // the transaction ends
	select {
	case err := <-refreshed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh never got the connection back")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loading != 0 || c.fetched.IsZero() {
		t.Fatalf("after the refresh: loading %d, fetched %v", c.loading, c.fetched)
	}
}
