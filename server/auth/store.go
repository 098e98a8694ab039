package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// ErrUnauthenticated: no credential, or one that is unknown, revoked or
// expired. Deliberately says nothing about which.
var ErrUnauthenticated = errors.New("auth: not authenticated")

// TokenPrefix starts every API token, so leaked tokens are easy to grep for.
const TokenPrefix = "keel_"

// lastUsedEvery bounds how often a token's last_used_at is written, so
// authenticating is a read, not a write, on busy servers.
const lastUsedEvery = time.Minute

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,64}$`)

// Token is an API token's record; the secret itself is never stored.
type Token struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	CreatedBy  string     `json:"created_by"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Store keeps tokens and sessions in the server line's tables.
type Store struct {
	db      *sql.DB
	dialect string
	audited AuditedTx
}

// AuditedTx runs f in one transaction of the database Keel runs on, in
// which audit writes to the engine's audit log (keel.Client.AuditRecordTx):
// a token change and its audit entry commit together or not at all.
type AuditedTx func(ctx context.Context, f func(q keelsql.Querier, audit func(keel.Audit) error) error) error

// AuditedTxOf builds an AuditedTx from a module-style database handle and
// the engine client on the same database.
func AuditedTxOf[TTx any](db keelsql.DB[TTx], c *keel.Client[TTx]) AuditedTx {
	return func(ctx context.Context, f func(q keelsql.Querier, audit func(keel.Audit) error) error) error {
		return db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			return f(tx, func(a keel.Audit) error { return c.AuditRecordTx(ctx, tx.Native(), a) })
		})
	}
}

// NewStore uses db (the database Keel runs on) with dialect "postgres" or
// "sqlite" for placeholders; token changes run through audited.
func NewStore(db *sql.DB, dialect string, audited AuditedTx) *Store {
	return &Store{db: db, dialect: dialect, audited: audited}
}

// q rewrites '?' placeholders as $n for PostgreSQL. Queries are constants
// of this file; no user input is ever part of SQL text.
func (s *Store) q(query string) string {
	if s.dialect != "postgres" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func micros(t time.Time) int64 { return t.UTC().UnixMicro() }

func fromMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMicro(v.Int64).UTC()
	return &t
}

func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Hash is the stored form of a secret: hex SHA-256. Secrets are 256-bit
// random values, so a fast hash is enough; nothing is guessable.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CreateToken makes a token and returns its secret, which is shown once.
// The token and its "token.create" audit entry (actor from ctx) commit
// together.
func (s *Store) CreateToken(ctx context.Context, name string, role Role, createdBy, reason string) (string, *Token, error) {
	if !namePattern.MatchString(name) {
		return "", nil, fmt.Errorf("%w: token name must be 1-64 of A-Z a-z 0-9 _ . : -", keeltype.ErrInvalidArgument)
	}
	if role < RoleViewer || role > RoleAdmin {
		return "", nil, fmt.Errorf("%w: token role must be viewer, operator or admin", keeltype.ErrInvalidArgument)
	}
	raw, err := randomSecret()
	if err != nil {
		return "", nil, err
	}
	secret := TokenPrefix + raw
	now := time.Now().UTC()
	var id int64
	err = s.audited(ctx, func(q keelsql.Querier, audit func(keel.Audit) error) error {
		err := q.QueryRow(ctx, s.q(`INSERT INTO keel_api_token (name, role, hash, created_at, created_by)
			VALUES (?, ?, ?, ?, ?) RETURNING id`), name, role.String(), Hash(secret), micros(now), createdBy).Scan(&id)
		if err != nil {
			return err
		}
		return audit(keel.Audit{Action: "token.create", Target: "token:" + strconv.FormatInt(id, 10),
			Reason: reason, Context: map[string]any{"name": name, "role": role.String()}})
	})
	if err != nil {
		return "", nil, fmt.Errorf("creating token: %w", err)
	}
	return secret, &Token{ID: id, Name: name, Role: role.String(), CreatedAt: now.Truncate(time.Microsecond), CreatedBy: createdBy}, nil
}

const tokenColumns = `id, name, role, created_at, created_by, last_used_at, revoked_at`

func scanToken(row interface{ Scan(...any) error }) (*Token, error) {
	var t Token
	var created int64
	var used, revoked sql.NullInt64
	if err := row.Scan(&t.ID, &t.Name, &t.Role, &created, &t.CreatedBy, &used, &revoked); err != nil {
		return nil, err
	}
	t.CreatedAt = time.UnixMicro(created).UTC()
	t.LastUsedAt, t.RevokedAt = fromMicros(used), fromMicros(revoked)
	return &t, nil
}

