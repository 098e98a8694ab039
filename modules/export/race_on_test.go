//go:build race

package export

// raceOn: the race detector slows the 2,000,000- and 1,200,000-row tests
// about tenfold; under it they run at a tenth of the size on PostgreSQL,
// and their SQLite halves, whose C it instruments, not at all: make test
// runs both databases at full size without it (docs/export.md).
const raceOn = true
