package testdb

import (
	"os"
	"testing"
)

// EnvSQLiteApart names the environment variable by which scripts/test.sh
// runs the SQLite half of the modules' two-driver tests in a step of its
// own, without the race detector:
//
//   - unset: a two-driver test runs on both databases;
//   - "skip": the main (-race) step; a two-driver test runs on PostgreSQL
//     only and says where its SQLite run went;
//   - "only": the SQLite step; every test that asks for PostgreSQL skips.
//
// Why: the detector instruments modernc's SQLite (C translated to Go) so
// heavily that on a 2-core machine the modules' SQLite runs were a large
// share of the -race step's CPU, while the module code they run is the
// code their PostgreSQL runs check for races (the SQLite driver's own
// tests, and the engine's conformance suite on SQLite, stay under -race).
const EnvSQLiteApart = "KEEL_TEST_SQLITE_APART"

// SQLiteApart returns EnvSQLiteApart's value: "", "skip" or "only".
func SQLiteApart() string {
	switch v := os.Getenv(EnvSQLiteApart); v {
	case "skip", "only":
		return v
	default:
		return ""
	}
}

// skipPostgresInSQLiteStep skips t in the SQLite step: its PostgreSQL
// runs belong to the main step.
func skipPostgresInSQLiteStep(t testing.TB) {
	if SQLiteApart() == "only" {
		t.Helper()
		t.Skipf("%s=only: PostgreSQL runs are the main step's", EnvSQLiteApart)
	}
}