// GetToken returns one token's record.
func (s *Store) GetToken(ctx context.Context, id int64) (*Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, s.q(`SELECT `+tokenColumns+` FROM keel_api_token WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token %d: %w", id, keeltype.ErrNotFound)
	}
	return t, err
}

// RevokeToken revokes a token, ends its sessions and audits
// "token.revoke", in one transaction. The revocation is a conditional
// update: of two concurrent revocations one wins, the other gets
// ErrInvalidState.
func (s *Store) RevokeToken(ctx context.Context, id int64, reason string) (*Token, error) {
	t, err := s.GetToken(ctx, id)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	err = s.audited(ctx, func(q keelsql.Querier, audit func(keel.Audit) error) error {
		n, err := q.Exec(ctx, s.q(`UPDATE keel_api_token SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`), micros(now), id)
		if err != nil {
			return fmt.Errorf("revoking token %d: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: token %d is already revoked", keeltype.ErrInvalidState, id)
		}
		if _, err := q.Exec(ctx, s.q(`DELETE FROM keel_session WHERE token_id = ?`), id); err != nil {
			return fmt.Errorf("ending sessions of token %d: %w", id, err)
		}
		return audit(keel.Audit{Action: "token.revoke", Target: "token:" + strconv.FormatInt(id, 10),
			Reason: reason, Context: map[string]any{"name": t.Name, "role": t.Role}})
	})
	if err != nil {
		return nil, err
	}
	t.RevokedAt = &now
	return t, nil
}

// ListTokens pages tokens in id order after afterID.
func (s *Store) ListTokens(ctx context.Context, afterID int64, limit int) ([]*Token, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+tokenColumns+` FROM keel_api_token WHERE id > ? ORDER BY id LIMIT ?`), afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	defer rows.Close()
	var out []*Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// HasActiveToken reports whether an unrevoked token with role exists.
func (s *Store) HasActiveToken(ctx context.Context, role Role) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT count(*) FROM keel_api_token WHERE role = ? AND revoked_at IS NULL`), role.String()).Scan(&n)
	return n > 0, err
}

// Authenticate resolves a bearer token.
func (s *Store) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 128 {
		return nil, ErrUnauthenticated
	}
	var p Principal
	var role string
	var used sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, name, role, last_used_at FROM keel_api_token
		WHERE hash = ? AND revoked_at IS NULL`), Hash(secret)).Scan(&p.TokenID, &p.Name, &role, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("authenticating: %w", err)
	}
	if p.Role, err = ParseRole(role); err != nil {
		return nil, ErrUnauthenticated
	}
	now := time.Now().UTC()
	if !used.Valid || now.Sub(time.UnixMicro(used.Int64)) > lastUsedEvery {
		_, _ = s.db.ExecContext(ctx, s.q(`UPDATE keel_api_token SET last_used_at = ? WHERE id = ?`), micros(now), p.TokenID)
	}
	return &p, nil
}

// CreateSession starts a console session for a token's principal and
// returns the cookie value (a secret; only its hash is stored).
func (s *Store) CreateSession(ctx context.Context, p *Principal, ttl time.Duration) (string, error) {
	cookie, err := randomSecret()
	if err != nil {
		return "", err
	}
	csrf, err := randomSecret()
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	_, _ = s.db.ExecContext(ctx, s.q(`DELETE FROM keel_session WHERE expires_at < ?`), micros(now))
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO keel_session (hash, token_id, csrf, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)`), Hash(cookie), p.TokenID, csrf, micros(now), micros(now.Add(ttl)))
	if err != nil {
		return "", fmt.Errorf("creating session: %w", err)
	}
	return cookie, nil
}

// Session resolves a session cookie to its principal, with the session's
// CSRF token.
func (s *Store) Session(ctx context.Context, cookie string) (*Principal, error) {
	if cookie == "" || len(cookie) > 128 {
		return nil, ErrUnauthenticated
	}
	var p Principal
	var role string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT t.id, t.name, t.role, s.csrf FROM keel_session s
		JOIN keel_api_token t ON t.id = s.token_id
		WHERE s.hash = ? AND s.expires_at > ? AND t.revoked_at IS NULL`), Hash(cookie), micros(time.Now())).
		Scan(&p.TokenID, &p.Name, &role, &p.CSRF)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("reading session: %w", err)
	}
	if p.Role, err = ParseRole(role); err != nil {
		return nil, ErrUnauthenticated
	}
	return &p, nil
}

// EndSession deletes a session (logout).
func (s *Store) EndSession(ctx context.Context, cookie string) error {
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM keel_session WHERE hash = ?`), Hash(cookie))
	return err
}

// CSRFMatches compares a submitted anti-forgery token in constant time.
func CSRFMatches(p *Principal, given string) bool {
	return p != nil && p.CSRF != "" && subtle.ConstantTimeCompare([]byte(p.CSRF), []byte(given)) == 1
}

// SharedSecret returns the secret named name, creating a random 256-bit one
// if no instance has yet. Every instance on the database gets the same
// value: the first insert wins and the others read it.
func (s *Store) SharedSecret(ctx context.Context, name string) ([]byte, error) {
	fresh, err := randomSecret()
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO keel_server_secret (name, value, created_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO NOTHING`), name, fresh, micros(time.Now())); err != nil {
		return nil, fmt.Errorf("storing secret %s: %w", name, err)
	}
	var v string
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT value FROM keel_server_secret WHERE name = ?`), name).Scan(&v); err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", name, err)
	}
	return []byte(v), nil
}
