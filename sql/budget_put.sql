-- `threadbase budget set --scope S`: the scope's caps, replacing what was set (?1 scope, ?2
-- tokens or NULL, ?3 usd or NULL, ?4 when, ?5 the host that set it, ?6 turns or NULL: V18,
-- scope `thread` only).
INSERT INTO budgets (scope, tokens, usd, set_at, set_by, turns) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (scope) DO UPDATE SET
    tokens = excluded.tokens, usd = excluded.usd, set_at = excluded.set_at,
    set_by = excluded.set_by, turns = excluded.turns
