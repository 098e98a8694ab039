//go:build race

package export

// raceOn: the race detector slows the 2,000,000- and 1,200,000-row tests
// about tenfold; under it they run at a tenth of the size (docs/export.md).
const raceOn = true
