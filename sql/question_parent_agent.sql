-- A contract B thread's path and its parent's (the notice of its question goes there); no row
-- for a thread of another contract.
SELECT {question_parent_row} FROM threads WHERE id = ?1 AND agent_state IS NOT NULL
