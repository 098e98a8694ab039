-- name: NoteInsert
INSERT INTO note (body, due_at) VALUES (?1, ?2) RETURNING id;

-- name: NoteRemind
-- Conditional: a second reminder of the same note changes nothing.
UPDATE note SET reminded_at = ?2 WHERE id = ?1 AND reminded_at IS NULL;

-- name: NotesReminded
SELECT count(*) FROM note WHERE reminded_at IS NOT NULL AND id IN (SELECT value FROM json_each(?1));
