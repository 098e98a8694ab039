package inventory

import "github.com/keelwork/keel/keelsql"

type scanner interface{ Scan(dest ...any) error }

func collect[T any](rows keelsql.Rows, err error, f func(scanner) (T, error)) ([]T, error) {
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (T, error) { return f(r) })
}
