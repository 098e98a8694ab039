package export

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelwork/keel/keelsql"
)

// The shard's hot loop: one keyset batch is read and its records appended
// to a byte buffer with no allocation per row. On PostgreSQL the rows'
// wire values are decoded in place (RawValues, valid until the next row);
// on SQLite the text columns are scanned as sql.RawBytes. The bytes are
// encoding/csv's, exactly (see appendCSVField): a part's digest, the
// settlement of an unknown upload and the crash test's independent
// digest all compare bytes.

// col is a column of the source, resolved once per task from its name.
type col uint8

const (
	colID col = iota
	colOrderNo
	colCustomer
	colAmount
	colCurrency
	colStatus
	colCreatedAt
)

func colsOf(names []string) []col {
	out := make([]col, 0, len(names))
	for _, n := range names {
		switch n {
		case "id":
			out = append(out, colID)
		case "order_no":
			out = append(out, colOrderNo)
		case "customer":
			out = append(out, colCustomer)
		case "amount_minor":
			out = append(out, colAmount)
		case "currency":
			out = append(out, colCurrency)
		case "status":
			out = append(out, colStatus)
		case "created_at":
			out = append(out, colCreatedAt)
		}
	}
	return out
}

// rawOrder is one source row whose text fields borrow the driver's
// buffers: valid only until the next row is read.
type rawOrder struct {
	id, amount                          int64
	orderNo, customer, currency, status []byte
	createdAt                           time.Time
}

// appendRecord appends o's record (the task's columns, LF-terminated).
func appendRecord(b []byte, cols []col, o *rawOrder) []byte {
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		switch c {
		case colID:
			b = strconv.AppendInt(b, o.id, 10)
		case colOrderNo:
			b = appendCSVField(b, o.orderNo)
		case colCustomer:
			b = appendCSVField(b, o.customer)
		case colAmount:
			b = strconv.AppendInt(b, o.amount, 10)
		case colCurrency:
			b = appendCSVField(b, o.currency)
		case colStatus:
			b = appendCSVField(b, o.status)
		case colCreatedAt:
			// RFC 3339 in UTC never needs quoting.
			b = o.createdAt.UTC().AppendFormat(b, time.RFC3339)
		}
	}
	return append(b, '\n')
}

// appendCSVField appends f as encoding/csv's Writer (comma, LF) writes a
// field: quoted when it holds a comma, a quote, CR or LF, starts with a
// space, or is `\.`; quotes inside doubled.
func appendCSVField(b, f []byte) []byte {
	if !csvNeedsQuotes(f) {
		return append(b, f...)
	}
	b = append(b, '"')
	for {
		i := bytes.IndexByte(f, '"')
		if i < 0 {
			b = append(b, f...)
			break
		}
		b = append(b, f[:i+1]...)
		b = append(b, '"')
		f = f[i+1:]
	}
	return append(b, '"')
}

func csvNeedsQuotes(f []byte) bool {
	if len(f) == 0 {
		return false
	}
	if len(f) == 2 && f[0] == '\\' && f[1] == '.' {
		return true
	}
	for _, c := range f {
		if c == '\n' || c == '\r' || c == '"' || c == ',' {
			return true
		}
	}
	r, _ := utf8.DecodeRune(f)
	return unicode.IsSpace(r)
}

// pgRaw is what a pgx result offers beside Scan (keelsql's adapter keeps
// pgx.Rows' methods).
type pgRaw interface {
	RawValues() [][]byte
	FieldDescriptions() []pgconn.FieldDescription
}

// PostgreSQL type OIDs of the source's columns.
const (
	oidInt8        = 20
	oidText        = 25
	oidTimestamptz = 1184
)

var pgSourceTypes = [7]uint32{oidInt8, oidText, oidText, oidInt8, oidText, oidText, oidTimestamptz}

// pgEpoch is PostgreSQL's timestamp zero.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

var errBadWire = errors.New("export: unexpected wire value from the source")

// rawSource reads the source's rows of one batch into a rawOrder.
type rawSource struct {
	rs   keelsql.Rows
	pg   pgRaw // the wire path
	isPG bool
	text [4]sql.RawBytes
	str  [4]string
	at   int64
	t    time.Time
}

func newRawSource(rs keelsql.Rows, dialect string) *rawSource {
	s := &rawSource{rs: rs, isPG: dialect == "postgres"}
	if !s.isPG {
		return s
	}
	p, ok := rs.(pgRaw)
	if !ok {
		return s
	}
	fd := p.FieldDescriptions()
	if len(fd) != len(pgSourceTypes) {
		return s
	}
	for i, f := range fd {
		// Binary integers and timestamps, text in either format (the same
		// bytes); anything else takes the Scan path.
		if f.DataTypeOID != pgSourceTypes[i] || (f.DataTypeOID != oidText && f.Format != pgx.BinaryFormatCode) {
			return s
		}
	}
	s.pg = p
	return s
}

// next reads the current row (after rs.Next) into o.
func (s *rawSource) next(o *rawOrder) error {
	if s.pg == nil && s.isPG {
		// PostgreSQL without the expected wire formats: pgx's own scan.
		if err := s.rs.Scan(&o.id, &s.str[0], &s.str[1], &o.amount, &s.str[2], &s.str[3], &s.t); err != nil {
			return err
		}
		o.orderNo, o.customer, o.currency, o.status = []byte(s.str[0]), []byte(s.str[1]), []byte(s.str[2]), []byte(s.str[3])
		o.createdAt = s.t.UTC()
		return nil
	}
	if s.pg == nil {
		if err := s.rs.Scan(&o.id, &s.text[0], &s.text[1], &o.amount, &s.text[2], &s.text[3], &s.at); err != nil {
			return err
		}
		o.orderNo, o.customer, o.currency, o.status = s.text[0], s.text[1], s.text[2], s.text[3]
		o.createdAt = time.UnixMicro(s.at).UTC()
		return nil
	}
	v := s.pg.RawValues()
	if len(v[0]) != 8 || len(v[3]) != 8 || len(v[6]) != 8 {
		return errBadWire
	}
	o.id = int64(binary.BigEndian.Uint64(v[0]))
	o.orderNo, o.customer = v[1], v[2]
	o.amount = int64(binary.BigEndian.Uint64(v[3]))
	o.currency, o.status = v[4], v[5]
	o.createdAt = time.UnixMicro(pgEpoch + int64(binary.BigEndian.Uint64(v[6]))).UTC()
	return nil
}
