package module_test

import (
	"context"
	"fmt"
	"time"

	"github.com/keelwork/keel/module"
)

// A module reads its settings with their defaults and ranges; a typo or a
// value out of range refuses the start with a sentence naming the key.
func ExampleSettings() {
	s := module.NewSettings("notes", map[string]string{"notes.remind_after": "90m", "notes.batch_sise": "10"})
	remind := s.Duration("remind_after", time.Hour, time.Minute, 24*time.Hour)
	batch := s.Int("batch_size", 100, 1, 1000)
	fmt.Println(remind, batch)
	fmt.Println(s.Err())
	// Output:
	// 1h30m0s 100
	// unknown setting "notes.batch_sise" (notes has batch_size, remind_after)
}

// A module's background work runs in one Lifecycle: Stop cancels the run
// and waits for every goroutine Go started.
func ExampleLifecycle() {
	var life module.Lifecycle
	ctx := context.Background()
	if _, err := life.Start(ctx); err != nil {
		panic(err)
	}
	stopped := make(chan string, 1)
	life.Go(func(run context.Context) {
		<-run.Done() // a loop would select on this beside its ticker
		stopped <- "the loop saw the stop"
	})
	if err := life.Stop(ctx); err != nil {
		panic(err)
	}
	fmt.Println(<-stopped)
	fmt.Println("running:", life.Running())
	// Output:
	// the loop saw the stop
	// running: false
}
