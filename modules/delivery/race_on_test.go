//go:build race

package delivery

// raceEnabled: the race detector instruments modernc's SQLite (C compiled
// to Go) so heavily that the requeue tests' SQLite subtests measure the
// instrumentation, not the module; scripts/test.sh runs them without it.
const raceEnabled = true
