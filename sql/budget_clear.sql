-- `threadbase budget clear --scope S`: the scope has no cap any more.
DELETE FROM budgets WHERE scope = ?1
