-- What a Pi session's tool results have reported of the spend below it (usage_told primary
-- key).
SELECT {spend_row}
FROM usage_told WHERE session_id = ?1
