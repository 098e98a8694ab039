-- The double-entry ledger: accounts per currency, an append-only journal
-- of balanced entries, one per (subject, action).

-- name: AccountEnsure
INSERT INTO pay_account (code, currency, kind, allow_negative, balance_minor, updated_at)
VALUES ($1, $2, $3, $4, 0, $5)
ON CONFLICT (code, currency) DO NOTHING;

-- name: AccountMove
-- Refused (no row) when the account would go below zero and its type
-- does not allow it.
UPDATE pay_account SET balance_minor = balance_minor + $3, updated_at = $4
WHERE code = $1 AND currency = $2 AND (allow_negative = 1 OR balance_minor + $3 >= 0);

-- name: AccountList
SELECT code, currency, kind, allow_negative, balance_minor, updated_at FROM pay_account ORDER BY currency, code;

-- name: JournalInsert
INSERT INTO pay_journal (entry_key, subject, action, payment_no, refund_no, event_id, amount_minor, currency,
                         reverses, posted_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (entry_key) DO NOTHING
RETURNING id;

-- name: JournalByKey
SELECT id, amount_minor, currency FROM pay_journal WHERE entry_key = $1;

-- name: JournalLinesInsert
-- An entry's two lines: the amount debited to one account and credited
-- to another.
INSERT INTO pay_journal_line (journal_id, line, account, side, amount_minor, currency)
VALUES ($1, 1, $2, 'D', $4, $5), ($1, 2, $3, 'C', $4, $5);

-- name: JournalOfPayment
SELECT id, entry_key, subject, action, payment_no, refund_no, event_id, amount_minor, currency,
       COALESCE(reverses, 0), posted_at
FROM pay_journal WHERE payment_no = $1 ORDER BY id;

-- name: JournalCount
SELECT COUNT(*) FROM pay_journal WHERE payment_no = $1 AND action = $2;

-- name: JournalUnbalanced
-- Entries whose debits and credits differ: none may exist.
SELECT j.id FROM pay_journal j JOIN pay_journal_line l ON l.journal_id = j.id
GROUP BY j.id
HAVING SUM(CASE WHEN l.side = 'D' THEN l.amount_minor ELSE 0 END) <> SUM(CASE WHEN l.side = 'C' THEN l.amount_minor ELSE 0 END);

-- name: OldestUnposted
-- The oldest paid payment without its capture entry: the age of what the
-- ledger has not yet booked.
SELECT MIN(p.paid_at) FROM pay_payment p
WHERE p.state = 'paid' AND NOT EXISTS (SELECT 1 FROM pay_journal j WHERE j.entry_key = 'payment:' || p.payment_no || ':capture');

-- name: JournalInsertMany
-- The entries of a ledger batch (none reversing another) with their two
-- lines, in one statement: an entry whose key is booked already is not
-- booked again and returns nothing (the caller checks its amount). Returns
-- the keys booked.
WITH n AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                         $8::text[], $9::text[], $10::text[]) WITH ORDINALITY
        AS n (entry_key, subject, action, payment_no, refund_no, event_id, amount_minor, currency, debit, credit, ord)
), j AS (
    -- in the batch's order: the journal's ids follow delivery order
    INSERT INTO pay_journal (entry_key, subject, action, payment_no, refund_no, event_id, amount_minor, currency,
                             reverses, posted_at)
    SELECT entry_key, subject, action, payment_no, refund_no, event_id, amount_minor, currency, NULL, $11 FROM n
    ORDER BY ord
    ON CONFLICT (entry_key) DO NOTHING
    RETURNING id, entry_key
), l AS (
    INSERT INTO pay_journal_line (journal_id, line, account, side, amount_minor, currency)
    SELECT j.id, 1, n.debit, 'D', n.amount_minor, n.currency FROM j JOIN n ON n.entry_key = j.entry_key
    UNION ALL
    SELECT j.id, 2, n.credit, 'C', n.amount_minor, n.currency FROM j JOIN n ON n.entry_key = j.entry_key
)
SELECT entry_key FROM j;
